#!/usr/bin/env bash
# A shell, or one command, "on" a host of the demo LAN that `sudo scripts/run.sh --demo` started.
#   sudo scripts/demo.sh h2              a shell on h2: lanchat and lanchatd on PATH, prompt "[h2] ~#"
#   sudo scripts/demo.sh h2 CMD [ARG...] run one command on h2 (e.g. lanchat history)
# Each host is its own machine as far as lanchat can tell: its own network, hostname, /var/lib, /run,
# /tmp and home; exit the shell (or Ctrl-D) to come back to this machine.
# Tests/e2e/test_readme.py runs the README's commands on a demo LAN of its own: LANCHAT_DEMO_DIR (default
# /tmp/lanchat-demo) says where that LAN is, LANCHAT_DEMO_BIN (default .build/release) which binaries it runs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
demo_dir=${LANCHAT_DEMO_DIR:-/tmp/lanchat-demo}
export TESTLAN_DIR=$demo_dir/lan
die() { echo "demo: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it enters the simulated host's namespaces): sudo $0 $*"
host=${1:-}
[ -n "$host" ] || die "which host? sudo $0 h1|h2|h3 [COMMAND...]"
shift
pidfile=$TESTLAN_DIR/hosts/$host/pid
[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null \
  || die "no demo host '$host' running (hosts: $(ls "$TESTLAN_DIR/hosts" 2>/dev/null | tr '\n' ' ')); start the demo with: sudo scripts/run.sh --demo"
bin=${LANCHAT_DEMO_BIN:-$root/.build/release}
[ -x "$bin/lanchat" ] || die "no release build in $bin: run sudo scripts/run.sh --demo first"
# A clean environment, as on a freshly installed host: the default socket and state paths apply.
clean=(env -i "PATH=$bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root USER=root LOGNAME=root
       "TERM=${TERM:-dumb}" "LANG=${LANG:-C.UTF-8}" AVAHI_COMPAT_NOWARN=1 ${NO_COLOR:+NO_COLOR=$NO_COLOR})
if [ $# -eq 0 ]; then
  echo "demo: a shell on $host (lanchat on PATH; exit to leave)" >&2
  exec "$root/scripts/testlan.sh" exec "$host" "${clean[@]}" "DEMO_PROMPT=[$host] \\w# " \
    bash -c 'cd && PS1=$DEMO_PROMPT exec bash --norc --noprofile -i'
fi
# In the host's own home (as the shell starts), so that files a command writes stay on that host.
cd /
exec "$root/scripts/testlan.sh" exec "$host" "${clean[@]}" bash -c 'cd && exec "$@"' demo "$@"
