#!/usr/bin/env bash
# PID 1 of one simulated host (run by testlan.sh inside fresh net, mount, UTS and PID namespaces).
# It names the host and gives it a fresh machine's directories: empty /run, /tmp, /var/tmp, /var/lib,
# /home and root's home (tmpfs, private to this host), so nothing an earlier run, `run.sh` or a person
# left on the real machine (/var/lib/lanchat, /run/lanchat, ~/Downloads) can make a test pass. What the
# host must still see is bound back at the same path: the project (binaries, scripts), the LAN's own
# directory, the paths in TESTLAN_KEEP (colon-separated) and the tools on PATH (e.g. pyenv's python).
# Then it reaps whatever is started on the host until it is told to stop. Killing it kills every process
# on the host.
set -u
[ -n "${TESTLAN_TRACE:-}" ] && set -x
name=$1 dir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
project=$(dirname "$here")
lan=$(dirname "$(dirname "$dir")")
hostname "$name"

masked=(/run /tmp /var/tmp /var/lib /home /root)
under_masked() { local m; for m in "${masked[@]}"; do [[ "$1" == "$m" || "$1" == "$m"/* ]] && return 0; done; return 1; }

keep=("$project" "$lan")
IFS=: read -r -a extra <<<"${TESTLAN_KEEP:-}"
keep+=("${extra[@]}")
IFS=: read -r -a path_dirs <<<"${PATH:-}"
for p in "${path_dirs[@]}"; do
  # pyenv's shims run ../libexec and ../versions: keep the whole tool directory.
  [[ "$p" == */shims ]] && p=$(dirname "$p")
  keep+=("$p")
done
[ -d /var/lib/dbus ] && keep+=(/var/lib/dbus)  # the machine id dbus-daemon reads

# Open every kept directory before its parent is hidden; bind it back afterwards through the descriptor.
declare -A fds=()
for p in $(printf '%s\n' "${keep[@]}" | grep '^/' | sort -u); do
  p=$(realpath -e "$p" 2>/dev/null) || continue
  [ -d "$p" ] && under_masked "$p" || continue
  # Inside another kept directory: visible through that one.
  inside=no
  for q in "${!fds[@]}"; do [[ "$p" == "$q"/* ]] && inside=yes; done
  [ "$inside" = yes ] && continue
  for q in "${!fds[@]}"; do [[ "$q" == "$p"/* ]] && { fd=${fds[$q]}; exec {fd}<&-; unset "fds[$q]"; }; done
  exec {fd}<"$p" && fds[$p]=$fd
done

for m in "${masked[@]}"; do
  [ -d "$m" ] || continue
  mode=0755; [ "$m" = /tmp ] || [ "$m" = /var/tmp ] && mode=1777
  [ "$m" = /root ] && mode=0700
  mount -t tmpfs -o "mode=$mode" tmpfs "$m" || { echo "testlan-host: cannot mount a fresh $m" >&2; exit 1; }
done
for p in "${!fds[@]}"; do
  fd=${fds[$p]}
  mkdir -p "$p" && mount --no-canonicalize --bind "/proc/self/fd/$fd" "$p" || { echo "testlan-host: cannot keep $p" >&2; exit 1; }
  exec {fd}<&-
done
# What dbus and avahi need in /run (their sockets and pid files live there, private to this host).
mkdir -p /run/dbus /run/avahi-daemon /run/lock
ip link set lo up
touch "$dir/ready"
trap 'kill -TERM -1 2>/dev/null; sleep 0.3; kill -KILL -1 2>/dev/null; exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $! 2>/dev/null
done
