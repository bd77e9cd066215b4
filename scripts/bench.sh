#!/usr/bin/env bash
# Builds release binaries and runs the benchmarks on a simulated LAN (root). Figures print next to
# baselines measured in the same run. Extra arguments go to bench/discovery.py (e.g. --trials 20, --json).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "bench: run as root (the simulated LAN needs network namespaces)" >&2; exit 1; }
scripts/setup.sh test
swift build -c release --static-swift-stdlib 2>&1 | grep -v "prohibited flag" | tail -n 1
export AVAHI_COMPAT_NOWARN=1 LANCHAT_BIN="$root/.build/release"
exec .venv/bin/python bench/discovery.py "$@"
