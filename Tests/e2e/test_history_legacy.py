"""A room's history kept before signatures reaches newcomers verified, and is handed on (issue 33).

A lanchatd from before signatures (wire version 1) kept its own messages unsigned. Its history for a
newcomer is sealed now: those records are sealed as they are written, up to 256 under one signature
(they were signed one by one, and each checked by the newcomer). The newcomer keeps each with its seal and
place (its leaf index, the seal's leaves kept once), and can hand them on: a later newcomer invited by it, while their author is
away, checks them against the author's seals and keeps them under the author's name. The inviter's own
messages sent one at a time (a seal of one each) are sealed again for a newcomer, up to 256 to a seal."""
import os
import sqlite3
import time

import pytest

from testlan import wait_for


def history(lan, host, room="old"):
    return lan.lanchat_json(host, "history", "--room", room, "--limit", "5000")


def legacy_records(lan, host):
    return [m for m in history(lan, host) if m["kind"] == "text" and m["text"].startswith("kept before signatures ")]


def stored_legacy(lan, host, author):
    """How `host`'s store keeps `author`'s legacy records: how many, under how many seals, how many with a
    proof stored as a blob, how many without a signature of their own, how many kept as their leaf index
    alone (2 bytes: the seal's leaves kept with it), and how many of their seals keep every leaf's hash."""
    path = os.path.join(lan.dir, host, "state", "history.sqlite3")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        kept = db.execute("SELECT count(*), count(DISTINCT seal_id), sum(typeof(seal_proof) = 'blob'), sum(signature = ''), "
                          "sum(length(seal_proof) = 2) FROM messages "
                          "WHERE sender_id = ? AND body LIKE 'kept before signatures %'", (author,)).fetchone()
        whole = db.execute("SELECT count(*) FROM seals WHERE author_id = ? AND length(leaves) = 32 * leaf_count "
                           "AND seal_id IN (SELECT seal_id FROM messages WHERE sender_id = ? AND body LIKE 'kept before signatures %')",
                           (author, author)).fetchone()[0]
        return (*kept, whole)
    finally:
        db.close()


@pytest.mark.parametrize("legacy", [300, 3000])
def test_own_unsigned_history_is_sealed_for_a_newcomer_who_hands_it_on(lan, legacy):
    """300: one piece of the export, two seals (256 and 44). 3,000: a piece that lanchatd makes ready in
    two halves at once (alice's sealing; bob's paths made again from the seals' leaves)."""
    lan.up(4)
    config = os.path.join(lan.dir, "history.conf")  # (a newcomer is given the last 1000 unless told)
    with open(config, "w") as f:
        f.write(f"history-for-newcomers = {legacy}\n")
    alice = lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all", "--config", config])
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all", "--config", config])
    carol = lan.start_daemon("h3", name="carol", extra=["--auto-accept", "all"])
    lan.start_daemon("h4", name="dave", extra=["--auto-accept", "all"])
    wait_for(lambda: {"bob", "carol", "dave"} <= {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="alice to see the others")
    assert lan.lanchat_json("h1", "invite", "carol", "--room", "old", "--wait")["outcome"] == "accepted"
    alice_id = alice.status()["id"]
    # Alice's history as a lanchatd from before signatures kept it: her own messages, unsigned.
    alice.stop()
    carol.stop()
    db = sqlite3.connect(os.path.join(lan.dir, "h1", "state", "history.sqlite3"))
    base = int(time.time() * 1000) - 3_600_000
    db.executemany("INSERT INTO messages (id, room, sender_id, sender_name, sequence, timestamp, kind, body, stored_at) "
                   "VALUES (?,?,?,?,?,?,?,?,?)",
                   ((f"{base + i:012x}" + os.urandom(10).hex(), "old", alice_id, "alice", i + 1, base + i, 0, f"kept before signatures {i}", base + i)
                    for i in range(legacy)))
    db.commit()
    db.close()
    alice.start()
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="alice to see bob again")

    # Bob, a newcomer, gets them from alice, each verified (sealed by alice as her history was written).
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "old", "--wait")["outcome"] == "accepted"
    wait_for(lambda: len(legacy_records(lan, "h2")) == legacy, timeout=30, what=f"bob to hold alice's {legacy} earlier messages")
    records = legacy_records(lan, "h2")
    assert all(m["sender"] == "alice" and m["signed"] is True for m in records), records[:3]
    assert [m["text"] for m in records] == [f"kept before signatures {i}" for i in range(legacy)]
    # Sealed (300: two seals, 256 and 44; 3,000: 256 to a seal in each half), not signed one by one; each
    # place kept as its leaf index (a blob of 2 bytes), each seal with its leaves (bob received them whole).
    # (3,000: the import's pieces end by size; a seal cut by one keeps its paths before the cut.)
    kept = stored_legacy(lan, "h2", alice_id)
    seals = 2 if legacy == 300 else kept[1]
    by_index = legacy if legacy == 300 else kept[4]
    assert kept == (legacy, seals, legacy, legacy, by_index, seals)
    assert legacy / 256 <= seals <= legacy / 256 + 2 and legacy - by_index < 512, kept

    # Alice goes away; bob brings dave in: dave checks alice's records against her seals, as bob kept them.
    alice.stop()
    wait_for(lambda: not any(p["name"] == "alice" and p["addresses"] for p in lan.peers("h2")), timeout=30, what="bob to see alice gone")
    assert lan.lanchat_json("h2", "invite", "dave", "--room", "old", "--wait")["outcome"] == "accepted"
    wait_for(lambda: len(legacy_records(lan, "h4")) == legacy, timeout=30, what=f"dave to hold alice's {legacy} messages from bob")
    handed_on = legacy_records(lan, "h4")
    assert all(m["sender"] == "alice" and m["signed"] is True for m in handed_on), handed_on[:3]
    assert [(m["id"], m["text"]) for m in handed_on] == [(m["id"], m["text"]) for m in records]
    # Bob's export made each record's path again from the seal's leaves: dave checked them, and keeps them so too.
    kept = stored_legacy(lan, "h4", alice_id)
    assert kept == (legacy, seals, legacy, legacy, legacy if legacy == 300 else kept[4], seals)
    assert legacy - kept[4] < 512, kept


def stored_seals(lan, host, author, prefix):
    """`author`'s messages on `host` whose text starts with `prefix`: how many, and the leaf count of each
    seal they are kept under (sorted)."""
    path = os.path.join(lan.dir, host, "state", "history.sqlite3")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        count = db.execute("SELECT count(*) FROM messages WHERE sender_id = ? AND body LIKE ?", (author, prefix + "%")).fetchone()[0]
        seals = db.execute("SELECT s.leaf_count FROM seals s WHERE s.author_id = ? AND s.seal_id IN "
                           "(SELECT seal_id FROM messages WHERE sender_id = ? AND body LIKE ?)", (author, author, prefix + "%")).fetchall()
        return count, sorted(n for (n,) in seals)
    finally:
        db.close()


def test_words_sent_one_at_a_time_reach_a_newcomer_under_one_seal(lan):
    """Each message sent alone is a seal of one (one signature each). In a newcomer's history, the
    inviter seals its own such messages again, up to 256 to a seal, so the newcomer checks one signature
    for them; another member's stay under their author's seals."""
    lan.up(3)
    alice = lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    carol = lan.start_daemon("h3", name="carol", extra=["--auto-accept", "all"])
    wait_for(lambda: {"bob", "carol"} <= {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="alice to see the others")
    assert lan.lanchat_json("h1", "invite", "carol", "--room", "chat", "--wait")["outcome"] == "accepted"
    alice_id, carol_id = alice.status()["id"], carol.status()["id"]
    for i in range(12):
        lan.lanchat("h1", "send", "--room", "chat", f"alone {i}")
    for i in range(3):
        lan.lanchat("h3", "send", "--room", "chat", f"carol alone {i}")
    wait_for(lambda: len([m for m in history(lan, "h1", "chat") if m["text"].startswith("carol alone ")]) == 3, timeout=30,
             what="alice to hold carol's messages")
    # As sent: a seal of one each (the calls came one after another).
    assert stored_seals(lan, "h1", alice_id, "alone ") == (12, [1] * 12)
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "chat", "--wait")["outcome"] == "accepted"
    wait_for(lambda: len([m for m in history(lan, "h2", "chat") if "alone " in m["text"]]) == 15, timeout=30,
             what="bob to hold the 15 earlier messages")
    records = [m for m in history(lan, "h2", "chat") if "alone " in m["text"]]
    assert all(m["signed"] is True for m in records), records[:3]
    # Alice's 12 under one seal of hers made for bob's history; carol's 3 as she sealed them.
    assert stored_seals(lan, "h2", alice_id, "alone ") == (12, [12])
    assert stored_seals(lan, "h2", carol_id, "carol alone ") == (3, [1, 1, 1])
    # Carol keeps alice's as they came.
    assert stored_seals(lan, "h3", alice_id, "alone ") == (12, [1] * 12)
