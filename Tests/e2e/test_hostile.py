"""What a member of a room cannot make a daemon keep or show (issue 11): a forged system notice, and a
poisoned history (records under the newcomer's own id, a sequence past 2^63 - 1) followed by a
restart. Each shows the attack, then that the daemon still serves. The attacker is Tests/e2e/wire_client.py,
an independent implementation of the wire protocol."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def solo(lan):
    lan.up(2)
    daemon = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    return daemon, str(daemon.status()["port"])


def attack(lan, port, scenario, *extra):
    return json.loads(lan.run("h1", ["python3", os.path.join(HERE, "wire_client.py"), lan.addr("h2"), port, scenario, *extra],
                              timeout=60).stdout)


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
