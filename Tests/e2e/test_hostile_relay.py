"""What a hostile room member cannot make a daemon do with relay answers and shared-file requests (issue
28, items 3 and 5). The attacker is Tests/e2e/attack_relay.py, built on the independent wire client.

Item 3: a member's SYNC_REQUESTs, one a second in each of 4 shared rooms, never accepting an answer, took
the daemon from 32 to 116 descriptors (deleted export files held open) until it disconnected. Now one
answer per member and room is outstanding at a time, an offer not accepted within 60 s ends, and at most
16 transfers go out to one peer (64 in all).

Item 5: a member could fetch, by its digest, a file the daemon shared in a room the member is not in, by
announcing that digest itself in a room they share; and the refusals told a file held from one not held.
Now only an announcement in that room by someone else (not direct) lets a file be served, and the refusal
is the same either way."""
import hashlib
import json
import os
import subprocess
import sys
import time

from test_hostile import solo
from testlan import ROOT, read_line

ATTACK = os.path.join(ROOT, "Tests", "e2e", "attack_relay.py")


def descriptors(lan, daemon):
    """The daemon's open descriptors, and how many of them are deleted files (exports), counted inside its host."""
    listing = lan.run(daemon.host, ["sh", "-c", f"ls -l /proc/{daemon.pid()}/fd"]).stdout.splitlines()
    entries = [line for line in listing if "->" in line]
    return len(entries), sum(1 for line in entries if "(deleted)" in line)


def test_relay_requests_in_four_rooms_keep_one_answer_each_and_unaccepted_answers_end(lan):
    daemon, port = solo(lan)
    seconds = 100
    client = lan.popen("h1", [sys.executable, ATTACK, lan.addr("h2"), port, "relay-flood", "4", str(seconds)],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(read_line(client.stdout, 60, "the attacker joined the rooms"))
        assert first["version"] == 2 and first["joined"], first
        # Something to relay in each room: the daemon's own messages (the attacker acknowledges them).
        text = "relay me " + "x" * 4000
        for room in ("r1", "r2", "r3", "r4"):
            for n in range(5):
                lan.lanchat("h2", "send", "--room", room, f"{text} {n}")
        time.sleep(2)
        before, deleted_before = descriptors(lan, daemon)
        client.stdin.write("go\n")
        client.stdin.flush()
        peak, deleted_peak, samples = before, deleted_before, []
        started = time.monotonic()
        while client.poll() is None and time.monotonic() - started < seconds + 30:
            count, deleted = descriptors(lan, daemon)
            samples.append((round(time.monotonic() - started), count, deleted))
            peak, deleted_peak = max(peak, count), max(deleted_peak, deleted)
            time.sleep(5)
        out = json.loads(read_line(client.stdout, 30, "the attacker's observations"))
    finally:
        client.kill()
    after, deleted_after = descriptors(lan, daemon)
    print(f"descriptors: {before} before, at most {peak} during the attack ({deleted_peak} deleted export files), "
          f"{after} after; samples (s, fds, deleted): {samples}")
    print(f"attacker: {out}")
    assert out["pong_after"] and daemon.process.poll() is None, out
    # Answers were made (the attack reaches the code), one per room at a time ...
    assert out["offered"] >= 4, out
    assert out["most_outstanding"] <= 4, out
    # ... and the ones never accepted ended after 60 s, the member told why.
    assert out["end_texts"].get("3 not accepted within 60 s", 0) >= 4, out
    # The daemon's descriptors: at most one export per room outstanding, plus a little noise.
    assert peak <= before + 4 + 4, (before, peak, samples)
    assert deleted_peak <= deleted_before + 4, (deleted_before, deleted_peak, samples)
    assert lan.lanchat_json("h2", "status")["name"] == "bob"


def test_a_member_cannot_fetch_a_file_of_another_room_nor_tell_what_is_held(lan):
    daemon, port = solo(lan)
    # The daemon is in `secret` (with another member, gone since) and shares a file there.
    joined = json.loads(lan.run("h1", [sys.executable, ATTACK, lan.addr("h2"), port, "join", "secret"]).stdout)
    assert joined["joined"], joined
    work = os.path.join(lan.dir, "h2", "files")
    os.makedirs(work)
    path = os.path.join(work, "plans.bin")
    content = os.urandom(50_000)
    with open(path, "wb") as handle:
        handle.write(content)
    shared = lan.lanchat_json("h2", "share", "secret", path)
    digest = hashlib.sha256(content).hexdigest()
    assert shared[0]["sha256"] == digest and shared[0]["held"], shared
    # A member of `lab` only probes for it.
    out = json.loads(lan.run("h1", [sys.executable, ATTACK, lan.addr("h2"), port, "shared-probe", digest], timeout=120).stdout)
    print(f"attacker: {out}")
    assert out["joined"] and out["announced_held"] and out["announced_unknown"] and out["pong_after"], out
    # Never served outside the room it was shared in, even once the member announced it itself.
    assert out["held_self_announced"] != "offered", out
    # One refusal for everything it asked in `lab`: held or not, announced by itself or not.
    refusals = {out[k] for k in ("held_unannounced", "unknown_unannounced", "held_self_announced", "unknown_self_announced")}
    assert refusals == {"bob has no such file to serve in lab"}, out
    assert out["held_other_room"] == "you are not a member of secret here", out
    assert daemon.process.poll() is None
