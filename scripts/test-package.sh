#!/usr/bin/env bash
# Builds the Debian package (and a newer version of the same build, for the upgrade) and tests it on a
# simulated host: install with apt-get into a copy-on-write view of this machine's root, the daemon
# sees a peer, upgrade, purge (Tests/e2e/test_package.py). Root; a release build takes a few minutes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "test-package: run as root: sudo $0" >&2; exit 1; }
scripts/setup.sh test

scripts/package.sh
version=$(sed -n 's/^public let lanchatVersion = "\(.*\)"$/\1/p' Sources/LanchatControl/Version.swift)
LANCHAT_DEB_VERSION="$version+1" scripts/package.sh --no-build >/dev/null
arch=$(dpkg --print-architecture)
export LANCHAT_DEB=$root/.build/deb/lanchat_${version}_$arch.deb LANCHAT_DEB_NEWER=$root/.build/deb/lanchat_${version}+1_$arch.deb
swift build 2>&1 | grep -v "prohibited flag" | tail -n 1   # the debug lanchatd for the peer host
export AVAHI_COMPAT_NOWARN=1
exec .venv/bin/python -m pytest -q --timeout 600 -p no:cacheprovider Tests/e2e/test_package.py "$@"
