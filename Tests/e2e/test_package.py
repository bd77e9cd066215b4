"""The Debian package on a clean Debian 12 root: installed with apt-get on a simulated host, into a
copy-on-write view of this machine's root (an overlay whose upper layer lives in the host's own tmpfs,
so nothing reaches the real root), it creates its user and units, its daemon (started as the unit
starts it: systemd is not PID 1 in a namespace) sees a peer on another host, it upgrades over itself,
and purging it leaves nothing of it behind. Its md5sums hold (dpkg --verify, debsums), man finds its
pages with their FILES and SEE ALSO, and its units name their documentation.

Needs a built package: `scripts/test-package.sh` builds one and runs this test with LANCHAT_DEB set
(a release build takes minutes, so the default test run skips it)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from testlan import wait_for

DEB = os.environ.get("LANCHAT_DEB")
pytestmark = pytest.mark.skipif(not DEB, reason="no package: run scripts/test-package.sh (it builds one and sets LANCHAT_DEB)")

ROOT = "/tmp/pkgroot/merged"   # inside the simulated host's mount namespace only


def chroot(lan, script, check=True, timeout=300):
    result = lan.run("h1", ["chroot", ROOT, "/bin/sh", "-c", script], check=False, timeout=timeout)
    assert not check or result.returncode == 0, f"`{script}` exited {result.returncode}:\n{result.stdout}{result.stderr}"
    return result


AVAHI_CONF = """[server]
host-name=h1
use-ipv4=yes
use-ipv6=yes
allow-interfaces=lan0
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
"""


def make_clean_root(lan):
    """An overlay over this machine's root in h1's mount namespace, with /proc, /dev, /sys and a fresh
    /run. Its dbus-daemon and avahi-daemon run inside it (started by `start_avahi`), as on an installed
    host: D-Bus looks up the package's user in the root's own /etc/passwd."""
    lan.run("h1", ["sh", "-c", f"""
        set -e
        mkdir -p /tmp/pkgroot/upper /tmp/pkgroot/work {ROOT}
        mount -t tmpfs tmpfs /tmp/pkgroot
        mkdir -p /tmp/pkgroot/upper /tmp/pkgroot/work {ROOT}
        mount -t overlay overlay -o lowerdir=/,upperdir=/tmp/pkgroot/upper,workdir=/tmp/pkgroot/work {ROOT}
        mount -t proc proc {ROOT}/proc
        mount --rbind /dev {ROOT}/dev
        mount --rbind /sys {ROOT}/sys
        mount -t tmpfs -o mode=0755 tmpfs {ROOT}/run
        mkdir -p {ROOT}/run/dbus {ROOT}/run/lock {ROOT}/run/avahi-daemon
    """])


def start_avahi(lan):
    with open(os.path.join(lan.dir, "avahi-h1.conf"), "w") as f:
        f.write(AVAHI_CONF)
    chroot(lan, f"dbus-daemon --system --fork && avahi-daemon -f {lan.dir}/avahi-h1.conf --no-drop-root --no-chroot -D")
    wait_for(lambda: chroot(lan, "avahi-daemon -c", check=False).returncode == 0, what="avahi-daemon in the clean root")


def package_files(lan):
    return [line for line in chroot(lan, "dpkg -L lanchat").stdout.splitlines() if line and line != "/."]


def check_md5sums(lan, regular):
    """The package ships md5sums (dpkg would otherwise make its own at unpack) naming every file it
    installed, dpkg --verify (and debsums, where installed) find them all intact, and a changed file is found."""
    shipped = subprocess.run(["dpkg-deb", "--info", DEB, "md5sums"], capture_output=True, text=True)
    assert shipped.returncode == 0, f"the package has no md5sums: {shipped.stderr}"
    assert chroot(lan, "cat /var/lib/dpkg/info/lanchat.md5sums").stdout == shipped.stdout
    listed = {"/" + line.split("  ", 1)[1] for line in shipped.stdout.splitlines()}
    assert listed == set(regular), f"not in md5sums: {sorted(set(regular) - listed)}; not installed: {sorted(listed - set(regular))}"
    verify = chroot(lan, "dpkg --verify lanchat", check=False)
    assert verify.returncode == 0 and verify.stdout == "", verify.stdout + verify.stderr
    if chroot(lan, "command -v debsums", check=False).returncode == 0:
        debsums = chroot(lan, "debsums lanchat 2>&1", check=False)
        assert debsums.returncode == 0, debsums.stdout
        assert len([line for line in debsums.stdout.splitlines() if line.endswith(" OK")]) == len(regular), debsums.stdout
    changed = "/usr/share/doc/lanchat/copyright"
    chroot(lan, f"cp -p {changed} /tmp/copyright && echo changed >> {changed}")
    verify = chroot(lan, "dpkg --verify lanchat", check=False)
    assert re.search(rf"^\?\?5\S* +{changed}$", verify.stdout, re.M), verify.stdout + verify.stderr
    chroot(lan, f"cp -p /tmp/copyright {changed}")


def check_documentation(lan):
    """man finds both pages; their FILES name the default paths, SEE ALSO the other page, and lanchatd's
    SYNOPSIS no subcommand (it has none). The units' Documentation= names the pages and the README,
    and systemd-analyze verify (which runs man for each man: page) accepts them."""
    for tool, other in (("lanchat", "lanchatd"), ("lanchatd", "lanchat")):
        assert chroot(lan, f"man -w {tool}").stdout.strip() == f"/usr/share/man/man1/{tool}.1.gz"
        page = chroot(lan, f"MANWIDTH=200 MAN_KEEP_FORMATTING= man -P cat {tool} 2>/dev/null").stdout
        sections = re.findall(r"^([A-Z][A-Z ]+)$", page, re.M)
        assert "FILES" in sections and "SEE ALSO" in sections, sections
        files = page.split("\nFILES\n", 1)[1].split("\nEXIT STATUS\n", 1)[0]
        for path in ("/run/lanchat/lanchatd.sock", "$XDG_RUNTIME_DIR/lanchat/lanchatd.sock", "/var/lib/lanchat/", "~/.local/state/lanchat/", "~/Downloads/"):
            assert path in files, (tool, path)
        assert f"{other}(1)" in page.split("\nSEE ALSO\n", 1)[1]
    synopsis = chroot(lan, "MANWIDTH=200 man -P cat lanchatd 2>/dev/null").stdout.split("\nSYNOPSIS\n", 1)[1].split("\nDESCRIPTION\n", 1)[0]
    assert synopsis.split()[:2] == ["lanchatd", "[--name"] and "subcommand" not in synopsis, synopsis
    assert "/etc/lanchat/lanchatd.env" in chroot(lan, "MANWIDTH=200 man -P cat lanchatd 2>/dev/null").stdout
    for unit, user in (("/lib/systemd/system/lanchatd.service", False), ("/usr/lib/systemd/user/lanchatd.service", True)):
        text = chroot(lan, f"cat {unit}").stdout
        assert re.findall(r"^Documentation=(.*)$", text, re.M) == ["man:lanchatd(1) man:lanchat(1)", "file:/usr/share/doc/lanchat/README.md"], text
        verify = chroot(lan, f"XDG_RUNTIME_DIR=/tmp SYSTEMD_LOG_LEVEL=notice systemd-analyze verify {'--user ' if user else ''}{unit} 2>&1", check=False)
        assert verify.returncode == 0 and "lanchatd" not in verify.stdout, verify.stdout
    assert chroot(lan, "test -s /usr/share/doc/lanchat/README.md", check=False).returncode == 0


def test_the_package_installs_runs_upgrades_and_purges(lan, tmp_path):
    lan.add_host("h1", avahi=False)
    lan.add_host("h2")
    peer = lan.start_daemon("h2", name="bob")
    make_clean_root(lan)
    # Nothing of lanchat in the clean root before.
    assert chroot(lan, "dpkg -s lanchat", check=False).returncode != 0
    assert chroot(lan, "test -e /usr/bin/lanchatd", check=False).returncode != 0

    shutil.copy(DEB, os.path.join(lan.dir, "lanchat.deb"))
    lan.run("h1", ["cp", os.path.join(lan.dir, "lanchat.deb"), f"{ROOT}/tmp/lanchat.deb"])
    install = chroot(lan, "DEBIAN_FRONTEND=noninteractive apt-get install -y /tmp/lanchat.deb 2>&1")
    assert "Setting up lanchat" in install.stdout, install.stdout
    files = package_files(lan)
    for path in ("/usr/bin/lanchat", "/usr/bin/lanchatd", "/lib/systemd/system/lanchatd.service", "/usr/lib/systemd/user/lanchatd.service",
                 "/usr/lib/sysusers.d/lanchat.conf", "/usr/lib/tmpfiles.d/lanchat.conf", "/usr/share/man/man1/lanchat.1.gz",
                 "/usr/share/bash-completion/completions/lanchat", "/usr/share/zsh/vendor-completions/_lanchat",
                 "/usr/share/fish/vendor_completions.d/lanchat.fish", "/usr/share/doc/lanchat/copyright"):
        assert path in files, path
    # What the package put there as files (directories such as /usr/share/man/man1 are shared).
    regular = [path for path in files if chroot(lan, f"test -d '{path}'", check=False).returncode != 0]
    assert chroot(lan, "getent passwd lanchat").stdout.startswith("lanchat:")
    assert chroot(lan, "stat -c '%U %a' /var/lib/lanchat").stdout.split() == ["lanchat", "750"]
    assert chroot(lan, "test -L /etc/systemd/system/multi-user.target.wants/lanchatd.service", check=False).returncode == 0
    assert chroot(lan, "lanchat --version").stdout.strip() == chroot(lan, "lanchatd --version").stdout.strip()
    # The client links FoundationEssentials only (docs/packaging.md, Size): with Foundation it carries ICU's
    # data and is about 60 MB; without, about 16 MB.
    client_size = int(chroot(lan, "stat -c %s /usr/bin/lanchat").stdout)
    assert client_size < 30_000_000, f"/usr/bin/lanchat is {client_size} B: something in the client imports Foundation again"
    # The packaged daemon defines avahi_malloc zero-filled (Sources/CAvahiZeroFill: Avahi 0.8's dns_sd layer
    # calls a never-set callback slot on an Avahi restart otherwise); stripping must keep it exported.
    exported = lan.run("h1", ["nm", "-D", "--defined-only", f"{ROOT}/usr/bin/lanchatd"]).stdout.split()
    assert "avahi_malloc" in exported, "the packaged lanchatd does not export its avahi_malloc"
    check_md5sums(lan, regular)
    check_documentation(lan)

    start_avahi(lan)
    # Start the daemon as the unit does: its ExecStart, as the lanchat user, with its state and runtime directories.
    unit = chroot(lan, "cat /lib/systemd/system/lanchatd.service").stdout
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).replace("${STATE_DIRECTORY}", "/var/lib/lanchat")
    chroot(lan, "install -d -m 0750 -o lanchat -g lanchat /run/lanchat")
    log = os.path.join(lan.dir, "packaged-lanchatd.log")
    daemon = lan.popen("h1", ["chroot", ROOT, "setpriv", "--reuid=lanchat", "--regid=lanchat", "--init-groups",
                              "env", "STATE_DIRECTORY=/var/lib/lanchat", "AVAHI_COMPAT_NOWARN=1", *exec_start.split()],
                       stdout=open(log, "ab"), stderr=open(log, "ab"))
    sock = "/run/lanchat/lanchatd.sock"

    def peers():
        result = chroot(lan, f"lanchat --socket {sock} peers --json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else []
    try:
        found = wait_for(lambda: [p for p in peers() if p["name"] == "bob" and p["addresses"]], timeout=30,
                         what="the packaged daemon to see bob on h2")
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- the packaged lanchatd's log:\n{open(log, errors='replace').read()[-4000:]}") from None
    assert found[0]["id"] == peer.status()["id"]
    identity = chroot(lan, "sha256sum /var/lib/lanchat/identity.pem").stdout.split()[0]

    # Upgrade over itself (a newer version of the same build), with the daemon's state kept.
    chroot(lan, "kill $(pidof lanchatd)")
    daemon.wait(timeout=15)
    newer = os.environ.get("LANCHAT_DEB_NEWER")
    if newer:
        shutil.copy(newer, os.path.join(lan.dir, "lanchat-newer.deb"))
        lan.run("h1", ["cp", os.path.join(lan.dir, "lanchat-newer.deb"), f"{ROOT}/tmp/lanchat-newer.deb"])
        upgrade = chroot(lan, "DEBIAN_FRONTEND=noninteractive apt-get install -y /tmp/lanchat-newer.deb 2>&1")
        assert "Unpacking lanchat" in upgrade.stdout and "over (" in upgrade.stdout, upgrade.stdout
    else:
        upgrade = chroot(lan, "DEBIAN_FRONTEND=noninteractive apt-get install -y --reinstall /tmp/lanchat.deb 2>&1")
        assert "Setting up lanchat" in upgrade.stdout, upgrade.stdout
    assert chroot(lan, "sha256sum /var/lib/lanchat/identity.pem").stdout.split()[0] == identity

    # Purge: nothing of the package stays (the lanchat user does, as Debian keeps system users).
    purge = chroot(lan, "DEBIAN_FRONTEND=noninteractive apt-get purge -y lanchat 2>&1")
    assert "Purging configuration files for lanchat" in purge.stdout, purge.stdout
    assert chroot(lan, "dpkg -s lanchat", check=False).returncode != 0
    for path in regular + ["/var/lib/lanchat", "/etc/systemd/system/multi-user.target.wants/lanchatd.service"]:
        assert chroot(lan, f"test -e '{path}' || test -L '{path}'", check=False).returncode != 0, f"{path} is left after purge"
    assert lan.run("h1", ["test", "-e", "/usr/bin/lanchatd"], check=False).returncode != 0  # the real root never had it
