"""Issue 28, item 1 (its second half): a member the creator removed sends an INVITE for that room to
another member running `--auto-accept all`. Before the fix that member answered "accepted", asked the
removed member for the room's history and stored its records written after the removal ("2 earlier
messages from <removed member>'s history"). Now it refuses ("... was removed from lab") and asks nothing.
The removed member is Tests/e2e/attack_removed.py, speaking the wire protocol."""
import json
import os
import subprocess
import sys

from testlan import ROOT, read_line, wait_for

ATTACKER = os.path.join(ROOT, "Tests", "e2e", "attack_removed.py")
ROOM = "lab"


def test_a_removed_member_cannot_invite_a_member_back_into_the_room_nor_hand_it_history(lan):
    lan.up(3)
    alice = lan.start_daemon("h2", name="alice", extra=["--auto-accept", "all"])
    bob = lan.start_daemon("h3", name="bob", extra=["--auto-accept", "all"])
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h2")), timeout=20, what="alice to see bob")
    # Alice makes lab with bob: she is its creator.
    assert lan.lanchat_json("h2", "invite", "bob", "--room", ROOM, "--wait")["outcome"] == "accepted"
    client = lan.popen("h1", [sys.executable, ATTACKER, lan.addr("h2"), str(alice.status()["port"]), lan.addr("h3"),
                              str(bob.status()["port"]), ROOM], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        member = json.loads(read_line(client.stdout, 60, "the attacker in the room", match=lambda l: '"member"' in l))
        assert member["joined"], member
        wait_for(lambda: any(m["id"] == member["id"] for m in lan.lanchat_json("h3", "members", ROOM)["members"]),
                 timeout=20, what="bob to count the attacker a member")
        lan.lanchat("h2", "remove", member["id"], "--room", ROOM, "--reason", "spam")
        wait_for(lambda: not any(m["id"] == member["id"] for m in lan.lanchat_json("h3", "members", ROOM)["members"]),
                 timeout=20, what="bob to drop the removed member")
        client.stdin.write("go on\n")
        client.stdin.flush()
        out = json.loads(read_line(client.stdout, 60, "the attacker's observations", match=lambda l: '"done"' in l))
    finally:
        client.kill()
    print(f"\nthe removed member's INVITE to bob: {out}")
    assert out.get("outcome") == "refused" and "was removed from lab" in out.get("reason", ""), out
    assert not out["history_requested"], out
    history = lan.lanchat_json("h3", "history", "--room", ROOM)
    assert not any("written after my removal" in m["text"] or "history" in m["text"] and m["kind"] == "system" and "wire-client" in m["text"]
                   for m in history), history
    assert not any(m["id"] == member["id"] for m in lan.lanchat_json("h3", "members", ROOM)["members"])
    assert alice.process.poll() is None and bob.process.poll() is None
