"""The control socket and the CLI's errors: permissions, hostile requests, no daemon."""
import json
import os
import stat
import subprocess
import time

from testlan import BIN, read_line, wait_for, wait_process

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


IDLE_PROBE = r'''
import json, socket, sys, threading, time
path, timeout = sys.argv[1], float(sys.argv[2])
results = {}

def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(timeout + 8)
    return s, s.makefile("rb"), time.monotonic()

def closed_with(f, started):
    """The idle line, the end after it, and when it came. A client still writing (slow_loris) may find
    the end a reset rather than EOF: the kernel resets a Unix socket closed with unread bytes in it."""
    line = f.readline()
    after = time.monotonic() - started
    try:
        then = f.readline().decode()
    except ConnectionResetError:
        then = "<reset>"
    return {"line": json.loads(line) if line else None, "after": after, "then": then}

def quiet_for(s, seconds):
    """Whether the daemon closed the connection or sent an error within `seconds` (events are fine)."""
    s.settimeout(0.2)
    deadline = time.monotonic() + seconds
    data = b""
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            return "closed: " + data.decode(errors="replace")
        data += chunk
        if b'"ok":false' in data:
            return "error: " + data.decode(errors="replace")
    return "open"

def idle():
    s, f, started = connect()
    results["idle"] = closed_with(f, started)

def slow_loris():
    s, f, started = connect()
    s.sendall(b'{"id":1,')
    def drip():
        try:
            while True:
                time.sleep(timeout / 8)
                s.sendall(b" ")
        except OSError:
            pass
    threading.Thread(target=drip, daemon=True).start()
    results["slow_loris"] = closed_with(f, started)

def watch():
    s, f, started = connect()
    s.sendall(b'{"id":1,"method":"watch"}\n')
    results["watch_answer"] = json.loads(f.readline())
    results["watch"] = quiet_for(s, timeout * 2)

def waiting_call():
    # stream-accept waits for an open as long as the client stays: a call in progress is never idle.
    s, f, started = connect()
    s.sendall(b'{"id":1,"method":"stream-accept","params":{"name":"never"}}\n')
    results["waiting_call"] = quiet_for(s, timeout * 2)

def busy_client():
    # Each answer starts the deadline again: calls 0.6 timeouts apart keep the connection past it.
    s, f, started = connect()
    answers = []
    for i in range(4):
        s.sendall(json.dumps({"id": i, "method": "status"}).encode() + b"\n")
        answers.append(json.loads(f.readline())["ok"])
        time.sleep(timeout * 0.6)
    s.sendall(b'{"id":9,"method":"history","params":{"limit":"100001"}}\n')
    answers.append(json.loads(f.readline()).get("error"))
    results["busy_client"] = {"answers": answers, "after": time.monotonic() - started}

threads = [threading.Thread(target=t) for t in (idle, slow_loris, watch, waiting_call, busy_client)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout * 4 + 10)
print(json.dumps(results))
'''


def test_idle_control_connections_are_closed_but_watches_calls_and_clients_go_on(lan):
    lan.up(1)
    config = os.path.join(lan.dir, "idle.conf")
    with open(config, "w") as f:
        f.write("control-idle-timeout = 2\n")
    lan.start_daemon("h1", name="idle", extra=["--config", config])
    out = json.loads(lan.run("h1", ["python3", "-c", IDLE_PROBE, "/run/lanchat/lanchatd.sock", "2"], timeout=40).stdout)
    for case in ("idle", "slow_loris"):
        closed = out[case]
        assert closed["line"] == {"ok": False, "error": {"code": "idle", "message": closed["line"]["error"]["message"]}}, closed
        assert "no request in 2 s (control-idle-timeout)" in closed["line"]["error"]["message"]
        assert 1.9 <= closed["after"] < 5, closed   # closed at the deadline, not long after
        assert closed["then"] in ("", "<reset>"), closed   # and the connection ends there
    assert out["watch_answer"] == {"id": 1, "ok": True}
    assert out["watch"] == "open"
    assert out["waiting_call"] == "open"
    assert out["busy_client"]["answers"][:4] == [True] * 4 and out["busy_client"]["after"] > 4
    assert out["busy_client"]["answers"][4] == {"code": "bad_request", "message": "params.limit must be 1-100000"}
    # Still serving, and the idle holders are gone.
    assert lan.lanchat_json("h1", "status")["name"] == "idle"

    # The interactive mode keeps one connection for its calls: after an idle period longer than the
    # timeout, the next call connects again by itself.
    session = lan.popen("h1", [os.path.join(BIN, "lanchat")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True)
    try:
        read_line(session.stdout, 20, "the interactive greeting", match=lambda line: "you are in no room yet" in line)
        time.sleep(3)
        session.stdin.write("/rooms\n")
        session.stdin.flush()
        line = read_line(session.stdout, 20, "the answer to /rooms after an idle period", match=lambda line: "room" in line or "error" in line)
        assert line.strip() == "you are in no room", line
        time.sleep(3)
        session.stdin.write("/history 0\n/rooms\n/quit\n")
        session.stdin.flush()
        line = read_line(session.stdout, 20, "the answer to /history 0", match=lambda line: "history" in line or "error" in line)
        assert line.strip() == "usage: /history [N], N from 1 to 100000", line
        line = read_line(session.stdout, 20, "the answer to /rooms after a second idle period", match=lambda line: "room" in line or "error" in line)
        assert line.strip() == "you are in no room", line
        assert wait_process(session, 20, "lanchat to quit") == 0
    finally:
        if session.poll() is None:
            session.kill()
