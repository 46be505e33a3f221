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
ready() { [ -x "$venv/bin/python" ] && [ -f "$venv/.lgc-complete" ]; }
# Each use is stamped, so venvs nobody used for days can go (see below).
if ready; then
    touch "$venv/.lgc-used"
    echo "$venv"
    exit 0
fi
log() { printf '[%s] leg %s: %s\n' "$(date +%H:%M:%S)" "$LGC_LEG" "$*" >&2; }
mkdir -p "$LGC_CACHE"
# Two runs needing the same new venv (two checkouts, say) build it once: the second
# waits for the first and then finds it ready.
exec 9>"$LGC_CACHE/.venv-$LGC_LEG-$key.lock"
flock 9
if ready; then
    touch "$venv/.lgc-used"
    echo "$venv"
    exit 0
fi
# Venvs of this leg unused for three days are stale; drop them so the cache does not
# grow. Newer ones may belong to another checkout's run going on right now.
for other in "$LGC_CACHE/venv-$LGC_LEG-"*; do
    [ "$other" != "$venv" ] || continue
    if [ -z "$(find "$other" -maxdepth 1 -name '.lgc-*' -mmin -4320 2>/dev/null)" ]; then
        rm -rf "$other"
    fi
done
rm -rf "$venv"
log "creating $venv"
"$LGC_PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check uv >&2
uv=("$venv/bin/uv" pip install --quiet --python "$venv/bin/python")
log "installing Home Assistant and the test tools"
"${uv[@]}" -r "$leg_requirements" -r requirements_test.txt >&2
# A leg on a release the test plugin does not cover yet names that core in its requirement
# file ("# lgc-core: homeassistant==X"): it replaces the plugin's pinned core, installed
# under its own package_constraints.txt (read from the wheel, so fetched without deps
# first). The plugin stays; tests/compat_newest.py bridges what it imports.
core=$(sed -n 's/^# lgc-core: *//p' "$leg_requirements")
overrides=()
if [ -n "$core" ]; then
    log "replacing the plugin's Home Assistant with $core under its own constraints"
    "${uv[@]}" --no-deps "$core" >&2
    core_constraints=$("$venv/bin/python" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("homeassistant").origin), "package_constraints.txt"))')
    "${uv[@]}" --constraint "$core_constraints" "$core" >&2
    # The plugin's own pin of the core must not pull the old one back in below.
    echo "$core" >"$venv/lgc-core-override.txt"
    overrides=(--override "$venv/lgc-core-override.txt")
fi
# The test tools again, now under Home Assistant's package_constraints.txt, so the tests run
# with the versions a real installation has. A test dependency that cannot is installed
# without them, loudly, and named in .lgc-unconstrained (run_leg.sh prints it every run).
constraints=$("$venv/bin/python" -c 'import homeassistant, os; print(os.path.join(os.path.dirname(homeassistant.__file__), "package_constraints.txt"))')
log "aligning the test tools with Home Assistant's package_constraints.txt"
: >"$venv/.lgc-unconstrained"
if ! "${uv[@]}" --constraint "$constraints" "${overrides[@]}" \
    -r "$leg_requirements" -r requirements_test.txt 2>"$venv/lgc-constraints.log" >&2; then
    tail -n 15 "$venv/lgc-constraints.log" >&2
    mapfile -t lines < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$leg_requirements" requirements_test.txt | grep -v '^$')
    fitting=()
    for line in "${lines[@]}"; do
        if "${uv[@]}" --dry-run --constraint "$constraints" "${overrides[@]}" "$line" \
            >/dev/null 2>>"$venv/lgc-constraints.log"; then
            fitting+=("$line")
        else
            log "WARNING: the test dependency '$line' cannot be installed under Home Assistant's constraints; installed without them (see $venv/lgc-constraints.log)"
            echo "$line" >>"$venv/.lgc-unconstrained"
        fi
    done
    [ ${#fitting[@]} -eq 0 ] ||
        "${uv[@]}" --constraint "$constraints" "${overrides[@]}" "${fitting[@]}" >&2 ||
        log "WARNING: the test dependencies that fit one by one do not fit together under Home Assistant's constraints; kept as installed (see $venv/lgc-constraints.log)"
fi
# The integration's own requirements, installed as Home Assistant does at runtime: under
# that Home Assistant's package_constraints.txt. A conflict here is a real failure.
mapfile -t requirements < <("$venv/bin/python" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["requirements"]))' "$manifest")
log "installing the manifest requirements under Home Assistant's constraints: ${requirements[*]}"
for requirement in "${requirements[@]}"; do
    "${uv[@]}" --upgrade --index-strategy unsafe-first-match --constraint "$constraints" "$requirement" >&2 || {
        log "the manifest requirement '$requirement' cannot be installed under Home Assistant $("$venv/bin/python" -c 'from homeassistant.const import __version__; print(__version__)')'s constraints"
        exit 3
    }
done
touch "$venv/.lgc-complete" "$venv/.lgc-used"
echo "$venv"
