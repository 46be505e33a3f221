#!/usr/bin/env bash
# Inside a leg: ruff, then pytest with coverage. Prints "LGC-RESULT <leg> <passed> <failed>
# <skipped>" for scripts/test to add up, and exits non-zero on any failure.
set -uo pipefail
: "${LGC_REPO:?} ${LGC_CACHE:?} ${LGC_LEG:?}"
cd "$LGC_REPO"
venv=$(bash scripts/lib/leg_venv.sh) || { echo "LGC-RESULT $LGC_LEG 0 1 0"; exit 1; }
export PATH="$venv/bin:$PATH"
status=0
echo "== leg $LGC_LEG: ruff"
if ! ruff check --no-cache custom_components tests 2>/dev/null >/tmp/lgc-ruff.txt; then
    cat /tmp/lgc-ruff.txt
    ruff_failed=1
    status=1
else
    ruff_failed=0
    echo "ruff: clean"
fi
if ! ruff format --no-cache --check custom_components tests >/tmp/lgc-ruff-format.txt 2>&1; then
    cat /tmp/lgc-ruff-format.txt
    ruff_failed=$((ruff_failed + 1))
    status=1
fi
echo "== leg $LGC_LEG: pytest ($(python -c 'import sys; print(sys.version.split()[0])'), Home Assistant $(python -c 'from homeassistant.const import __version__; print(__version__)'))"
junit=/tmp/lgc-junit-$LGC_LEG.xml
# shellcheck disable=SC2086  # LGC_PYTEST_ARGS is a word list on purpose
python -m pytest -p no:cacheprovider --junitxml="$junit" \
    --cov --cov-report=term --cov-report=xml:/tmp/lgc-coverage-$LGC_LEG.xml \
    ${LGC_PYTEST_ARGS:-} "$@"
pytest_status=$?
[ $pytest_status -eq 0 ] || status=1
read -r passed failed skipped < <(python - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print(0, 1, 0); raise SystemExit
suites = [root] if root.tag == "testsuite" else list(root)
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(total - failed - skipped, failed, skipped)
PY
)
# A lint failure counts as a failed check so the summary cannot look green.
failed=$((failed + ruff_failed))
if [ $pytest_status -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "LGC-RESULT $LGC_LEG $passed $failed $skipped"
exit $status
