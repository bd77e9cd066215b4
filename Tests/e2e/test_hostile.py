"""What a member of a room or a local user cannot make a daemon do (issue 11): show a forged system
notice; keep a poisoned history (records under the newcomer's own id, a sequence past 2^63 - 1) and
then fail to restart; keep the forged records of a signed (v2) history; use up its descriptors with
one-byte offers; have a daemon that serves a group send a path it opens itself. Each shows the attack,
then that the daemon still serves. The attacker is Tests/e2e/wire_client.py, an independent
implementation of the wire protocol."""
import json
import os
import subprocess
import sys
import time

from testlan import BIN, ROOT, read_line, wait_for



def solo(lan):
    lan.up(2)
    daemon = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    return daemon, str(daemon.status()["port"])


def attack(lan, port, scenario, *extra):
    return lan.wire_client("h1", "h2", port, scenario, *extra)


def test_a_members_forged_system_notice_is_never_shown_as_one(lan):
    daemon, port = solo(lan)
    out = attack(lan, port, "forged-notice")
    assert out["joined"] and out["forged_acked"] and out["ordinary_acked"], out
    history = lan.lanchat_json("h2", "history", "--room", "drop")
    texts = [(m["kind"], m["sender"], m["text"]) for m in history]
    assert not any("SECURITY WARNING" in text for _, _, text in texts), texts
    assert ("text", "wire-client", "an ordinary message") in texts, texts
    # Every notice there is the daemon's own (joins), not the member's words.
    assert all(sender == "*" and "SECURITY" not in text for kind, sender, text in texts if kind == "system"), texts
    assert daemon.process.poll() is None


def test_a_poisoned_history_is_refused_and_the_daemon_restarts_and_sends(lan):
    daemon, port = solo(lan)
    own_id = daemon.status()["id"]
    out = attack(lan, port, "poisoned-history", own_id)
    assert out["joined"] and out["history_requested"] and out["accepted"] and out["end_status"] == 0, out
    history = lan.lanchat_json("h2", "history", "--room", "drop")
    texts = [m["text"] for m in history]
    assert "a good old message" in texts, texts
    assert "words put in your mouth" not in texts and "a sequence the store cannot hold" not in texts, texts
    assert any("1 earlier message" in t and "1 refused" in t for t in texts), texts
    # A restart reads the store again (the sequence our next message continues from included).
    daemon.stop()
    daemon.start()
    assert daemon.status()["id"] == own_id
    sent = lan.lanchat_json("h2", "send", "--room", "drop", "after the restart")
    assert sent["recipients"] == 1
    mine = [m for m in lan.lanchat_json("h2", "history", "--room", "drop") if m["text"] == "after the restart"]
    assert len(mine) == 1 and 1 <= mine[0]["sequence"] < 1 << 32, mine


def test_a_forged_history_record_is_refused_and_the_relay_named(lan):
    """Wire protocol v2: the inviter relays a signed history of four records, two genuine (its own, and
    carol's, signed by carol's key: an inviter's history may hold members who left) and two forged
    (carol's id with the relay's key; carol's key with a body changed after signing). The newcomer keeps
    the genuine ones, refuses the forged ones and names the relay in a notice. On the v2 link a signed
    live message is kept and an unsigned one is not."""
    daemon, port = solo(lan)
    out = attack(lan, port, "forged-history")
    assert out.get("version") == 2, out
    assert out["joined"] and out["history_requested"] and out["accepted"] and out["end_status"] == 0, out
    assert out["signed_acked"], out
    history = lan.lanchat_json("h2", "history", "--room", "drop")
    texts = [m["text"] for m in history]
    senders = {m["text"]: m["sender_id"] for m in history}
    assert "my genuine words" in texts and senders["my genuine words"] == out["id"], history
    assert "carol's genuine words" in texts and senders["carol's genuine words"] == out["carol_id"], history
    assert "words put in carol's mouth" not in texts and "carol said something else" not in texts, texts
    notices = [m["text"] for m in history if m["kind"] == "system"]
    assert any("2 earlier messages" in n and "2 refused as forged" in n and "wire-client" in n for n in notices), notices
    assert "a signed live message" in texts and senders["a signed live message"] == out["id"], history
    assert "an unsigned live message" not in texts, texts
    assert daemon.process.poll() is None


def open_descriptors(lan, daemon):
    """The daemon's open descriptors, counted inside its host (its own PID namespace)."""
    return int(lan.run(daemon.host, ["sh", "-c", f"ls /proc/{daemon.pid()}/fd | wc -l"]).stdout)


def test_a_flood_of_one_byte_offers_is_bounded_and_the_daemon_serves(lan):
    """Issue 11, item 5: about 1,000 one-byte offers (no bytes ever sent) exhausted the daemon's
    descriptors. Now at most 16 from one member are taken at once; the rest are refused with the limit."""
    daemon, port = solo(lan)
    before = open_descriptors(lan, daemon)
    out = attack(lan, port, "offer-flood", "300")
    assert out["joined"] and out["pong_after"], out
    assert out["accepted"] == 16 and out["refused"] == 284, out
    assert "too many transfers at once (16 from one peer)" in out["refusal"], out
    assert open_descriptors(lan, daemon) <= before + 16 + 8, (before, open_descriptors(lan, daemon))
    assert lan.lanchat_json("h2", "status")["name"] == "bob"


def test_a_group_daemon_sends_only_files_handed_over(lan):
    """Issue 11, item 10: with a socket group, other local users reach the daemon; it must not send a
    path it opens with its own rights (its identity key, for one)."""
    lan.up(2)
    lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all", "--socket-group", "root"])
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    from testlan import wait_for
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    probe = ("import json,socket,sys; s=socket.socket(socket.AF_UNIX); s.connect('/run/lanchat/lanchatd.sock'); "
             "s.sendall(json.dumps({'id':1,'method':'send-file','params':{'peer':'bob','path':'/etc/hostname'}}).encode()+b'\\n'); "
             "print(s.makefile().readline())")
    answer = json.loads(lan.run("h1", ["python3", "-c", probe]).stdout)
    assert answer["ok"] is False and answer["error"]["code"] == "bad_file" and "hands over" in answer["error"]["message"], answer
    # lanchat send-file hands the descriptor over: that works.
    source = os.path.join(lan.dir, "note.txt")
    with open(source, "w") as f:
        f.write("handed over")
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=60)
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "complete", result.stdout


def resident_kib(lan, daemon):
    """The daemon's resident memory (VmRSS, KiB), read inside its host."""
    status = lan.run(daemon.host, ["cat", f"/proc/{daemon.pid()}/status"]).stdout
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def test_a_member_that_floods_pings_and_never_reads_is_closed_and_memory_stays_bounded(lan):
    """Issue 11, item 1: the PONGs owed to a peer that does not read wait in the daemon's output. Each
    connection has an output budget (64 MiB) and a stall time (30 s with nothing read): the flooder is
    closed, shown not connected, and the daemon's memory stays within the budget."""
    daemon, port = solo(lan)
    before = resident_kib(lan, daemon)
    out = attack(lan, port, "ping-flood", "60")
    assert out["joined"], out
    assert out["closed_after"] is not None and out["closed_after"] < 60, out
    after = resident_kib(lan, daemon)
    assert after - before < 96 * 1024, (before, after, out)
    notices = [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "drop") if m["kind"] == "system"]
    assert any(t.startswith("wire-client left: stopped reading") for t in notices), notices
    members = {m["name"]: m for room in lan.lanchat_json("h2", "rooms") for m in room["members"]}
    assert members["wire-client"]["state"] == "not_connected", members
    assert lan.lanchat_json("h2", "status")["name"] == "bob"
    print(f"ping flood: {out['pings']} PINGs, closed after {out['closed_after']} s; VmRSS {before} -> {after} KiB; {notices[-1]}")


CONNECTION_FLOOD = r'''
import json, os, resource, socket, ssl, struct, subprocess, sys, tempfile, time
host, port, count, silent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sources = sys.argv[6].split(",")
resource.setrlimit(resource.RLIMIT_NOFILE, (count + silent + 256, count + silent + 256))
sys.path.insert(0, sys.argv[5])
from wire_client import hello, identity
work = tempfile.mkdtemp()
held, established, refused, started = [], 0, 0, time.monotonic()
for n in range(count):
    # A fresh key for every connection: each is a peer we have never seen, sharing no room with us.
    directory = os.path.join(work, str(n))
    os.makedirs(directory)
    key, cert, peer_id = identity(directory)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(cert, key)
    try:
        s = context.wrap_socket(socket.create_connection((host, port), timeout=10, source_address=(sources[n % len(sources)], 0)))
        s.sendall(hello(peer_id, name=f"stranger-{n}"))
        s.settimeout(10)
        if s.recv(6):
            established += 1
            held.append(s)
    except OSError:
        refused += 1
flood_seconds = round(time.monotonic() - started, 1)
# Connections that stay silent (no TLS at all): each holds a handshake slot until its timeout.
quiet = []
for _ in range(silent):
    try:
        quiet.append(socket.create_connection((host, port), timeout=5, source_address=(sources[0], 0)))
    except OSError:
        pass
# What the daemon said to the held ones (without waiting): a GOODBYE saying why, or a close.
evicted = closed = 0
for s in held:
    s.settimeout(0)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ssl.SSLWantReadError, BlockingIOError):
        pass
    except OSError:
        closed += 1
    if b"too many connections from peers outside" in data:
        evicted += 1
print(json.dumps({"established": established, "refused": refused, "seconds": flood_seconds, "silent": len(quiet),
                  "evicted": evicted, "closed": closed}), flush=True)
# Hold everything open while the test checks the daemon; closed when the test ends this process.
sys.stdin.read()
'''


def test_thousands_of_strangers_and_silent_connections_leave_the_daemon_serving(lan):
    """Issue 11, item 2: 2,000 connections from one host with four addresses, each TLS with a fresh key
    and a HELLO (strangers: no room shared), then 200 silent ones (no TLS). The daemon keeps at most 32
    connections and 8 handshakes from one address (512 and 64 in all) and 64 strangers' connections (the
    oldest idle one goes); while the attacker holds all of it open, another host still pings it, joins
    a room and gets a message through."""
    lan.up(3)
    daemon = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    lan.start_daemon("h3", name="carol")
    sources = [f"198.18.0.{n}" for n in (201, 202, 203, 204)]
    for source in sources:
        lan.run("h1", ["ip", "addr", "add", f"{source}/24", "dev", "lan0"])
    before = open_descriptors(lan, daemon)
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    attacker = lan.popen("h1", [sys.executable, "-c", CONNECTION_FLOOD, lan.addr("h2"), str(daemon.status()["port"]), "2000", "200", here,
                                ",".join(sources)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        out = json.loads(attacker.stdout.readline())
        assert out["established"] + out["refused"] == 2000, out
        during = open_descriptors(lan, daemon)
        # At most 32 from each of the four addresses (the silent ones included), and what the daemon had.
        assert during <= before + 4 * 32 + 8, (before, during, out)
        assert out["refused"] > 0 and out["evicted"] > 0, out
        from testlan import wait_for
        wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h3")), timeout=20, what="carol to see bob")
        assert json.loads(lan.lanchat("h3", "ping", "bob", "--json").stdout)["encrypted"] is True
        assert lan.lanchat_json("h3", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
        assert lan.lanchat_json("h3", "send", "--room", "lab", "still here")["recipients"] == 1
        wait_for(lambda: "still here" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab")], timeout=15, what="the message")
        assert daemon.process.poll() is None
        assert "too many connections being set up" in daemon.log(), daemon.log()[-3000:]
        print(f"connection flood: {out}; descriptors {before} -> {during}")
    finally:
        attacker.kill()


LISTENER = r'''
import socket, sys
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", int(sys.argv[1]))); server.listen(8); server.settimeout(float(sys.argv[2]))
try:
    connection, _ = server.accept()
    connection.settimeout(5)
    print(connection.recv(1).hex() or "empty", flush=True)
except OSError:
    print("no connection", flush=True)
'''


def test_a_plaintext_hello_claiming_a_members_id_is_refused_by_an_optional_daemon(lan):
    """`--encryption optional` takes plaintext callers, but a plaintext HELLO proves no id: one that
    claims bob's id (bob proved it with his key as a member of alice's room) is refused, takes none of
    bob's queued messages, and a spoofed `enc=none` advertisement under bob's id still gets TLS."""
    lan.up(3)
    alice = lan.start_daemon("h1", name="alice", extra=["--encryption", "optional"])
    bob = lan.start_daemon("h2", name="bob", extra=["--encryption", "optional", "--auto-accept", "all"])
    bob_id, alice_port = bob.status()["id"], str(alice.status()["port"])
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    assert lan.lanchat_json("h1", "ping", "bob")["encrypted"] is True
    bob.stop()
    lan.lanchat("h1", "send", "--room", "lab", "queued for bob")

    # Mallory, on h3, says HELLO in plaintext as bob.
    out = lan.wire_client("h3", "h1", alice_port, "plain-claim", bob_id, "bob")
    assert out["goodbye"] is not None and out["goodbye"]["reason"] == 4, out
    assert "connect with encryption" in out["goodbye"]["text"], out
    assert 0x10 not in out["types"] and 0x04 not in out["types"], out   # no MESSAGE, no ROOM_MEMBERS
    assert "without encryption claimed to be" in alice.log()
    # An id never seen with a key may still come in plaintext: that is what `optional` offers.
    stranger = lan.wire_client("h3", "h1", alice_port, "plain-claim", "a" * 52, "someone")
    # (It is answered with HELLO and kept: a PING comes after 20 s of silence, the end after 60 s.)
    assert stranger["types"][:1] == [0x01] and (stranger["goodbye"] or {}).get("reason") != 4, stranger

    # A spoofed advertisement: bob's id, `enc=none`, an address of mallory's. Alice's redial of bob
    # (she has a message queued for him) reaches it, and starts with TLS (0x16), not a plaintext HELLO.
    listener = lan.popen("h3", [sys.executable, "-c", LISTENER, "7999", "45"], stdout=subprocess.PIPE, text=True)
    lan.popen("h3", ["avahi-publish", "-s", "bob", "_chat-service._tcp", "7999", "v=1", f"id={bob_id}", "name=bob", "enc=none"],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = listener.communicate(timeout=60)[0].strip()
    assert first == "16", f"alice's first byte to the spoofed bob: {first}"

    # The real bob comes back and gets what was queued for him.
    bob.start()
    wait_for(lambda: "queued for bob" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab")],
             timeout=45, what="bob to get the queued message")
    assert alice.process.poll() is None


HANDSHAKE_FLOOD = r'''
import multiprocessing, os, socket, ssl, sys, tempfile, time
host, port, seconds, workers, here = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sources = sys.argv[6].split(",")
sys.path.insert(0, here)
from wire_client import hello, identity
key, cert, peer_id = identity(tempfile.mkdtemp())
def work(n, results):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(cert, key)
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s = context.wrap_socket(socket.create_connection((host, port), timeout=5, source_address=(sources[n % len(sources)], 0)))
            s.sendall(hello(peer_id, name=f"flood-{n}"))
            s.settimeout(5)
            s.recv(6)
            s.close()
            done += 1
        except OSError:
            pass
    results.put(done)
results = multiprocessing.Queue()
processes = [multiprocessing.Process(target=work, args=(n, results)) for n in range(workers)]
for p in processes: p.start()
print(sum(results.get() for _ in processes), flush=True)
for p in processes: p.join()
'''

CONTROL_PROBE = r'''
import json, socket, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(path); s.settimeout(10)
latencies, n, end = [], 0, time.monotonic() + seconds
reader = s.makefile("rb")
while time.monotonic() < end:
    n += 1
    started = time.monotonic()
    s.sendall(json.dumps({"id": n, "method": "status"}).encode() + b"\n")
    answer = json.loads(reader.readline())
    assert answer["id"] == n and "status" in answer, answer
    latencies.append((time.monotonic() - started) * 1000)
    time.sleep(0.05)
print(json.dumps(sorted(latencies)))
'''


def test_a_tls_handshake_flood_does_not_starve_the_control_api(lan):
    """Issue 11, item 2: TLS work shares the event loops with the control API. While 16 processes on
    another host open TLS connections (with a key and HELLO) as fast as they can from four addresses,
    `status` on the control socket is still answered; its latency is printed next to the same probe
    with no flood, measured in this test (each answer has a 10 s deadline: no timing is asserted)."""
    lan.up(3)
    socket_path = "/run/lanchat/probe.sock"
    daemon = lan.start_daemon("h2", name="bob", socket=socket_path)
    sources = [f"198.18.0.{n}" for n in (211, 212, 213, 214)]
    for source in sources:
        lan.run("h1", ["ip", "addr", "add", f"{source}/24", "dev", "lan0"])

    def probe(seconds):
        return json.loads(lan.run("h2", [sys.executable, "-c", CONTROL_PROBE, socket_path, str(seconds)], timeout=seconds + 60).stdout)

    def summary(latencies):
        return (f"p50 {latencies[len(latencies) // 2]:.1f} ms, p99 {latencies[int(len(latencies) * 0.99)]:.1f} ms, "
                f"max {latencies[-1]:.1f} ms ({len(latencies)} calls)")

    idle = probe(3)
    here = os.path.dirname(os.path.abspath(__file__))
    flood = lan.popen("h1", [sys.executable, "-c", HANDSHAKE_FLOOD, lan.addr("h2"), str(daemon.status()["port"]), "12", "16", here,
                             ",".join(sources)], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        during = probe(8)
        handshakes = int(flood.communicate(timeout=90)[0].strip())
    finally:
        flood.kill()
    print(f"\ncontrol `status` idle: {summary(idle)}; during {handshakes} TLS handshakes in 12 s: {summary(during)}")
    assert handshakes > 0
    assert len(during) > 0 and daemon.process.poll() is None
    # And the daemon still serves a peer.
    lan.start_daemon("h3", name="carol")
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h3")), timeout=20, what="carol to see bob")
    assert lan.lanchat_json("h3", "ping", "bob")["encrypted"] is True


def test_a_member_cannot_bring_in_members_of_its_own_making_nor_undo_anothers_membership(lan):
    """Issue 12, item 2 (wire v3): a member (the wire client) introduces 1,024 members with no proof and 32
    with proofs it signed itself for ids whose keys it does not hold: none is added, and a security event
    names it. Carol, whose own key signed her proof, is added. A leave for carol signed with the member's
    key changes nothing; carol's own signed leave, handed on by the member, removes her ("told by"); her
    old proof, sent again, does not bring her back."""
    daemon, port = solo(lan)
    events = lan.popen("h2", [os.path.join(BIN, "lanchat"), "watch", "--json"], stdout=subprocess.PIPE, text=True)
    client = lan.popen("h1", [sys.executable, os.path.join(ROOT, "Tests", "e2e", "wire_client.py"), lan.addr("h2"), port, "fake-members"],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(read_line(client.stdout, 60, "the wire client's first observations"))
        assert first.get("version") == 3 and first["joined"] and first["pong_before_leave"], first

        def members():
            return {m["name"]: m["id"] for m in lan.lanchat_json("h2", "members", "crowd")["members"]}
        wait_for(lambda: "carol" in members(), timeout=10, what="carol added by her own proof")
        assert members() == {"wire-client": first["id"], "carol": first["carol_id"]}, members()
        line = read_line(events.stdout, 10, "a security event naming the introductions without proofs",
                         match=lambda l: "without their own signed membership" in l)
        assert json.loads(line)["type"] == "security" and "wire-client" in json.loads(line)["text"], line
        client.stdin.write("go on\n")
        client.stdin.flush()
        second = json.loads(read_line(client.stdout, 30, "the wire client's last observations"))
        assert second["pong_after"], second
        wait_for(lambda: "carol" not in members(), timeout=10, what="carol removed by her own signed leave")
        time.sleep(1)  # her old proof came after the leave: she stays out
        assert members() == {"wire-client": first["id"]}, members()
    finally:
        client.kill()
        events.kill()
    notices = [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "crowd") if m["kind"] == "system"]
    assert any("carol left" in n and "told by wire-client" in n for n in notices), notices
    assert not any("fake" in n for n in notices), notices
    assert daemon.process.poll() is None
