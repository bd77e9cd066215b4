"""Issue 28, item 2: a member cannot freeze a room's metadata nor, through it, block its administration.
The member (Tests/e2e/attack_meta.py, an attacker speaking the wire protocol through wire_client.py's
pieces) joins a room a real lanchatd on the simulated LAN made (so it is its creator) by inviting it into
a room of that name (the two merge).
It writes the topic and 255 keys at version 2^62 and 300 more keys at version 1. A received version steps
at most 2^20 past the one held (SessionStateMachine.maximumMetaStep), one member holds at most 128 of the
room's ordinary keys at a receiver (maximumMetaKeysPerAuthor, 64 at a writer), and the administration's
keys count apart: the creator still sets and deletes the topic, removes the member and closes the room."""
import json
import os
import subprocess
import sys
import time

from testlan import ROOT, read_line, wait_for

ATTACKER = os.path.join(ROOT, "Tests", "e2e", "attack_meta.py")
ROOM = "lab"


def test_a_member_cannot_freeze_the_metadata_nor_block_the_creator(lan):
    lan.up(3)
    daemon = lan.start_daemon("h2", name="alice", extra=["--auto-accept", "all"])
    lan.start_daemon("h3", name="bob", extra=["--auto-accept", "all"])
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h2")), timeout=20, what="alice to see bob")
    # Alice makes lab (her invitation): she is its creator.
    assert lan.lanchat_json("h2", "invite", "bob", "--room", ROOM, "--wait")["outcome"] == "accepted"
    assert lan.lanchat_json("h2", "members", ROOM)["administered"] is True
    port = str(daemon.status()["port"])
    client = lan.popen("h1", [sys.executable, ATTACKER, lan.addr("h2"), port, "freeze", ROOM],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    problems = []
    try:
        connected = json.loads(read_line(client.stdout, 60, "the attacker connected"))
        assert connected["version"] == 3, connected
        flooded = json.loads(read_line(client.stdout, 120, "the attacker's flood", match=lambda l: '"flooded"' in l))
        print(f"\nattacker: {json.dumps(flooded)}")
        assert flooded["invited"] and flooded["synced"], flooded

        held = lan.lanchat_json("h2", "room", "list", ROOM)
        theirs = [m for m in held if m.get("author_id", m.get("author")) == connected["id"] or m["key"].startswith(("k", "m"))]
        at_last = [m["key"] for m in held if m["version"] >= 1 << 62]
        print(f"held: {len(held)} keys, {len(theirs)} of the member's, {len(at_last)} at version 2^62 or more")
        if at_last:
            problems.append(f"{len(at_last)} keys taken at version 2^62 or more (e.g. {at_last[:3]})")
        if len(theirs) > 128:
            problems.append(f"the member holds {len(theirs)} of the room's keys (more than 128)")

        def creator(*args):
            result = lan.lanchat("h2", *args, check=False)
            said = (result.stdout + result.stderr).strip().replace("\n", " ")[:200]
            print(f"lanchat {' '.join(args)}: exit {result.returncode}: {said}")
            if result.returncode != 0:
                problems.append(f"`lanchat {' '.join(args)}` failed: {said}")
            return result

        creator("room", "set", ROOM, "topic", "ours")
        creator("room", "set", ROOM, "agenda", "1. demo")
        creator("room", "delete", ROOM, "topic")
        creator("remove", connected["id"], "--room", ROOM, "--reason", "flood")
        members = lan.lanchat_json("h2", "members", ROOM)["members"]
        if any(m["id"] == connected["id"] for m in members):
            problems.append("the member is still in the room after `remove`")
        creator("close", ROOM, "--reason", "done")
        time.sleep(0.5)
        rooms = lan.lanchat_json("h2", "rooms")
        names = [r["room"] if isinstance(r, dict) else r for r in (rooms.get("rooms", rooms) if isinstance(rooms, dict) else rooms)]
        if ROOM in names:
            problems.append(f"the room is still open after `close`: {names}")
        client.stdin.write("report\n")
        client.stdin.flush()
        told = json.loads(read_line(client.stdout, 30, "the attacker's last observations", match=lambda l: '"done"' in l))
        print(f"the member was told: {told['told']}")
        if not told["removed_us"]:
            problems.append(f"the member was not told of its removal (told {told['told']})")
    finally:
        client.kill()
    assert daemon.process.poll() is None, "the daemon exited"
    assert not problems, "\n".join(problems)
