#!/usr/bin/env bash
# Inside a leg (see legs.sh): make sure the leg's virtualenv exists and is current, then
# print its path. Keyed by a hash of the requirement files and the manifest, so a second
# run starts in seconds and a changed requirement rebuilds only that leg.
set -euo pipefail
: "${LGC_PYTHON:?} ${LGC_REPO:?} ${LGC_CACHE:?} ${LGC_LEG:?}"
cd "$LGC_REPO"
leg_requirements="requirements_test_${LGC_LEG}.txt"
manifest=custom_components/langgraph_conversation/manifest.json
key=$(cat requirements_test.txt "$leg_requirements" "$manifest" scripts/lib/leg_venv.sh | sha256sum | cut -c1-16)
venv="$LGC_CACHE/venv-$LGC_LEG-$key"
if [ -x "$venv/bin/python" ] && [ -f "$venv/.lgc-complete" ]; then
    echo "$venv"
    exit 0
fi
log() { printf '[%s] leg %s: %s\n' "$(date +%H:%M:%S)" "$LGC_LEG" "$*" >&2; }
mkdir -p "$LGC_CACHE"
# Older venvs of this leg are stale now; drop them so the cache does not grow.
rm -rf "$LGC_CACHE"/venv-"$LGC_LEG"-*
log "creating $venv"
"$LGC_PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check uv >&2
uv=("$venv/bin/uv" pip install --quiet --python "$venv/bin/python")
log "installing Home Assistant and the test tools"
"${uv[@]}" -r "$leg_requirements" -r requirements_test.txt >&2
# The integration's own requirements, installed as Home Assistant does at runtime: under
# that Home Assistant's package_constraints.txt. A conflict here is a real failure.
constraints=$("$venv/bin/python" -c 'import homeassistant, os; print(os.path.join(os.path.dirname(homeassistant.__file__), "package_constraints.txt"))')
mapfile -t requirements < <("$venv/bin/python" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["requirements"]))' "$manifest")
log "installing the manifest requirements under Home Assistant's constraints: ${requirements[*]}"
for requirement in "${requirements[@]}"; do
    "${uv[@]}" --upgrade --index-strategy unsafe-first-match --constraint "$constraints" "$requirement" >&2 || {
        log "the manifest requirement '$requirement' cannot be installed under Home Assistant $("$venv/bin/python" -c 'from homeassistant.const import __version__; print(__version__)')'s constraints"
        exit 3
    }
done
touch "$venv/.lgc-complete"
echo "$venv"
