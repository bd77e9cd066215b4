"""The systemd units and the sysusers file are accepted by systemd's own tools."""
import os
import subprocess
import tempfile

from testlan import BIN, ROOT


def verify(unit, user):
    work = tempfile.mkdtemp(prefix="lanchat-units-")
    runtime = tempfile.mkdtemp(prefix="lanchat-xdg-")
    # verify checks that ExecStart's binary exists: point the unit at the built one.
    text = open(os.path.join(ROOT, "systemd", unit)).read().replace("/usr/local/bin/lanchatd", os.path.join(BIN, "lanchatd"))
    path = os.path.join(work, "lanchatd.service")
    with open(path, "w") as f:
        f.write(text)
    # --man=no: Documentation= names the man pages, installed by the package (test_package.py finds them there), not here.
    args = ["systemd-analyze", "verify", "--man=no"] + (["--user"] if user else []) + [path]
    return subprocess.run(args, capture_output=True, text=True,
                          env=dict(os.environ, XDG_RUNTIME_DIR=runtime, SYSTEMD_LOG_LEVEL="notice"))


def test_system_unit_verifies():
    result = verify("lanchatd.service", user=False)
    assert result.returncode == 0 and "lanchatd" not in result.stderr, result.stderr


def test_user_unit_verifies():
    result = verify("lanchatd-user.service", user=True)
    assert result.returncode == 0 and "lanchatd" not in result.stderr, result.stderr


def test_sysusers_file_parses():
    result = subprocess.run(["systemd-sysusers", "--dry-run", os.path.join(ROOT, "systemd", "lanchat.sysusers.conf")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "lanchat" in result.stdout + result.stderr
