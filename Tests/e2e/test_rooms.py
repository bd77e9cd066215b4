"""What rooms offer beyond messages (issue 13): presence (availability, a line of text, raised hands),
seen by the others within a second, by a member that reconnects and by one that joins later, and
auto-away after idle time."""
import json
import os
import subprocess
import time

from testlan import BIN, read_line, wait_for


def members(lan, host, room="lab"):
    return {m["name"]: m for m in lan.lanchat_json(host, "members", room)["members"]}


def three_in_lab(lan, bob_extra=()):
    lan.up(4)
    daemons = {
        "h1": lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"]),
        "h2": lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all", *bob_extra]),
        "h3": lan.start_daemon("h3", name="carol", extra=["--auto-accept", "all"]),
    }
    wait_for(lambda: len([p for p in lan.peers("h1") if p["addresses"]]) >= 2, timeout=20, what="alice to see bob and carol")
    for guest in ("bob", "carol"):
        assert lan.lanchat_json("h1", "invite", guest, "--room", "lab", "--wait")["outcome"] == "accepted"
    for host, others in (("h1", {"bob", "carol"}), ("h2", {"alice", "carol"}), ("h3", {"alice", "bob"})):
        wait_for(lambda: {n: m["state"] for n, m in members(lan, host).items()} == {n: "connected" for n in others},
                 timeout=15, what=f"full mesh at {host}")
    return daemons


def test_status_and_a_raised_hand_reach_the_others_a_reconnecting_member_and_a_newcomer(lan):
    daemons = three_in_lab(lan)
    watch = lan.popen("h2", [os.path.join(BIN, "lanchat"), "watch", "--json"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    started = time.monotonic()
    me = lan.lanchat_json("h1", "status", "set", "busy", "in", "a", "call", "--json")
    assert me["availability"] == "busy" and me["text"] == "in a call", me
    hand = lan.lanchat_json("h1", "hand", "up", "--room", "lab", "--json")
    assert hand["hands"] == ["lab"], hand

    def seen(host):
        alice = members(lan, host).get("alice", {})
        return alice.get("availability") == "busy" and alice.get("status_text") == "in a call" and alice.get("hand") is True
    for host in ("h2", "h3"):
        wait_for(lambda: seen(host), timeout=10, what=f"alice busy with her hand up at {host}")
    elapsed = time.monotonic() - started
    print(f"status and hand seen by both others {elapsed * 1000:.0f} ms after `lanchat status set` (two CLI calls included)")
    line = read_line(watch.stdout, 10, "alice's presence in bob's watch", match=lambda l: '"presence"' in l and '"lab"' in l)
    event = json.loads(line)["presence"]
    assert event["name"] == "alice" and event["availability"] == "busy" and event["hands"] == ["lab"], event
    watch.kill()
    assert "busy (in a call)" in lan.lanchat("h2", "members", "lab").stdout
    assert any(p["name"] == "alice" and p.get("availability") == "busy" for p in lan.peers("h2")), lan.peers("h2")
    assert "presence:    busy (in a call), hand up in lab" in lan.lanchat("h1", "status").stdout

    # Carol's daemon restarts: she learns alice's state again when they reconnect.
    daemons["h3"].stop()
    daemons["h3"].start()
    wait_for(lambda: seen("h3"), timeout=20, what="alice's state at carol after her restart")

    # Dave joins later (invited by bob): he learns alice's state when he connects to her.
    lan.start_daemon("h4", name="dave", extra=["--auto-accept", "all"])
    wait_for(lambda: any(p["name"] == "dave" and p["addresses"] for p in lan.peers("h2")), timeout=20, what="bob to see dave")
    assert lan.lanchat_json("h2", "invite", "dave", "--room", "lab", "--wait")["outcome"] == "accepted"
    wait_for(lambda: seen("h4"), timeout=20, what="alice's state at dave, who joined later")

    # Hand down, status back: seen as such.
    lan.lanchat("h1", "hand", "down", "--room", "lab")
    lan.lanchat("h1", "status", "set", "available")
    wait_for(lambda: members(lan, "h2")["alice"].get("hand") is False and members(lan, "h2")["alice"]["availability"] == "available",
             timeout=10, what="alice's hand down and available at bob")
    bad = lan.lanchat("h1", "status", "set", "asleep", check=False)
    assert bad.returncode != 0 and "available, away, busy" in bad.stderr, bad.stderr
    long = lan.lanchat("h1", "status", "set", "away", "x" * 200, check=False)
    assert long.returncode != 0 and "128 bytes" in long.stderr, long.stderr


def test_an_idle_member_turns_away_and_is_back_at_its_next_command(lan):
    three_in_lab(lan, bob_extra=["--auto-away", "3s"])

    def bob():
        return members(lan, "h1")["bob"]
    wait_for(lambda: bob().get("availability") == "away" and bob().get("status_text") == "idle", timeout=15, what="bob away (idle) at alice")
    lan.lanchat("h2", "send", "--room", "lab", "I'm back")
    wait_for(lambda: bob().get("availability") == "available", timeout=10, what="bob available again at alice")


def meta(lan, host, room="lab"):
    return {m["key"]: (m["value"], m["version"]) for m in lan.lanchat_json(host, "room", "list", room)}


def test_room_metadata_converges_is_bounded_and_reaches_a_newcomer_with_the_topic(lan):
    three_in_lab(lan)
    set_topic = lan.lanchat("h1", "room", "set", "lab", "topic", "release", "planning")
    assert "topic set (version 1)" in set_topic.stdout, set_topic.stdout
    for host in ("h2", "h3"):
        wait_for(lambda: meta(lan, host).get("topic") == ("release planning", 1), timeout=10, what=f"the topic at {host}")
    # Alice and bob write the same key at once: everyone ends with the same value.
    writers = [lan.popen(h, [os.path.join(BIN, "lanchat"), "room", "set", "lab", "owner", who], stdout=subprocess.PIPE, text=True)
               for h, who in (("h1", "alice"), ("h2", "bob"))]
    for writer in writers:
        assert writer.wait(timeout=30) == 0
    wait_for(lambda: len({json.dumps(meta(lan, h).get("owner")) for h in ("h1", "h2", "h3")}) == 1 and meta(lan, "h3").get("owner"),
             timeout=10, what="the same owner everywhere")
    owner = meta(lan, "h1")["owner"]
    assert owner[0] in ("alice", "bob"), owner
    # Compare-and-set against the version held here.
    stale = lan.lanchat("h3", "room", "set", "lab", "owner", "carol", "--if-version", "0", check=False)
    assert stale.returncode != 0 and "version" in stale.stderr, stale.stderr
    assert lan.lanchat_json("h3", "room", "set", "lab", "owner", "carol", "--if-version", str(owner[1]), "--json")["version"] == owner[1] + 1
    # The limits: a value of at most 4096 bytes, 64 KiB in all.
    big = lan.lanchat("h1", "room", "set", "lab", "big", "x" * 5000, check=False)
    assert big.returncode != 0 and "4096" in big.stderr, big.stderr
    for n in range(16):
        lan.lanchat("h1", "room", "set", "lab", f"k{n}", "v" * 3900)
    full = lan.lanchat("h1", "room", "set", "lab", "k16", "v" * 3900, check=False)
    assert full.returncode != 0 and "65536" in full.stderr, full.stderr
    lan.lanchat("h1", "room", "delete", "lab", "k0")
    assert lan.lanchat("h1", "room", "get", "lab", "k0", check=False).returncode != 0
    # Dave joins later (invited by carol): he gets the metadata and is shown the topic.
    lan.start_daemon("h4", name="dave", extra=["--auto-accept", "all"])
    wait_for(lambda: any(p["name"] == "dave" and p["addresses"] for p in lan.peers("h3")), timeout=20, what="carol to see dave")
    assert lan.lanchat_json("h3", "invite", "dave", "--room", "lab", "--wait")["outcome"] == "accepted"
    wait_for(lambda: meta(lan, "h4") == meta(lan, "h1"), timeout=20, what="alice's metadata at dave")
    notices = [m["text"] for m in lan.lanchat_json("h4", "history", "--room", "lab") if m["kind"] == "system"]
    assert any(n == "topic: release planning (set by alice)" for n in notices), notices
    assert lan.lanchat("h4", "room", "get", "lab", "topic").stdout.strip() == "release planning"
