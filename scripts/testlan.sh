#!/usr/bin/env bash
# The simulated LAN: hosts as network + mount + UTS + PID namespaces, joined by veth pairs on a bridge
# that lives in a namespace of its own. Each host runs its own dbus-daemon and avahi-daemon, confined
# to its test interface (lan0); nothing here touches the machine's real interfaces.
#
#   testlan.sh up N                 hosts h1..hN (addresses 198.18.0.11, .12, ...)
#   testlan.sh add-host NAME [--no-avahi] [--subnet 2]
#                                   --subnet 2: on a second bridge (198.18.1.x), which only a router joins
#   testlan.sh router NAME          a host on both subnets (198.18.0.1 and 198.18.1.1) that routes
#                                   unicast between them (multicast, and so mDNS, does not cross)
#   testlan.sh exec HOST CMD...     run a command on a host
#   testlan.sh pid HOST             a process id inside the host (for nsenter -t PID -n -m -u -p)
#   testlan.sh addr HOST            the host's IPv4 address
#   testlan.sh link HOST up|down    plug or unplug the host's cable
#   testlan.sh netem HOST ARGS...   tc netem on the host's link (e.g. "loss 5% delay 20ms"; "clear");
#                                   needs a kernel with sch_netem
#   testlan.sh loss HOST PERCENT    drop PERCENT% of the packets the host sends (nftables; 0 clears):
#                                   works where netem is missing
#   testlan.sh rate HOST RATE|clear cap what the host sends (tc tbf, e.g. 800mbit)
#   testlan.sh avahi HOST start|stop|restart|kill
#   testlan.sh hosts                list hosts
#   testlan.sh down                 tear everything down (safe to run after a failure, or twice)
#
# State lives in $TESTLAN_DIR (default /tmp/lanchat-testlan); several LANs can coexist with
# different directories. Needs root, iproute2, util-linux, dbus and avahi-daemon.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${TESTLAN_DIR:-/tmp/lanchat-testlan}
subnet=${TESTLAN_SUBNET:-198.18.0}
subnet2=${TESTLAN_SUBNET2:-198.18.1}

die() { echo "testlan: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it creates network namespaces)"; }
lan_id() { cat "$dir/id"; }
switch_pid() { cat "$dir/switch.pid"; }
host_dir() { echo "$dir/hosts/$1"; }
host_pid() {
  local f; f="$(host_dir "$1")/pid"
  [ -f "$f" ] || die "no host named '$1' (hosts: $(ls "$dir/hosts" 2>/dev/null | tr '\n' ' '))"
  cat "$f"
}
on_host() { local pid; pid=$(host_pid "$1"); shift; nsenter -t "$pid" -n -m -u -p -- "$@"; }
on_switch() { nsenter -t "$(switch_pid)" -n -- "$@"; }

cmd_init() {
  need_root
  [ -f "$dir/switch.pid" ] && kill -0 "$(switch_pid)" 2>/dev/null && return 0
  mkdir -p "$dir/hosts"
  printf '%04x' $(( (RANDOM << 1 ^ $$) & 0xffff )) > "$dir/id"
  # The switch: a namespace holding only the bridge.
  unshare --net -- sleep infinity </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/switch.pid"
  for _ in $(seq 50); do [ "$(readlink /proc/$!/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
  on_switch ip link add br0 type bridge
  # mDNS is multicast: make sure the bridge floods it to every port.
  on_switch ip link set br0 type bridge mcast_snooping 0
  on_switch ip link set br0 up
  # The second subnet: its own bridge, joined to the first only through a router host.
  on_switch ip link add br1 type bridge
  on_switch ip link set br1 type bridge mcast_snooping 0
  on_switch ip link set br1 up
  on_switch ip link set lo up
}

write_avahi_conf() { # host-dir host-name
  cat > "$1/avahi-daemon.conf" <<CONF
[server]
host-name=$2
domain-name=local
use-ipv4=yes
use-ipv6=yes
# Only the test interface: never the machine's real ones.
allow-interfaces=lan0
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
[reflector]
enable-reflector=no
[rlimits]
CONF
}

cmd_add_host() {
  need_root
  local name=$1 avahi=yes net=1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --no-avahi) avahi=no; shift ;;
      --subnet) net=${2:-}; shift 2 || die "--subnet 1|2" ;;
      *) die "add-host NAME [--no-avahi] [--subnet 1|2]" ;;
    esac
  done
  [[ "$net" =~ ^[12]$ ]] || die "--subnet 1|2"
  [[ "$name" =~ ^[a-z][a-z0-9-]{0,14}$ ]] || die "host names are [a-z][a-z0-9-]{0,14}"
  cmd_init
  local hd; hd=$(host_dir "$name")
  [ -e "$hd" ] && die "host $name exists"
  mkdir -p "$hd"
  local n; n=$(ls "$dir/hosts" | wc -l)
  local prefix=$subnet bridge=br0
  [ "$net" = 2 ] && prefix=$subnet2 bridge=br1
  local addr="$prefix.$((10 + n))"
  echo "$addr" > "$hd/addr"
  echo "$net" > "$hd/subnet"
  setsid unshare --net --mount --uts --pid --fork --mount-proc --propagation private \
    -- bash "$here/testlan-host.sh" "$name" "$hd" </dev/null >"$hd/holder.log" 2>&1 &
  local outer=$! inner=""
  echo "$outer" > "$hd/unshare.pid"
  for _ in $(seq 100); do
    inner=$(pgrep -P "$outer" || true)
    [ -n "$inner" ] && [ -f "$hd/ready" ] && break
    sleep 0.05
  done
  [ -n "$inner" ] && [ -f "$hd/ready" ] || die "host $name did not start: $(cat "$hd/holder.log")"
  echo "$inner" > "$hd/pid"
  local port="t$(lan_id)p$n"
  # Create the veth in the switch with its other end directly in the host: it never exists in the
  # machine's own namespace.
  echo "$port" > "$hd/port"
  on_switch ip link add "$port" type veth peer name lan0 netns "$inner"
  on_switch ip link set "$port" master "$bridge" up
  on_host "$name" ip addr add "$addr/24" dev lan0
  on_host "$name" ip link set lan0 up
  # With a router on the LAN, the other subnet is reachable through it.
  if [ -f "$dir/router" ]; then
    on_host "$name" ip route add default via "$prefix.1" dev lan0
  fi
  if [ "$avahi" = yes ]; then
    write_avahi_conf "$hd" "$name"
    on_host "$name" dbus-daemon --system --fork </dev/null >>"$hd/dbus.log" 2>&1
    cmd_avahi "$name" start
  fi
}

cmd_avahi() {
  local name=$1 action=$2 hd; hd=$(host_dir "$name")
  case $action in
    start)
      [ -f "$hd/avahi-daemon.conf" ] || write_avahi_conf "$hd" "$name"
      on_host "$name" avahi-daemon -f "$hd/avahi-daemon.conf" --no-drop-root --no-chroot -D </dev/null >>"$hd/avahi.log" 2>&1
      # Wait until it answers on D-Bus (a lanchatd started right after finds it).
      for _ in $(seq 100); do on_host "$name" avahi-daemon -c 2>/dev/null && return 0; sleep 0.05; done
      die "avahi-daemon on $name did not come up" ;;
    stop)
      on_host "$name" avahi-daemon -k 2>/dev/null || true
      for _ in $(seq 100); do on_host "$name" avahi-daemon -c 2>/dev/null || return 0; sleep 0.05; done ;;
    kill)
      on_host "$name" pkill -KILL -x avahi-daemon || true
      on_host "$name" rm -f /run/avahi-daemon/pid ;;
    restart) cmd_avahi "$name" stop; cmd_avahi "$name" start ;;
    *) die "avahi: start|stop|restart|kill" ;;
  esac
}

cmd_up() {
  local count=$1
  [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] && [ "$count" -le 200 ] || die "up N: 1 <= N <= 200"
  for i in $(seq "$count"); do cmd_add_host "h$i"; done
}

cmd_link() {
  local name=$1 state=$2
  on_switch ip link set "$(cat "$(host_dir "$name")/port")" "$state"
}

cmd_router() {
  # A host on both bridges that forwards unicast between the subnets (no avahi, no multicast routing:
  # DNS-SD on one subnet never sees the other, as with a real router).
  need_root
  local name=$1
  [ -f "$dir/router" ] && die "the LAN has a router already ($(cat "$dir/router"))"
  cmd_add_host "$name" --no-avahi
  local hd; hd=$(host_dir "$name")
  on_host "$name" ip addr flush dev lan0
  on_host "$name" ip addr add "$subnet.1/24" dev lan0
  echo "$subnet.1" > "$hd/addr"
  local port="t$(lan_id)r"
  on_switch ip link add "$port" type veth peer name lan1 netns "$(host_pid "$name")"
  on_switch ip link set "$port" master br1 up
  on_host "$name" ip addr add "$subnet2.1/24" dev lan1
  on_host "$name" ip link set lan1 up
  on_host "$name" sysctl -q -w net.ipv4.ip_forward=1
  echo "$name" > "$dir/router"
  local h
  for h in $(ls "$dir/hosts"); do
    [ "$h" = "$name" ] && continue
    local prefix=$subnet
    [ "$(cat "$(host_dir "$h")/subnet" 2>/dev/null || echo 1)" = 2 ] && prefix=$subnet2
    on_host "$h" ip route replace default via "$prefix.1" dev lan0
  done
}

cmd_netem() {
  local name=$1; shift
  if [ "${1:-}" = clear ]; then on_host "$name" tc qdisc del dev lan0 root 2>/dev/null || true; return; fi
  on_host "$name" tc qdisc replace dev lan0 root netem "$@"
}

cmd_rate() {
  # Caps what HOST sends (token bucket on its LAN interface), e.g. `rate h1 800mbit`; `rate h1 clear`.
  local name=$1 rate=$2
  if [ "$rate" = clear ]; then on_host "$name" tc qdisc del dev lan0 root 2>/dev/null || true; return; fi
  [[ "$rate" =~ ^[0-9]+[kmg]?bit$ ]] || die "rate HOST RATE (like 800mbit) | clear"
  on_host "$name" tc qdisc replace dev lan0 root tbf rate "$rate" burst 1mb latency 100ms
}

cmd_loss() {
  local name=$1 percent=$2
  [[ "$percent" =~ ^[0-9]+$ ]] && [ "$percent" -le 100 ] || die "loss HOST PERCENT (0-100)"
  on_host "$name" nft delete table inet testlan 2>/dev/null || true
  [ "$percent" = 0 ] && return 0
  on_host "$name" nft add table inet testlan
  on_host "$name" nft add chain inet testlan out '{ type filter hook output priority 0; }'
  if [ "$percent" = 100 ]; then
    on_host "$name" nft add rule inet testlan out oifname lan0 drop
  else
    on_host "$name" nft add rule inet testlan out oifname lan0 numgen random mod 100 lt "$percent" drop
  fi
}

cmd_down() {
  [ -d "$dir" ] || return 0
  local hd
  for hd in "$dir"/hosts/*/; do
    [ -f "$hd/pid" ] || continue
    local pid; pid=$(cat "$hd/pid")
    if kill -0 "$pid" 2>/dev/null; then
      # avahi first, with SIGTERM, so it says goodbye; then everything else on the host.
      nsenter -t "$pid" -n -m -u -p -- avahi-daemon -k 2>/dev/null || true
    fi
  done
  sleep 0.2
  for hd in "$dir"/hosts/*/; do
    [ -f "$hd/pid" ] && kill -KILL "$(cat "$hd/pid")" 2>/dev/null || true
    [ -f "$hd/unshare.pid" ] && kill -KILL "$(cat "$hd/unshare.pid")" 2>/dev/null || true
  done
  [ -f "$dir/switch.pid" ] && kill -KILL "$(cat "$dir/switch.pid")" 2>/dev/null || true
  rm -rf "$dir"
}

sub=${1:-}; shift || true
case $sub in
  up) cmd_up "$@" ;;
  add-host) cmd_add_host "$@" ;;
  exec) name=$1; shift; on_host "$name" "$@" ;;
  pid) host_pid "$1" ;;
  addr) cat "$(host_dir "$1")/addr" ;;
  link) cmd_link "$@" ;;
  router) cmd_router "$@" ;;
  netem) cmd_netem "$@" ;;
  loss) cmd_loss "$@" ;;
  rate) cmd_rate "$@" ;;
  avahi) cmd_avahi "$@" ;;
  hosts) ls "$dir/hosts" 2>/dev/null ;;
  down) cmd_down ;;
  *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$sub" ] || exit 2 ;;
esac
