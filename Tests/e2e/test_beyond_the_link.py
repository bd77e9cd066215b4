"""Peers beyond the link: two subnets joined by a router, where multicast (and so DNS-SD) does not
pass. `lanchat connect HOST[:PORT]` joins them: after the short code is confirmed the peer is kept as a
static peer, a room spans both subnets, a file crosses, and the peer is redialed after a restart."""
import hashlib
import json
import os

from testlan import wait_for


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def two_subnets(lan):
    lan.add_host("h1")
    lan.add_host("h2", subnet=2)
    lan.router("gw")
    alice = lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
    bob = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    return alice, bob


def test_connect_joins_two_subnets_into_one_room(lan):
    alice, bob = two_subnets(lan)
    assert lan.addr("h2").startswith("198.18.1.")
    # Unicast crosses the router; discovery does not.
    lan.run("h1", ["ping", "-c", "1", "-W", "2", lan.addr("h2")])
    assert [p for p in lan.peers("h1") if p["addresses"]] == []
    # lanchatd listens on the default port 7473 when none is given, so HOST alone is enough.
    assert bob.status()["port"] == 7473

    # A first look without --yes and without a terminal: who answers, nothing kept.
    look = lan.lanchat("h1", "connect", lan.addr("h2"), check=False)
    assert look.returncode == 1 and "bob" in look.stderr and "short code" in look.stderr and "--yes" in look.stderr, look.stderr
    assert lan.peers("h1") == []

    kept = lan.lanchat_json("h1", "connect", lan.addr("h2"), "--yes")
    assert kept["saved"] is True and kept["name"] == "bob" and kept["port"] == 7473
    bob_id = bob.status()["id"]
    assert kept["id"] == bob_id
    # The same short code as `lanchat ping` on the other side computes.
    assert len(kept["short_code"]) == 9
    peers = lan.peers("h1")
    assert [(p["name"], p["origin"], p["id"]) for p in peers] == [("bob", "static", bob_id)]

    # A room across the router, with a message each way and a file.
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "wan", "--wait")["outcome"] == "accepted"
    lan.lanchat("h1", "send", "--room", "wan", "hello from subnet 1")
    wait_for(lambda: "hello from subnet 1" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "wan")],
             what="alice's message at bob")
    lan.lanchat("h2", "send", "--room", "wan", "hello back from subnet 2")
    wait_for(lambda: "hello back from subnet 2" in [m["text"] for m in lan.lanchat_json("h1", "history", "--room", "wan")],
             what="bob's message at alice")
    source = os.path.join(lan.dir, "across.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(2 << 20))
    result = lan.lanchat("h1", "send-file", "--room", "wan", source, timeout=120)
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "complete"
    received = os.path.join(lan.dir, "h2", "state", "downloads", "across.bin")
    assert sha(received) == sha(source)

    # Both daemons restart: alice still keeps bob (from her state directory) and they meet again.
    alice.stop()
    bob.stop()
    bob.start()
    alice.start()
    assert [(p["name"], p["origin"]) for p in lan.peers("h1")] == [("bob", "static")]
    wait_for(lambda: {m["name"]: m["state"] for m in lan.lanchat_json("h1", "members", "wan")["members"]} == {"bob": "connected"},
             timeout=30, what="bob redialed after the restarts")
    lan.lanchat("h1", "send", "--room", "wan", "after the restart")
    wait_for(lambda: "after the restart" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "wan")],
             what="a message after the restart")

    # disconnect forgets it as a static peer; the connection their room uses stays up, and `peers` says
    # so (origin connected: known only by that connection), as it lists a peer that dialed us (issue 32).
    lan.lanchat("h1", "disconnect", "bob")
    assert [(p["name"], p["origin"], p["state"], p["rooms"]) for p in lan.peers("h1")] == [("bob", "connected", "connected", ["wan"])]


def test_a_static_peer_in_the_config_is_trusted_on_first_use_and_kept_pinned(lan):
    lan.add_host("h1")
    lan.add_host("h2", subnet=2)
    lan.router("gw")
    # Alice starts first: bob is not there yet; she keeps trying (with backoff) until he answers.
    alice = lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all", "--static-peer", lan.addr("h2")])
    bob = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    wait_for(lambda: [(p["name"], p["origin"]) for p in lan.peers("h1")] == [("bob", "static")], timeout=40,
             what="the configured static peer listed")
    bob_id = bob.status()["id"]
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "cfg", "--wait")["outcome"] == "accepted"
    saved = json.load(open(os.path.join(lan.dir, "h1", "state", "static-peers.json")))
    assert [(e["host"], e["port"], e["id"]) for e in saved] == [(lan.addr("h2"), 7473, bob_id)]

    # Bob's host is reinstalled: a new key at the same address. Alice's pinned entry does not follow it.
    bob.stop()
    os.remove(os.path.join(lan.dir, "h2", "state", "identity.pem"))
    bob.start()
    new_id = bob.status()["id"]
    assert new_id != bob_id
    alice.stop()
    alice.start()
    # (The new key may have dialed alice already, bob's room remembering her: listed then as origin
    # connected, beside the pinned entry.)
    assert [(p["name"], p["id"]) for p in lan.peers("h1") if p["origin"] == "static"] == [("bob", bob_id)]
    assert [p["id"] for p in lan.peers("h1") if p["origin"] == "connected"] in ([], [new_id])
    members = {m["name"]: m["state"] for m in lan.lanchat_json("h1", "members", "cfg")["members"]}
    assert members == {"bob": "not_connected"}, members
    # Keeping the new key needs a person: `connect --yes` (the person confirmed its code) replaces the
    # pinned entry. The name alice knew with the old key is a label: a warning, not a refusal.
    assert lan.lanchat_json("h1", "connect", lan.addr("h2"), "--yes")["id"] == new_id
    assert [(p["name"], p["id"]) for p in lan.peers("h1")] == [("bob", new_id)]
    assert alice.process.poll() is None


def test_connect_refuses_bad_addresses_clearly(lan):
    lan.up(1)
    lan.start_daemon("h1", name="alice")
    for address, words in [("bad host", "not HOST[:PORT]"), ("h:99999", "1-65535"), ("[fe80::1", "']'"),
                           ("198.18.0.99:7473", "cannot connect")]:
        result = lan.lanchat("h1", "connect", address, "--yes", check=False, timeout=60)
        assert result.returncode == 1 and words in result.stderr, (address, result.stderr)
