"""Named byte streams (issue 4): `lanchat stream PEER NAME` and `lanchat stream --accept NAME` pipe bytes
both ways like netcat over the session, with backpressure, a clean end of data, and clear errors."""
import hashlib
import json
import os
import subprocess
import threading
import time

from test_files import pair
from testlan import BIN, read_line, wait_process


LANCHAT = os.path.join(BIN, "lanchat")


def bounded(function, timeout, what):
    """Runs function() (a blocking read) on a thread of its own and returns its result; fails naming `what`
    when it has not returned within `timeout` seconds."""
    outcome = []

    def run():
        try:
            outcome.append((True, function()))
        except BaseException as error:   # handed to the caller
            outcome.append((False, error))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def accept(lan, host, name, **kwargs):
    return lan.popen(host, [LANCHAT, "stream", "--accept", name, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def test_100_mib_through_a_stream_arrive_identical_and_the_reply_comes_back(lan):
    pair(lan, os.path.join(lan.dir, "downloads"))
    source = os.path.join(lan.dir, "payload.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(100 << 20))
    reply = os.path.join(lan.dir, "reply.bin")
    with open(reply, "wb") as f:
        f.write(os.urandom(3 << 20))
    received = os.path.join(lan.dir, "received.bin")
    with open(reply, "rb") as stdin, open(received, "wb") as stdout:
        acceptor = lan.popen("h2", [LANCHAT, "stream", "--accept", "backup", "--json"], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
        time.sleep(0.5)
        with open(source, "rb") as payload:
            opener = subprocess.run(lan.ns_prefix("h1") + [LANCHAT, "stream", "bob", "backup", "--json"], stdin=payload,
                                    capture_output=True, timeout=120)
        assert opener.returncode == 0, opener.stderr
        assert wait_process(acceptor, 30, "the backup acceptor to exit") == 0, acceptor.stderr.read()
    assert hashlib.sha256(open(received, "rb").read()).digest() == hashlib.sha256(open(source, "rb").read()).digest()
    assert opener.stdout == open(reply, "rb").read()
    summary = json.loads(opener.stderr.decode().strip().splitlines()[-1])
    assert summary["state"] == "finished" and summary["sent"] == 100 << 20 and summary["received"] == 3 << 20
    accepted = json.loads(acceptor.stderr.read().decode().strip().splitlines()[-1])
    assert accepted["peer"] == "alice" and accepted["name"] == "backup" and accepted["received"] == 100 << 20


def test_backpressure_a_slow_reader_holds_the_sender_back(lan):
    pair(lan, os.path.join(lan.dir, "downloads"))
    acceptor = lan.popen("h2", [LANCHAT, "stream", "--accept", "slow"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    opener = lan.popen("h1", [LANCHAT, "stream", "bob", "slow"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    taken = [0]
    block = os.urandom(1 << 20)
    digest = hashlib.sha256()

    def feed():
        try:
            for _ in range(200):
                opener.stdin.write(block)
                opener.stdin.flush()
                digest.update(block)
                taken[0] += len(block)
            opener.stdin.close()
        except BrokenPipeError:
            pass
    feeder = threading.Thread(target=feed)
    feeder.start()
    # Nobody reads the acceptor's stdout: the sender must stall after what the buffers and the 4 MiB
    # credit window hold, not read all 200 MiB into memory somewhere.
    time.sleep(4)
    stalled = taken[0]
    time.sleep(2)
    assert taken[0] == stalled, "the sender kept going although nobody reads"
    assert stalled < 64 << 20, f"{stalled >> 20} MiB taken before the sender stalled"
    print(f"\nsender stalled after {stalled / 2**20:.0f} MiB with nobody reading")
    # Now read: everything arrives, in order.
    got = hashlib.sha256()

    def drain():
        total = 0
        while True:
            chunk = acceptor.stdout.read(1 << 20)
            if not chunk:
                return total
            got.update(chunk)
            total += len(chunk)
    total = bounded(drain, 120, "the end of the 200 MiB at the slow acceptor's stdout")
    feeder.join(timeout=60)
    assert not feeder.is_alive(), "timed out after 60s waiting for the feeder to write its 200 MiB"
    assert total == 200 << 20 and got.digest() == digest.digest()
    assert wait_process(acceptor, 30, "the slow acceptor to exit") == 0 and wait_process(opener, 30, "the slow opener to exit") == 0


def test_no_acceptor_is_a_clear_refusal(lan):
    pair(lan, os.path.join(lan.dir, "downloads"))
    started = time.monotonic()
    result = lan.run("h1", [LANCHAT, "stream", "bob", "nobody-here"], input="x", check=False, timeout=60)
    assert result.returncode == 1
    assert "nobody on bob accepts streams named 'nobody-here'" in result.stderr, result.stderr
    assert time.monotonic() - started < 20
    bad = lan.run("h1", [LANCHAT, "stream", "bob", "no/slashes"], input="", check=False)
    assert bad.returncode == 1 and "is not valid" in bad.stderr


def test_a_killed_acceptor_breaks_the_stream_for_the_opener(lan):
    pair(lan, os.path.join(lan.dir, "downloads"))
    acceptor = accept(lan, "h2", "pipe")
    time.sleep(0.5)
    opener = lan.popen("h1", [LANCHAT, "stream", "bob", "pipe"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    opener.stdin.write(b"hello\n")
    opener.stdin.flush()
    assert read_line(acceptor.stdout, 10, "the first bytes at the acceptor") == b"hello\n"
    # (nsenter forks for the PID namespace: kill the program itself, inside the host.)
    lan.run("h2", ["pkill", "-KILL", "-f", "lanchat stream --accept pipe"])
    assert wait_process(opener, 15, "the opener to see the stream break") == 1
    assert "broke" in opener.stderr.read().decode()
    # The daemons keep serving: a new stream works.
    again = accept(lan, "h2", "pipe")
    time.sleep(0.5)
    result = lan.run("h1", [LANCHAT, "stream", "bob", "pipe"], input="second\n", timeout=30)
    assert wait_process(again, 15, "the second acceptor to exit") == 0 and again.stdout.read() == b"second\n"
    assert result.returncode == 0


def test_a_hostile_peer_cannot_flood_a_stream(lan):
    a, b = pair(lan, os.path.join(lan.dir, "downloads"))
    # Its stdout is never read: the daemon cannot pass the bytes on, so it grants no more credit.
    acceptor = lan.popen("h2", [LANCHAT, "stream", "--accept", "flood"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    port = str(b.status()["port"])
    out = lan.wire_client("h1", "h2", port, "hostile-streams")
    assert out["no_room"] == 1 and out["joined"] and out["pong_after_junk"], out
    assert out["credit"] == 4 << 20, out
    assert out["abort_status"] == 2 and "more than it was allowed" in out["abort_text"], out
    bounded(acceptor.stdout.read, 30, "the flooded acceptor's stdout to end")   # what arrived within the credit, then the end
    assert wait_process(acceptor, 15, "the flooded acceptor to exit") == 1
    assert "more than it was allowed" in acceptor.stderr.read().decode()
    assert b.process.poll() is None


def test_an_acceptor_that_names_its_peer_is_not_fed_by_another_member(lan):
    """`lanchat stream --accept NAME --from PEER`: a member that opens NAME first does not get its bytes
    into the acceptor's pipe (issue 11: `... | tar x` fed by the wrong member); the named peer's stream
    is taken, and the acceptor says whom it got."""
    from testlan import wait_for
    lan.up(3)
    lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    lan.start_daemon("h3", name="carol", extra=["--auto-accept", "all"])
    wait_for(lambda: {"bob", "carol"} <= {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="discovery")
    for peer in ("bob", "carol"):
        assert lan.lanchat_json("h1", "invite", peer, "--room", "lab", "--wait")["outcome"] == "accepted"
    wait_for(lambda: len(lan.lanchat_json("h3", "members", "lab")["members"]) == 2, timeout=20, what="carol to know the whole room")
    acceptor = lan.popen("h2", [LANCHAT, "stream", "--accept", "backup", "--from", "alice", "--json"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    # Carol, a member too, opens "backup" first: held, not given to the acceptor waiting for alice.
    mallory = lan.popen("h3", [LANCHAT, "stream", "bob", "backup"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    mallory.stdin.write(b"rm -rf /\n")
    mallory.stdin.flush()
    time.sleep(1.5)
    assert acceptor.poll() is None, "the acceptor took a stream before alice opened one"
    result = lan.run("h1", [LANCHAT, "stream", "bob", "backup"], input="from alice\n", timeout=30)
    assert result.returncode == 0, result.stderr
    assert wait_process(acceptor, 15, "the acceptor to end after alice's stream") == 0
    assert acceptor.stdout.read() == b"from alice\n"
    assert json.loads(acceptor.stderr.read().decode().strip().splitlines()[-1])["peer"] == "alice"
    # Carol's open is refused once nobody took it (10 s), with the reason.
    assert wait_process(mallory, 30, "carol's unwanted stream to be refused") == 1
    assert "nobody on bob accepts streams named 'backup'" in mallory.stderr.read().decode()
