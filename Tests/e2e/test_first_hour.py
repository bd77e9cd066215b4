"""The first hour with lanchat (issue 32): what `peers`, `doctor` and `watch` say must be true.

- The side that was connected to with `lanchat connect` (from beyond a router: discovery does not see the
  peer) lists that peer in `peers` at once, not "no peers found yet" until a room is shared.
- On a host running without Avahi on purpose, with peers kept by address or connected to it, `doctor`
  says discovery is off and what chat works through (warnings), and exits 0; without such peers it
  still fails.
- `watch` on a terminal says at once that it watches (on stderr); to a pipe it prints nothing extra,
  and with --json nothing extra on stdout."""
import json
import os
import pty
import select
import subprocess
import time

from testlan import BIN, read_line, wait_for


def test_the_side_that_was_connected_to_lists_the_peer_at_once(lan):
    # Bob's host runs without Avahi, beyond a router from alice's: only alice's `connect` joins them.
    lan.add_host("h1")
    lan.add_host("h2", avahi=False, subnet=2)
    lan.router("gw")
    alice = lan.start_daemon("h1", name="alice")
    bob = lan.start_daemon("h2", name="bob")
    assert lan.peers("h2") == []
    assert lan.lanchat_json("h1", "connect", lan.addr("h2"), "--yes")["saved"] is True
    alice_id = alice.status()["id"]

    peers = wait_for(lambda: [p for p in lan.peers("h2") if p.get("id") == alice_id], timeout=15,
                     what="alice listed at bob (she connected to him)")
    assert len(lan.peers("h2")) == 1
    peer = peers[0]
    assert (peer["name"], peer["state"], peer["origin"], peer["dialed_us"]) == ("alice", "connected", "connected", True), peer
    # Where the connection comes from; nothing to dial (where alice listens is not known to bob).
    assert peer["host"] == lan.addr("h1") and peer["addresses"] == [] and peer["port"] == 0, peer
    assert peer["short_id"] == alice_id[:12] and peer["rooms"] == []
    assert bob.status()["peers"] == 1

    text = lan.lanchat("h2", "peers").stdout
    assert "no peers found" not in text, text
    row = [line for line in text.splitlines() if line.startswith("alice")]
    assert len(row) == 1 and "connected (dialed us)" in row[0] and lan.addr("h1") in row[0], text

    # Bob's doctor: no Avahi there, but chat works through alice's connection.
    doctor = lan.lanchat("h2", "doctor", check=False)
    assert doctor.returncode == 0, doctor.stdout
    assert "warn  avahi-daemon" in doctor.stdout and "discovery is off: chat works through 1 connected peer" in doctor.stdout, doctor.stdout
    assert "FAIL" not in doctor.stdout, doctor.stdout

    # Once a room is shared, alice is listed the same way, with the room.
    lan.lanchat("h1", "invite", "bob", "--room", "wan")
    invitation = wait_for(lambda: lan.lanchat_json("h2", "invitations"), timeout=15, what="alice's invitation at bob")[0]
    lan.lanchat("h2", "accept", invitation["id"])
    wait_for(lambda: [p["rooms"] for p in lan.peers("h2")] == [["wan"]], timeout=15, what="the shared room in bob's peers")
    assert [(p["name"], p["origin"], p["state"]) for p in lan.peers("h2")] == [("alice", "connected", "connected")]


def test_doctor_without_avahi_on_purpose_warns_when_chat_works_through_static_peers(lan):
    lan.add_host("h1", avahi=False)
    lan.add_host("h2")
    lan.add_host("h3", avahi=False)
    lan.start_daemon("h2", name="bob")
    # Alice has bob in her configuration; carol has no peer yet.
    lan.start_daemon("h1", name="alice", extra=["--static-peer", lan.addr("h2")])
    lan.start_daemon("h3", name="carol")
    wait_for(lambda: [(p["name"], p["origin"]) for p in lan.peers("h1")] == [("bob", "static")], timeout=40,
             what="the configured static peer listed")

    doctor = lan.lanchat("h1", "doctor", check=False)
    assert doctor.returncode == 0, doctor.stdout
    assert "FAIL" not in doctor.stdout, doctor.stdout
    lines = doctor.stdout.splitlines()
    avahi = [line for line in lines if line.startswith("warn  avahi-daemon:")]
    assert len(avahi) == 1 and "discovery is off: chat works through 1 static peer (lanchat peers)" in avahi[0], doctor.stdout
    checks = {c["name"]: c for c in json.loads(lan.lanchat("h1", "doctor", "--json", check=False).stdout)}
    assert checks["avahi-daemon"]["result"] == "warn" and checks["advertisement"]["result"] == "warn", checks
    assert checks["socket"]["result"] == "ok" and checks["port"]["result"] == "ok", checks

    # Without any peer kept by address or connected, no Avahi is still a failure...
    doctor = lan.lanchat("h3", "doctor", check=False)
    assert doctor.returncode == 1 and "FAIL  avahi-daemon" in doctor.stdout and "discovery is off" not in doctor.stdout, doctor.stdout
    # ...until carol keeps a peer by address.
    assert lan.lanchat_json("h3", "connect", lan.addr("h2"), "--yes")["saved"] is True
    doctor = lan.lanchat("h3", "doctor", check=False)
    assert doctor.returncode == 0 and "FAIL" not in doctor.stdout, doctor.stdout
    assert "chat works through 1 static peer" in doctor.stdout, doctor.stdout


def _watch(lan, *args, seconds):
    """`lanchat watch ARGS` on h1 for `seconds` (then `timeout` ends it inside the host), its stdout a
    terminal (a pty); returns the process and the pty's master end."""
    argv = ["timeout", str(seconds), os.path.join(BIN, "lanchat"), "watch", *args]
    master, slave = pty.openpty()
    process = lan.popen("h1", argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    return process, master


def _pending(fd, seconds):
    """What `fd` gives within `seconds`."""
    data = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


def test_watch_says_at_once_that_it_watches_on_a_terminal_and_nothing_extra_to_a_pipe(lan):
    lan.up(1)
    alice = lan.start_daemon("h1", name="alice")
    # (Its registration is an event: wait for it to be over, so that nothing is said for a while.)
    wait_for(lambda: alice.status()["advertising"] == "registered", timeout=20, what="alice advertised")

    # On a terminal, with or without --json: one line on stderr at once, nothing on stdout before an event.
    for args in ([], ["--json"]):
        process, master = _watch(lan, *args, seconds=4)
        try:
            line = read_line(process.stderr, timeout=3, what=f"watch {args}'s first line on a terminal").decode()
            assert line.startswith("watching lanchatd at /") and line.rstrip().endswith("(Ctrl-C to stop)"), line
            assert _pending(master, 1) == b"", args   # the terminal (stdout) gets events only
            process.wait(timeout=10)
        finally:
            os.close(master)

    # To a pipe (a script): nothing extra, on stdout or stderr, with or without --json.
    for args in ([], ["--json"]):
        result = lan.run("h1", ["timeout", "3", os.path.join(BIN, "lanchat"), "watch", *args], check=False)
        assert result.returncode == 124, (args, result.returncode, result.stderr)
        assert (result.stdout, result.stderr) == ("", ""), (args, result.stdout, result.stderr)
