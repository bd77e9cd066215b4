#!/usr/bin/env bash
# Installs what lanchat needs on Debian 12 (as root). Idempotent: installs only what is missing.
#   scripts/setup.sh run     packages to build and run lanchat (dbus, avahi-daemon, the dns_sd library)
#   scripts/setup.sh test    also the test and benchmark tools, and a Python venv (.venv) for the tests
# In test mode no service is started by the package installs (a temporary policy-rc.d), so that no
# avahi-daemon ever runs on this machine's real interfaces: the tests start their own, confined ones.
set -euo pipefail
mode=${1:-run}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

[ "$(id -u)" = 0 ] || { echo "setup: run as root (it installs packages)" >&2; exit 1; }
command -v swift >/dev/null || { echo "setup: no 'swift' on PATH: install the Swift 6 toolchain (swift.org) first" >&2; exit 1; }

packages=(pkg-config libsqlite3-dev libavahi-compat-libdnssd-dev libavahi-compat-libdnssd1 avahi-daemon avahi-utils dbus iproute2 procps)
if [ "$mode" = test ]; then
  packages+=(util-linux iputils-ping nftables openssl socat python3 python3-venv systemd openssh-server openssh-client rsync lintian tmux e2fsprogs mount valgrind binutils chromium chromium-driver)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  guard=""
  if [ "$mode" = test ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# lanchat setup: no service starts while packages install\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
  fi
  trap '[ -n "$guard" ] && rm -f "$guard"' EXIT
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$mode" = test ]; then
  venv="$root/.venv"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import pytest, pytest_timeout, zeroconf, jsonschema, selenium" 2>/dev/null; then
    echo "setup: creating the test venv in $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check pytest pytest-timeout zeroconf jsonschema selenium
  fi
fi
