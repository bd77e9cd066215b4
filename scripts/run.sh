#!/usr/bin/env bash
# Sets up this Debian machine and runs lanchat (as root).
#
#   scripts/run.sh          on a LAN host: installs packages, builds, installs lanchatd and lanchat to
#                           /usr/local/bin, makes sure dbus and avahi-daemon run, starts lanchatd (as a
#                           systemd service where systemd runs, else in the background) and shows
#                           `lanchat doctor` and `lanchat peers`.
#   scripts/run.sh --demo   on one machine, without touching its network: a simulated LAN of three hosts
#                           (network namespaces with their own avahi-daemons), lanchatd on each, and
#                           `lanchat peers` as seen from h1. `scripts/run.sh --demo-down` removes it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
mode=${1:-host}
[ "$(id -u)" = 0 ] || { echo "run: run as root (it installs packages and starts services): sudo $0 $*" >&2; exit 1; }
export AVAHI_COMPAT_NOWARN=1
demo_dir=/tmp/lanchat-demo

if [ "$mode" = --demo-down ]; then
  TESTLAN_DIR=$demo_dir/lan scripts/testlan.sh down
  rm -rf "$demo_dir"
  echo "demo LAN removed"
  exit 0
fi

scripts/setup.sh run
echo "run: building lanchat (release; the first build takes a few minutes)"
swift build -c release --static-swift-stdlib 2>&1 | grep -v "prohibited flag" | tail -n 1
bin="$root/.build/release"

if [ "$mode" = --demo ]; then
  export TESTLAN_DIR=$demo_dir/lan TESTLAN_KEEP=$demo_dir
  scripts/testlan.sh down
  TESTLAN_DIR=$demo_dir scripts/testlan.sh down  # a demo of an earlier version kept its LAN there
  rm -rf "$demo_dir"
  mkdir -p "$demo_dir"
  scripts/testlan.sh up 3
  for h in h1 h2 h3; do
    mkdir -p "$demo_dir/$h"
    # Default paths, as on a real install (state in /var/lib/lanchat, socket in /run/lanchat, received
    # files in /var/lib/lanchat/downloads), each in the host's own fresh directories.
    # h2 and h3 accept invitations by themselves; h1 asks (its person is you).
    accept=all; [ "$h" = h1 ] && accept=never
    setsid scripts/demo.sh "$h" lanchatd --auto-accept "$accept" </dev/null >"$demo_dir/$h/lanchatd.log" 2>&1 &
  done
  seen=0
  for _ in $(seq 100); do
    seen=$(scripts/demo.sh h1 lanchat peers --json 2>/dev/null | grep -c '"name"' || true)
    [ "$seen" = 2 ] && break
    sleep 0.1
  done
  [ "$seen" = 2 ] || echo "run: h1 sees $seen of the 2 other hosts after 10 s (logs: $demo_dir/h*/lanchatd.log)" >&2
  echo
  echo "lanchat peers, on simulated host h1:"
  scripts/demo.sh h1 lanchat peers
  cat <<'MSG'

Three simulated hosts (h1, h2, h3) run lanchatd as a fresh install would; h2 and h3 accept invitations
by themselves, h1 asks you. Open a shell on a host (lanchat is on its PATH), in as many terminals as you like:
  sudo scripts/demo.sh h1
Then, on h1:
  lanchat invite root@h2 --room lab --wait
  lanchat invite root@h3 --room lab --wait
  lanchat send "hello everyone"
  head -c 5M /dev/urandom > photo.bin && lanchat send-file --room lab photo.bin
  lanchat share lab photo.bin               (it stays in the room: `lanchat files`, `lanchat fetch ID` on h2 or h3)
  lanchat                                   (interactive: type to chat, /help; h2 and h3 can answer)
  lanchat ping root@h2                      (TLS pinned to h2's key; the short code)
Or run one command on a host:
  sudo scripts/demo.sh h2 lanchat history
  sudo scripts/demo.sh h2 ls -l /var/lib/lanchat/downloads
  sudo scripts/demo.sh h3 lanchat send "hi from h3"
A stream (like netcat over the session): on h2 `lanchat stream --accept chat`, then on h1
  echo "hello over a stream" | lanchat stream root@h2 chat
Watch a host leave: `lanchat watch` on h1, then: sudo scripts/demo.sh h3 pkill -TERM lanchatd
MSG
  echo "Logs: $demo_dir/h*/lanchatd.log. Remove it all with: sudo scripts/run.sh --demo-down"
  exit 0
fi

install -m 0755 "$bin/lanchatd" "$bin/lanchat" /usr/local/bin/
# Completions for bash, zsh and fish, and man pages, generated from the binaries' argument parsers.
extras="$root/.build/extras"
rm -rf "$extras"
scripts/extras.sh "$bin" "$extras"
share=/usr/local/share
install -d "$share/bash-completion/completions" "$share/zsh/site-functions" "$share/fish/vendor_completions.d" "$share/man/man1"
install -m 0644 "$extras"/bash-completion/completions/* "$share/bash-completion/completions/"
install -m 0644 "$extras"/zsh/vendor-completions/* "$share/zsh/site-functions/"
install -m 0644 "$extras"/fish/vendor_completions.d/* "$share/fish/vendor_completions.d/"
install -m 0644 "$extras"/man/man1/* "$share/man/man1/"
if [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ]; then
  install -m 0644 systemd/lanchat.sysusers.conf /usr/lib/sysusers.d/lanchat.conf
  systemd-sysusers /usr/lib/sysusers.d/lanchat.conf
  install -m 0644 systemd/lanchatd.service /etc/systemd/system/lanchatd.service
  install -d -m 0755 /usr/lib/systemd/user
  install -m 0644 systemd/lanchatd-user.service /usr/lib/systemd/user/lanchatd.service
  systemctl daemon-reload
  systemctl enable --now dbus avahi-daemon
  systemctl enable --now lanchatd
  socket=/run/lanchat/lanchatd.sock
  echo "run: lanchatd runs as a systemd service (journalctl -u lanchatd); add people to group 'lanchat' to let them use it"
else
  # No systemd (a container, a minimal install): start what is missing by hand.
  [ -S /run/dbus/system_bus_socket ] || { mkdir -p /run/dbus; dbus-daemon --system --fork; }
  avahi-daemon -c 2>/dev/null || avahi-daemon -D
  socket=/run/lanchat/lanchatd.sock
  if ! lanchat --socket "$socket" status >/dev/null 2>&1; then
    mkdir -p /var/log
    setsid lanchatd --socket "$socket" </dev/null >>/var/log/lanchatd.log 2>&1 &
    for _ in $(seq 50); do lanchat --socket "$socket" status >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  echo "run: lanchatd runs in the background (log: /var/log/lanchatd.log)"
fi
sleep 2
lanchat --socket "$socket" doctor || true
echo
lanchat --socket "$socket" peers
