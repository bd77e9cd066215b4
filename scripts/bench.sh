#!/usr/bin/env bash
# Builds release binaries and runs the benchmarks on a simulated LAN (root). Figures print next to
# baselines measured in the same run.
#   scripts/bench.sh                  every benchmark below, one after the other
#   scripts/bench.sh discovery ARGS   only discovery (--trials N, --idle-seconds S, --json)
#   scripts/bench.sh sessions ARGS    only sessions (--hosts N, --room-hosts N, --room-only, --json)
#   scripts/bench.sh files ARGS       only files and history for newcomers (--mib N, --messages N, --only file|history, --json)
#   scripts/bench.sh search ARGS      only history search: index vs LIKE scan (--messages N, --json)
#   scripts/bench.sh instructions ARGS  only instruction counts under callgrind (--messages N, --lone N, --mib N, --rounds N, --json)
#   scripts/bench.sh compare OLD.json NEW.json   two runs' figures side by side, with new / old
#   scripts/bench.sh order            not a benchmark: rewrites packaging/lanchatd.order, the functions lanchatd
#                                     runs idle and chatting (under callgrind), which its release link lays out first
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ "${1:-}" = compare ]; then shift; exec python3 bench/compare.py "$@"; fi
[ "$(id -u)" = 0 ] || { echo "bench: run as root (the simulated LAN needs network namespaces)" >&2; exit 1; }
scripts/setup.sh test >&2  # (stdout is for figures: --json)
swift build -c release --static-swift-stdlib 2>&1 | grep -v "prohibited flag" | tail -n 1 >&2  # (stdout is for figures: --json)
export AVAHI_COMPAT_NOWARN=1 LANCHAT_BIN="$root/.build/release"
case "${1:-all}" in
  discovery) shift; exec .venv/bin/python bench/discovery.py "$@" ;;
  sessions) shift; exec .venv/bin/python bench/sessions.py "$@" ;;
  files) shift; exec .venv/bin/python bench/files.py "$@" ;;
  search) shift; exec .venv/bin/python bench/search.py "$@" ;;
  instructions) shift; exec .venv/bin/python bench/instructions.py "$@" ;;
  order) shift; exec .venv/bin/python bench/order.py "$@" ;;
  all)
    # Every benchmark runs even if an earlier one missed a figure; the exit status says whether any did.
    failed=()
    for b in discovery sessions files search instructions; do
      .venv/bin/python "bench/$b.py" || failed+=("$b")
      echo
    done
    [ ${#failed[@]} -eq 0 ] || { echo "bench: figures missing in: ${failed[*]} (see above)" >&2; exit 1; } ;;
  *) echo "bench: unknown benchmark '$1' (discovery, sessions, files, search, instructions, or nothing for all)" >&2; exit 1 ;;
esac
