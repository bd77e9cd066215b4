#!/usr/bin/env bash
# PID 1 of one simulated host (run by testlan.sh inside fresh net, mount, UTS and PID namespaces).
# It names the host, gives it private /run/dbus, /run/avahi-daemon and /run/lanchat, and then reaps
# whatever is started on the host until it is told to stop. Killing it kills every process on the host.
set -u
name=$1 dir=$2
hostname "$name"
for d in /run/dbus /run/avahi-daemon /run/lanchat; do
  mkdir -p "$d" && mount -t tmpfs -o mode=0755,size=16m tmpfs "$d"
done
ip link set lo up
touch "$dir/ready"
trap 'kill -TERM -1 2>/dev/null; sleep 0.3; kill -KILL -1 2>/dev/null; exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $! 2>/dev/null
done
