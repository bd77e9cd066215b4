#!/usr/bin/env bash
# Builds the Debian package: .build/deb/lanchat_VERSION_amd64.deb (root, Debian 12).
#   scripts/package.sh [--no-build]     --no-build: use the release binaries already in .build/release
# Contents: release binaries with the Swift runtime linked statically (/usr/bin; stripped, linked with
# -z now), the system and user units, sysusers and tmpfiles configuration, completions and man pages
# generated from the binaries, README.md, copyright and changelog, lintian overrides
# (packaging/lintian-overrides); md5sums of every file. Depends: what dpkg-shlibdeps finds the
# binaries linked against, plus avahi-daemon and dbus. The maintainer scripts create the lanchat user
# and enable the service where systemd runs; purge removes the state directory (the user stays, as
# Debian does for system users).
# Maintainer: $DEBFULLNAME <$DEBEMAIL> (as dch uses them), else this repository's git identity
# (user.name, user.email), else the author of its last commit (a fresh machine has no git identity set):
# the project has no maintainer address of its own.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "package: run as root (file ownership in the package): sudo $0" >&2; exit 1; }
maintainer_name=${DEBFULLNAME:-$(git config user.name 2>/dev/null || git log -1 --format=%an 2>/dev/null || true)}
maintainer_email=${DEBEMAIL:-$(git config user.email 2>/dev/null || git log -1 --format=%ae 2>/dev/null || true)}
[ -n "$maintainer_name" ] && [ -n "$maintainer_email" ] || {
  echo "package: no maintainer: set DEBFULLNAME and DEBEMAIL (or git's user.name and user.email)" >&2; exit 1; }
maintainer="$maintainer_name <$maintainer_email>"
version=${LANCHAT_DEB_VERSION:-$(sed -n 's/^public let lanchatVersion = "\(.*\)"$/\1/p' Sources/LanchatControl/Version.swift)}
[ -n "$version" ] || { echo "package: cannot read the version from Sources/LanchatControl/Version.swift" >&2; exit 1; }
arch=$(dpkg --print-architecture)
bin=$root/.build/release
if [ "${1:-}" != --no-build ]; then
  scripts/setup.sh run
  echo "package: building release binaries (the first build takes a few minutes)"
  # -z now: every symbol bound at start, so the GOT can be read-only (full RELRO; lintian's
  # hardening-no-bindnow). Only the link changes: switching with run.sh's build relinks, it does not recompile.
  swift build -c release --static-swift-stdlib -Xlinker -z -Xlinker now 2>&1 | grep -v "prohibited flag" | tail -n 1
fi
out=$root/.build/deb
stage=$out/lanchat_${version}_$arch
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/usr/lib/systemd/user" \
  "$stage/usr/lib/sysusers.d" "$stage/usr/lib/tmpfiles.d" "$stage/usr/share/doc/lanchat" "$stage/usr/share/man"

for tool in lanchat lanchatd; do
  install -m 0755 "$bin/$tool" "$stage/usr/bin/$tool"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/$tool"
done
# Units: the repository's, pointing at /usr/bin (run.sh installs to /usr/local/bin), with the README this
# package installs added to their documentation.
while read -r unit dir; do
  grep -q '^Documentation=man:' "$unit" || { echo "package: $unit has no Documentation=man: line" >&2; exit 1; }
  sed -e 's|/usr/local/bin/lanchatd|/usr/bin/lanchatd|' \
      -e '/^Documentation=man:/a Documentation=file:/usr/share/doc/lanchat/README.md' "$unit" > "$stage/$dir/lanchatd.service"
done <<'EOF'
systemd/lanchatd.service lib/systemd/system
systemd/lanchatd-user.service usr/lib/systemd/user
EOF
# lintian's overrides, each with the reason (docs/packaging.md explains every tag lintian --pedantic shows).
install -d "$stage/usr/share/lintian/overrides"
install -m 0644 packaging/lintian-overrides "$stage/usr/share/lintian/overrides/lanchat"
install -m 0644 systemd/lanchat.sysusers.conf "$stage/usr/lib/sysusers.d/lanchat.conf"
cat > "$stage/usr/lib/tmpfiles.d/lanchat.conf" <<'EOF'
# The system service's state directory (systemd's StateDirectory= makes it too; this serves tools that
# run before the service ever started, and `lanchat` users in group lanchat who read downloads/).
d /var/lib/lanchat 0750 lanchat lanchat -
EOF
chmod 0644 "$stage"/lib/systemd/system/* "$stage"/usr/lib/systemd/user/* "$stage"/usr/lib/tmpfiles.d/*

extras=$out/extras
rm -rf "$extras"
scripts/extras.sh "$bin" "$extras"
cp -r "$extras/bash-completion" "$extras/zsh" "$extras/fish" "$stage/usr/share/"
cp -r "$extras/man/man1" "$stage/usr/share/man/"
# Completion scripts are sourced, not run: no "#!" line (Debian's bash-completion policy).
sed -i '1{/^#!/d}' "$stage"/usr/share/bash-completion/completions/*

# Uncompressed (policy 12.3 would gzip it): the units' Documentation= names it, for a person to open.
install -m 0644 README.md "$stage/usr/share/doc/lanchat/README.md"
cat > "$stage/usr/share/doc/lanchat/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: lanchat
Source: https://github.com/lanchat/lanchat

Files: *
Copyright: 2026 lanchat developers
License: Apache-2.0

License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 can be
 found in the file /usr/share/common-licenses/Apache-2.0.
EOF
changelog=$stage/usr/share/doc/lanchat/changelog
cat > "$changelog" <<EOF
lanchat ($version) unstable; urgency=medium

  * Package built by scripts/package.sh from $(git log -1 --format=%h 2>/dev/null || echo "a source tree").

 -- $maintainer  $(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
EOF
gzip -9nf "$changelog"
find "$stage/usr/share" -type f -exec chmod 0644 {} +
find "$stage" -type d -exec chmod 0755 {} +

# Depends: the shared libraries the binaries link (dpkg-shlibdeps wants a debian/control to read).
work=$(mktemp -d)
mkdir -p "$work/debian"
printf 'Source: lanchat\n\nPackage: lanchat\nArchitecture: any\n' > "$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O "$stage/usr/bin/lanchatd" "$stage/usr/bin/lanchat" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$work"
[ -n "$shlibs" ] || { echo "package: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: lanchat
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $shlibs, avahi-daemon, dbus, adduser
Section: net
Priority: optional
Homepage: https://github.com/lanchat/lanchat
Description: peer-to-peer chat, files and streams between hosts on a LAN
 lanchat finds the other lanchat hosts on the local network through DNS-SD
 (Avahi) and connects to them directly over TLS 1.3, with keys pinned to the
 advertised fingerprints: rooms with history for newcomers, reliable messages,
 files with resume, and byte streams. Nothing goes through a server.
 .
 This package ships the daemon lanchatd (a systemd service), the client lanchat,
 completions for bash, zsh and fish, and man pages.
EOF

cat > "$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    # The service's user and group, and its state directory.
    if command -v systemd-sysusers >/dev/null 2>&1; then
        systemd-sysusers /usr/lib/sysusers.d/lanchat.conf
    elif ! getent passwd lanchat >/dev/null; then
        adduser --system --group --home /var/lib/lanchat --no-create-home --quiet lanchat
    fi
    if command -v systemd-tmpfiles >/dev/null 2>&1; then
        systemd-tmpfiles --create /usr/lib/tmpfiles.d/lanchat.conf || true
    else
        install -d -m 0750 -o lanchat -g lanchat /var/lib/lanchat
    fi
fi
if [ "$1" = configure ] || [ "$1" = abort-upgrade ] || [ "$1" = abort-deconfigure ] || [ "$1" = abort-remove ]; then
    if command -v deb-systemd-helper >/dev/null 2>&1; then
        deb-systemd-helper unmask lanchatd.service >/dev/null || true
        if deb-systemd-helper --quiet was-enabled lanchatd.service; then
            deb-systemd-helper enable lanchatd.service >/dev/null || true
        else
            deb-systemd-helper update-state lanchatd.service >/dev/null || true
        fi
    fi
    if [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
        deb-systemd-invoke restart lanchatd.service >/dev/null || true
    fi
fi
exit 0
EOF
cat > "$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    deb-systemd-invoke stop lanchatd.service >/dev/null || true
fi
exit 0
EOF
cat > "$stage/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = remove ] && command -v deb-systemd-helper >/dev/null 2>&1; then
    deb-systemd-helper mask lanchatd.service >/dev/null || true
fi
if [ "$1" = purge ]; then
    if command -v deb-systemd-helper >/dev/null 2>&1; then
        deb-systemd-helper purge lanchatd.service >/dev/null || true
        deb-systemd-helper unmask lanchatd.service >/dev/null || true
    fi
    # The identity key, history and received files; the lanchat user stays (Debian keeps system users).
    rm -rf /var/lib/lanchat
fi
exit 0
EOF
chmod 0755 "$stage"/DEBIAN/postinst "$stage"/DEBIAN/prerm "$stage"/DEBIAN/postrm
# md5sums of every file but the control area's, paths relative to the root (what dh_md5sums writes;
# dpkg --verify and debsums read it). There are no conffiles to leave out.
(cd "$stage" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0r md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"
deb=$out/lanchat_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "package: $deb ($(du -h "$deb" | cut -f1))"
if command -v lintian >/dev/null 2>&1; then
  lintian --info "$deb" || true
fi
