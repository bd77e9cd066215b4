#!/usr/bin/env bash
# Sets up this machine (scripts/setup.sh test) and runs every test: the Swift unit tests (and the
# deterministic simulator, SIMULATOR_SCHEDULES=N to change its 10,000 schedules), the
# end-to-end tests on a simulated LAN of network namespaces with real avahi-daemons, then the Debian
# package's test (scripts/test-package.sh). Needs root. Arguments go to pytest (and skip the package).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "test: run as root (the simulated LAN needs network namespaces): sudo $0" >&2; exit 1; }
scripts/setup.sh test
export AVAHI_COMPAT_NOWARN=1
echo "== format (swift format lint --strict, .swift-format)"
# The formatter that comes with the toolchain; `swift format --in-place --recursive Sources Tests Examples
# Package.swift` makes the tree pass.
swift format lint --strict --recursive Sources Tests Examples Package.swift || { echo "test: the code is not formatted (see above)" >&2; exit 1; }
echo "== build"
swift build --build-tests 2>&1 | grep -v "prohibited flag" | tail -n 3
echo "== unit tests"
log=.build/unit-tests.log
# (Without the simulator: it runs next, on its own; beside the tests that wait in real time it would
# take one of the machine's two cooperative threads for its CPU work.)
if swift test --skip-build --skip SimulatorTests > "$log" 2>&1; then rc=0; else rc=$?; fi
grep -E "✘|^simulator:|Test run with" "$log" || true
[ "$rc" = 0 ] || { grep -vE "prohibited flag" "$log" | tail -n 40; echo "test: unit tests failed" >&2; exit 1; }
echo "== LanchatKit: documentation (DocC) and API (against its last release)"
scripts/docs.sh
scripts/api-check.sh
# The simulator's long run goes on its own: it runs one worker per core (SIMULATOR_WORKERS), and the
# other suites' real-time waits are not for a machine that busy.
echo "== simulator (${SIMULATOR_SCHEDULES:-10000} seeded schedules of whole rooms with faults)"
log=.build/simulator.log
if SIMULATOR_SCHEDULES=${SIMULATOR_SCHEDULES:-10000} swift test --skip-build --filter SimulatorTests > "$log" 2>&1; then rc=0; else rc=$?; fi
grep -E "✘|^simulator:|Test run with" "$log" || true
[ "$rc" = 0 ] || { grep -vE "prohibited flag" "$log" | tail -n 40; echo "test: the simulator found a violation" >&2; exit 1; }
echo "== end-to-end tests (simulated LAN)"
# Leftovers of an earlier, interrupted run would only confuse the new one.
for d in /tmp/lanchat-e2e-*/lan; do [ -d "$d" ] && TESTLAN_DIR=$d scripts/testlan.sh down || true; done
.venv/bin/python -m pytest -q --timeout 300 -p no:cacheprovider Tests/e2e "$@"
# The Debian package: a release build, then install / run / upgrade / purge on a simulated host.
# LANCHAT_SKIP_PACKAGE=1 skips it (a quicker loop while developing).
if [ -z "${LANCHAT_SKIP_PACKAGE:-}" ] && [ $# -eq 0 ]; then
  echo "== Debian package (release build, install, upgrade, purge)"
  scripts/test-package.sh
fi
