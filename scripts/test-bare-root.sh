#!/usr/bin/env bash
# The Debian package on a bare Debian 12 root (issue 32): a minimal root made with
# `debootstrap --variant=minbase bookworm`, the package installed into it with `apt-get install ./DEB`,
# then `lanchat --help` and `lanchatd --help`, the lanchat user and /var/lib/lanchat, the units in
# place; man-db and systemd added to the root for `man lanchat` and `systemd-analyze verify` of both
# units; `apt-get purge lanchat` and what it leaves. Root.
#   scripts/test-bare-root.sh [DEB]   default: .build/deb/lanchat_VERSION_ARCH.deb (scripts/package.sh)
# Needs a Debian mirror (LANCHAT_MIRROR, default http://deb.debian.org/debian): debootstrap, and apt-get
# in the root for the package's dependencies, download from it. So it is not part of scripts/test.sh,
# whose tests depend on nothing they do not make. The minimal root is made once and kept as
# .build/bare-root/minbase-bookworm.tar.gz; each run unpacks a fresh copy into a temporary directory
# and removes it at the end. No service starts in the root (a policy-rc.d that refuses, and no systemd
# running there), and every check after the install runs without a network (a namespace of its own).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
die() { echo "test-bare-root: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: sudo $0 $*"
# A mount namespace of our own: the root's /proc disappears with this script, whatever ends it.
if [ -z "${LANCHAT_BARE_ROOT_NS:-}" ]; then
  exec env LANCHAT_BARE_ROOT_NS=1 unshare --mount --propagation private "$0" "$@"
fi
version=$(sed -n 's/^public let lanchatVersion = "\(.*\)"$/\1/p' Sources/LanchatControl/Version.swift)
deb=$(readlink -f "${1:-.build/deb/lanchat_${version}_$(dpkg --print-architecture).deb}")
[ -f "$deb" ] || die "no package at $deb: build one with scripts/package.sh"
mirror=${LANCHAT_MIRROR:-http://deb.debian.org/debian}
cache=$root/.build/bare-root
tarball=$cache/minbase-bookworm.tar.gz
step() { echo "test-bare-root: $*"; }

if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || { step "installing debootstrap"; apt-get install -y -q debootstrap >/dev/null; }
  mkdir -p "$cache"
  made=$(mktemp -d /tmp/lanchat-debootstrap.XXXXXX)
  step "debootstrap --variant=minbase bookworm from $mirror (once; kept as $tarball)"
  if ! timeout 1200 debootstrap --variant=minbase bookworm "$made/root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    tail -n 5 "$cache/debootstrap.log" >&2
    rm -rf --one-file-system "$made"
    die "debootstrap failed (log: $cache/debootstrap.log)"
  fi
  tar -C "$made/root" -czf "$tarball.part" . && mv "$tarball.part" "$tarball"
  rm -rf --one-file-system "$made"
fi

work=$(mktemp -d /tmp/lanchat-bare-root.XXXXXX)
r=$work/root
cleanup() {
  umount -R "$r/proc" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
mkdir "$r"
tar -C "$r" -xzf "$tarball"
mount -t proc proc "$r/proc"
cp /etc/resolv.conf "$r/etc/resolv.conf"
printf '#!/bin/sh\n# test-bare-root.sh: no service starts in this root\nexit 101\n' > "$r/usr/sbin/policy-rc.d"
chmod 0755 "$r/usr/sbin/policy-rc.d"
cp "$deb" "$r/tmp/"
inroot() { chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
             LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
offline() { unshare --net chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
              XDG_RUNTIME_DIR=/tmp SYSTEMD_LOG_LEVEL=notice "$@"; }
check() { local what=$1; shift; if "$@" >/dev/null; then echo "ok    $what"; else echo "FAIL  $what" >&2; failed=1; fi; }
failed=0

step "a minimal root of $(du -sm --exclude=proc "$r" | cut -f1) MB, $(inroot dpkg-query -W -f '.' | wc -c) packages; man: $(inroot sh -c 'command -v man || echo none'), systemd: $(inroot sh -c 'command -v systemctl || echo none')"
step "apt-get install ./$(basename "$deb")"
inroot apt-get update -q >/dev/null
inroot apt-get install -y -q "./tmp/$(basename "$deb")" > "$work/install.log" 2>&1 || { cat "$work/install.log" >&2; die "apt-get install failed"; }
grep -E '^(Setting up|Unpacking) lanchat|newly installed' "$work/install.log" || true

help=$(offline lanchat --help 2>&1) || true
check "lanchat --help" grep -q '^USAGE: lanchat <subcommand>' <<<"$help"
helpd=$(offline lanchatd --help 2>&1) || true
check "lanchatd --help" grep -q '^USAGE: lanchatd' <<<"$helpd"
check "lanchat --version: $(offline lanchat --version 2>&1)" offline lanchat --version
user=$(offline getent passwd lanchat || true)
check "user lanchat: $user" grep -Eq '^lanchat:x:[0-9]+:[0-9]+:.*:/var/lib/lanchat:/usr/sbin/nologin$' <<<"$user"
check "group lanchat: $(offline getent group lanchat || true)" offline getent group lanchat
dir=$(offline stat -c '%U:%G %a' /var/lib/lanchat 2>&1 || true)
check "/var/lib/lanchat: $dir" test "$dir" = "lanchat:lanchat 750"
check "system unit /lib/systemd/system/lanchatd.service" test -s "$r/lib/systemd/system/lanchatd.service"
check "user unit /usr/lib/systemd/user/lanchatd.service" test -s "$r/usr/lib/systemd/user/lanchatd.service"
check "dpkg --verify lanchat" offline dpkg --verify lanchat

step "apt-get install man-db systemd (a bare root has neither)"
inroot apt-get install -y -q man-db systemd > "$work/tools.log" 2>&1 || { tail -n 20 "$work/tools.log" >&2; die "apt-get install man-db systemd failed"; }
check "man -w lanchat: $(offline man -w lanchat 2>&1)" test "$(offline man -w lanchat 2>&1)" = /usr/share/man/man1/lanchat.1.gz
page=$(offline sh -c 'MANWIDTH=100 man -P cat lanchat 2>/dev/null') || true
check "man lanchat has NAME, SYNOPSIS, FILES, SEE ALSO" sh -c 'for s in NAME SYNOPSIS FILES "SEE ALSO"; do printf "%s\n" "$1" | grep -qx "$s" || exit 1; done' - "$page"
check "man lanchatd" sh -c 'test -n "$1"' - "$(offline sh -c 'man -P cat lanchatd 2>/dev/null | head -n 3')"
for unit in "/lib/systemd/system/lanchatd.service" "--user /usr/lib/systemd/user/lanchatd.service"; do
  out=$(offline sh -c "systemd-analyze verify $unit 2>&1") && rc=0 || rc=$?
  check "systemd-analyze verify $unit${out:+: $out}" test "$rc" = 0 -a -z "$(grep lanchatd <<<"$out")"
done

step "apt-get purge lanchat"
inroot apt-get purge -y -q lanchat > "$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; die "apt-get purge failed"; }
check "purged: no /usr/bin/lanchat, /usr/bin/lanchatd, /var/lib/lanchat" test ! -e "$r/usr/bin/lanchat" -a ! -e "$r/usr/bin/lanchatd" -a ! -e "$r/var/lib/lanchat"
check "purged: dpkg knows no lanchat" sh -c '! chroot "$1" dpkg-query -W -f "\${Status}\n" lanchat 2>/dev/null | grep -q .' - "$r"
left=$(cd "$r" && find . -xdev \( -name '*lanchat*' \) ! -path './tmp/*' ! -path './var/lib/apt/*' ! -path './var/cache/apt/*' ! -path './var/cache/man/*' 2>/dev/null | sort | tr '\n' ' ')
# (/var/cache/man: pages man-db formatted when `man` ran as root; its own cache, cleaned by its cron job.)
check "purged: nothing named lanchat left but the user and group (kept as Debian keeps system users)${left:+: left: $left}" test -z "$left"
check "the user stays: $(offline getent passwd lanchat || echo none)" offline getent passwd lanchat

[ "$failed" = 0 ] || die "some checks failed"
step "passed"
