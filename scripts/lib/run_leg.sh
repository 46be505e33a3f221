#!/usr/bin/env bash
# Inside a leg: ruff, then pytest with coverage. Arguments: [--soak] [pytest arguments...].
# Prints "LGC-RESULT <leg> <passed> <failed> <skipped>" for scripts/test to add up, and
# exits non-zero on any failure.
set -uo pipefail
: "${LGC_REPO:?} ${LGC_CACHE:?} ${LGC_LEG:?}"
cd "$LGC_REPO"
# --soak (first argument, from scripts/test): the soak test runs 2,000 turns instead of
# its reduced count.
if [ "${1:-}" = "--soak" ]; then
    export LGC_SOAK_TURNS=2000
    shift
fi
venv=$(bash scripts/lib/leg_venv.sh) || { echo "LGC-RESULT $LGC_LEG 0 1 0"; exit 1; }
export PATH="$venv/bin:$PATH"
# Test dependencies that could not follow Home Assistant's package_constraints.txt (the
# leg's venv installs every other one under them; see scripts/lib/leg_venv.sh).
if [ -s "$venv/.lgc-unconstrained" ]; then
    echo "== leg $LGC_LEG: WARNING: test dependencies installed outside Home Assistant's constraints: $(tr '\n' ' ' <"$venv/.lgc-unconstrained")"
else
    echo "== leg $LGC_LEG: every test dependency follows Home Assistant's package_constraints.txt"
fi
status=0
# This run's own scratch folder: runs of the same leg from several checkouts at once
# must not read each other's lint, JUnit or coverage files.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/lgc-$LGC_LEG.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# Coverage's data file too: by default it is .coverage in the repository, which two legs
# running at once (scripts/test --jobs) would erase and append to under each other.
export COVERAGE_FILE=$scratch/.coverage
echo "== leg $LGC_LEG: ruff"
if ! ruff check --no-cache custom_components fakes tests scripts 2>/dev/null >"$scratch/ruff.txt"; then
    cat "$scratch/ruff.txt"
    ruff_failed=1
    status=1
else
    ruff_failed=0
    echo "ruff: clean"
fi
if ! ruff format --no-cache --check custom_components fakes tests scripts >"$scratch/ruff-format.txt" 2>&1; then
    cat "$scratch/ruff-format.txt"
    ruff_failed=$((ruff_failed + 1))
    status=1
fi
echo "== leg $LGC_LEG: pytest ($(python -c 'import sys; print(sys.version.split()[0])'), Home Assistant $(python -c 'from homeassistant.const import __version__; print(__version__)'))"
junit_isolated=$scratch/junit-isolated
junit=$scratch/junit.xml
rm -rf "$junit" "$junit_isolated"
mkdir -p "$junit_isolated"
pytest_status=0
common=(-p no:cacheprovider)
# Coverage is measured on the legs whose Python has sys.monitoring for branches (3.14 and
# later: coverage's "sysmon" core, about a tenth more CPU). On older ones only the C
# tracer can measure branches, and it makes the suite's CPU time about 1.7 times as long,
# so those legs run without it unless LGC_COVERAGE=1 asks for it.
if [ "${LGC_COVERAGE:-}" != 1 ] && ! python -c 'import sys; sys.exit(sys.version_info < (3, 14))'; then
    echo "== leg $LGC_LEG: no coverage on Python $(python -c 'import sys; print("%d.%d" % sys.version_info[:2])') (the Python 3.14 legs report it; LGC_COVERAGE=1 measures it here too)"
else
    common+=(--cov --cov-report=xml:$scratch/coverage.xml)
fi
# A leg on a core newer than the test plugin's pin loads the plugin's compatibility shims
# first (tests/compat_newest.py; pytest imports -p modules before installed plugins).
if grep -q '^# lgc-core:' "requirements_test_${LGC_LEG}.txt"; then
    common+=(-p tests.compat_newest)
fi
if [ $# -eq 0 ] && [ -z "${LGC_PYTEST_ARGS:-}" ]; then
    # Tests of first-use behaviour (marker `isolated`) each get a fresh interpreter of
    # their own: a first LiteLLM call, a first import, is first only once per process.
    collected=$(python -m pytest "${common[@]}" --no-cov -m isolated -q --collect-only) || {
        echo "$collected"
        echo "could not collect the isolated tests"
        pytest_status=1
    }
    mapfile -t isolated < <(grep '::' <<<"$collected")
    append=()
    isolated_start=$(date +%s)
    for number in "${!isolated[@]}"; do
        python -m pytest "${common[@]}" --cov-report= "${append[@]}" \
            --junitxml="$junit_isolated/$number.xml" -q "${isolated[$number]}" ||
            pytest_status=$?
        append=(--cov-append)
    done
    echo "== leg $LGC_LEG: ${#isolated[@]} first-use tests, each in its own interpreter, took $(($(date +%s) - isolated_start))s"
    set -- -m "not isolated" "${append[@]}"
fi
# shellcheck disable=SC2086  # LGC_PYTEST_ARGS is a word list on purpose
python -m pytest "${common[@]}" --durations=15 --cov-report=term --junitxml="$junit" ${LGC_PYTEST_ARGS:-} "$@" ||
    pytest_status=$?
[ $pytest_status -eq 0 ] || status=1
read -r passed failed skipped < <(python - "$junit" "$junit_isolated"/*.xml <<'PY'
import os, sys, xml.etree.ElementTree as ET
total = failed = skipped = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1
        continue
    for suite in [root] if root.tag == "testsuite" else list(root):
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
print(total - failed - skipped, failed, skipped)
PY
)
# A lint failure counts as a failed check so the summary cannot look green.
failed=$((failed + ruff_failed))
if [ $pytest_status -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "LGC-RESULT $LGC_LEG $passed $failed $skipped"
exit $status
