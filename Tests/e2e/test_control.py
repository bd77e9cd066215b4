"""The control socket and the CLI's errors: permissions, hostile requests, no daemon."""
import json
import os
import stat

from testlan import BIN, wait_for

PROBE = r'''
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
f = s.makefile("rb")
out = []
for payload in [b"not json\n", b"{\"id\":1}\n", b"\xff\xfe\n", b"{\"id\":2,\"method\":\"nope\"}\n", b"\n",
                b"{\"id\":3,\"method\":\"status\"}\n"]:
    s.sendall(payload)
    if payload.strip():
        out.append(json.loads(f.readline()))
s.sendall(b"x" * 1100000 + b"\n")
out.append(json.loads(f.readline()))
out.append(f.readline().decode())   # closed after an overlong line
print(json.dumps(out))
'''


def test_control_socket_is_owner_only_and_survives_hostile_requests(lan):
    lan.up(1)
    lan.start_daemon("h1", name="solo")
    mode = lan.run("h1", ["stat", "-c", "%a", "/run/lanchat/lanchatd.sock"]).stdout.strip()
    assert mode == "600"
    # A socket directory the daemon creates is private too (existing directories are left as they are).
    lan.start_daemon("h1", name="other", socket="/run/lanchat/private/d.sock", tag="h1-other")
    assert lan.run("h1", ["stat", "-c", "%a", "/run/lanchat/private"]).stdout.strip() == "700"
    assert lan.run("h1", ["stat", "-c", "%a", "/run/lanchat/private/d.sock"]).stdout.strip() == "600"
    # --socket is global: before or after the subcommand, and LANCHAT_SOCKET.
    before = lan.run("h1", [os.path.join(BIN, "lanchat"), "--socket", "/run/lanchat/private/d.sock", "status", "--json"]).stdout
    after = lan.run("h1", [os.path.join(BIN, "lanchat"), "status", "--json", "--socket=/run/lanchat/private/d.sock"]).stdout
    env = lan.run("h1", ["env", "LANCHAT_SOCKET=/run/lanchat/private/d.sock", os.path.join(BIN, "lanchat"), "status", "--json"]).stdout
    assert json.loads(before)["name"] == json.loads(after)["name"] == json.loads(env)["name"] == "other"
    out = json.loads(lan.run("h1", ["python3", "-c", PROBE, "/run/lanchat/lanchatd.sock"]).stdout)
    codes = [r.get("error", {}).get("code") if isinstance(r, dict) else r for r in out]
    assert codes == ["bad_request", "bad_request", "bad_request", "unknown_method", None, "bad_request", ""]
    assert out[4]["status"]["name"] == "solo"
    assert "longer than" in out[5]["error"]["message"]
    # Still serving.
    assert lan.lanchat_json("h1", "status")["name"] == "solo"


def test_cli_without_a_daemon_fails_with_one_line(lan):
    lan.up(1)
    for args in (["peers"], ["watch"], ["status", "--json"]):
        result = lan.lanchat("h1", *args, check=False)
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and "lanchatd is not running" in result.stderr
    doctor = lan.lanchat("h1", "doctor", "--json", check=False)
    assert doctor.returncode == 1
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["dbus"]["result"] == "ok" and checks["avahi-daemon"]["result"] == "ok"
    assert checks["socket"]["result"] == "fail" and "lanchatd" in checks["socket"]["fix"]


def test_second_daemon_on_the_same_socket_is_refused(lan):
    lan.up(1)
    lan.start_daemon("h1", name="first")
    result = lan.run("h1", [os.path.join(BIN, "lanchatd"), "--state-dir", "/tmp/second-state"], check=False, timeout=20)
    assert result.returncode == 1
    assert "already running" in result.stderr


def test_bad_flags_and_config_give_one_line_errors(lan, tmp_path):
    lan.up(1)
    bad = tmp_path / "bad.conf"
    bad.write_text("name = ok\nportt = 5\n")
    for args, needle in ((["--port", "99999"], "port"), (["--encryption", "maybe"], "encryption"),
                         (["--config", str(bad)], "line 2"), (["--interface", "nosuchif0"], "nosuchif0")):
        result = lan.run("h1", [os.path.join(BIN, "lanchatd"), "--state-dir", str(tmp_path / "s"), *args], check=False, timeout=20)
        assert result.returncode == 1, args
        assert needle in result.stderr and result.stderr.startswith("lanchatd: "), result.stderr


def test_doctor_is_green_on_a_healthy_host(lan):
    lan.up(1)
    daemon = lan.start_daemon("h1", name="healthy")
    wait_for(lambda: daemon.status()["advertising"] == "registered", what="registration")
    result = lan.lanchat("h1", "doctor")
    assert result.returncode == 0
    for name in ("dbus", "avahi-daemon", "multicast", "socket", "port", "advertisement"):
        assert f"ok    {name}:" in result.stdout, result.stdout


def test_identity_key_is_private_and_stable_across_restarts(lan):
    lan.up(1)
    daemon = lan.start_daemon("h1", name="stable")
    first = daemon.status()["id"]
    key = os.path.join(lan.dir, "h1", "state", "identity.pem")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert daemon.stop() == 0
    daemon.start()
    assert daemon.status()["id"] == first
