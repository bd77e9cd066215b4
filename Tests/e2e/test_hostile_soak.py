"""Issue 28, "What must be shown": a member running every attack of the issue for a while (LANCHAT_SOAK_SECONDS,
60 by default so that CI stays fast; 600 for the 10-minute run) against a room of honest members.

The LAN: alice (h1) makes `lab` by inviting bob (h2) and carol (h3); all three run `--auto-accept all`. The
attacker (Tests/e2e/attack_soak.py on h4, wire version 3) invites each of them into `lab` and so is a
member at each, then runs its attacks in a loop against all three at once (see its docstring: relay
floods, shared-file probes, messages from the future, the metadata freeze, 253 made-up members at unused
addresses, failing proofs, files that never come, histories by invented authors, held and unasked
histories, never acknowledging). Meanwhile, every 5 s:
  - one honest member (in turn) sends a message to `lab`; every other honest member must get it within
    5 s (the time from before `lanchat send` to the event in its `lanchat watch --json`);
  - each honest daemon's descriptors (/proc/PID/fd, counted inside its host) and RSS (VmRSS) are sampled.
Midway, alice invites dave (h5, started then) with `lanchat invite dave --room lab --wait`: accepted, and
dave gets the next messages (within 5 s too). At the end alice removes the attacker (`lanchat remove`),
and it, with every member of its making that never connected, is gone from every honest member's
`members lab`; its INVITEs into `lab` afterwards are refused; a last message still goes round.

What the honest daemons kept is checked at the end: in `lab` and in the attacker's own rooms, nothing dated
beyond the 10 minutes' tolerance, no held-back history (offered past the door), nothing of a second
history, and every record by an author the attacker invented shown as "<short id> (not a member)".
(Histories the attacker offers in `lab` unasked are refused, "history was not asked for", except one
per resync that the daemon takes as the answer to its own SYNC_REQUEST to the attacker: a relay answer,
of which only current members' records are kept.)

Bounds, for every honest daemon (printed with what was measured):
- descriptors at most their count before the attack + 40: the sum of what the daemon lets one member
  hold that this attacker reaches: 16 incoming transfers from one peer (it holds 12 pushed files whose
  bytes never come, each ending after 120 s, and its histories), one relay answer waiting per room shared
  (`lab` and its 6 rooms: 7, each ending unaccepted after 60 s), and 16 dials under way to the 64 members
  of its making each daemon takes (maximumDialsAtOnce): 16 + 7 + 16 = 39. Measured: 31 before, at most 55
  in the 60 s run and 59 in the 600 s run (back to 43 after), on every daemon.
- RSS at most 100 MB: a debug build starts at about 44 MB and was at most 49 MB (60 s) and 50 MB (600 s),
  flat after the first minute; 100 MB is about twice the start, for other machines and allocators, and
  still far below what a leak of a frame, an export or a member per round would reach in 10 minutes.
- every honest message at every other honest member within 5 s (the issue's figure); measured: at most
  0.08 s (600 s run)."""
import json
import os
import subprocess
import sys
import time

from testlan import BIN, ROOT, read_line, wait_for

ATTACKER = os.path.join(ROOT, "Tests", "e2e", "attack_soak.py")
ROOM = "lab"
FAKE_PORT = 7411
SECONDS = float(os.environ.get("LANCHAT_SOAK_SECONDS", "60"))
EVERY = 5.0          # a message and a sample every 5 s
DELIVERY = 5.0       # each message at every other honest member within 5 s
# Bounds, for every honest daemon (why: see the module's docstring):
FD_MARGIN = 40       # descriptors at most their count before the attack + 40
RSS_MB = 100         # VmRSS at most 100 MB
HONEST = [("h1", "alice"), ("h2", "bob"), ("h3", "carol")]


class Honest:
    def __init__(self, lan, host, name):
        self.lan, self.host, self.name = lan, host, name
        self.daemon = lan.start_daemon(host, name=name, extra=["--auto-accept", "all"])
        self.pid = self.daemon.pid()
        self.id = self.daemon.status()["id"]
        self.watch = None
        self.fds, self.rss, self.latencies, self.sent = [], [], [], 0
        self.fd_start = None

    def start_watch(self):
        self.watch = self.lan.popen(self.host, [os.path.join(BIN, "lanchat"), "watch", "--json"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
        try:   # (starts the thread that reads it, which timestamps each line as it comes)
            read_line(self.watch.stdout, 0.5, f"{self.name}'s watch to start")
        except AssertionError:
            pass

    def sample(self):
        out = self.lan.run(self.host, ["sh", "-c", f"ls /proc/{self.pid}/fd | wc -l; grep VmRSS /proc/{self.pid}/status"]).stdout.split()
        fds, rss_kb = int(out[0]), int(out[2])
        self.fds.append(fds)
        self.rss.append(rss_kb / 1024)
        return fds, rss_kb

    def members(self):
        return {m["id"] for m in self.lan.lanchat_json(self.host, "members", ROOM)["members"]}

    def connected_members(self):
        return {m["id"] for m in self.lan.lanchat_json(self.host, "members", ROOM)["members"] if m.get("state") == "connected"}


def write_in_side_rooms(h, number):
    """Something for the attacker's SYNC_REQUESTs to take in its rooms (soak-N) too: a 4 KB message of h's own."""
    rooms = h.lan.lanchat_json(h.host, "rooms")
    rooms = rooms.get("rooms", rooms) if isinstance(rooms, dict) else rooms
    for name in [r["room"] if isinstance(r, dict) else r for r in rooms]:
        if name.startswith("soak-"):
            h.lan.lanchat(h.host, "send", "--room", name, f"{h.name} in {name}, {number}: " + "x" * 4000)


def field(line, name):
    """A logfmt field's value (quoted or not), at most 90 characters."""
    rest = line.split(f" {name}=", 1)[-1]
    value = rest[1:].split('"', 1)[0] if rest.startswith('"') else rest.split(" ", 1)[0]
    return value[:90]


def log_summary(h):
    """How many warnings and errors the daemon logged, and its most frequent ones."""
    counts, texts = {"warning": 0, "error": 0}, {}
    for line in h.daemon.log().splitlines():
        for level in counts:
            if f"level={level}" in line:
                counts[level] += 1
                text = level + ": " + field(line, "msg") + (": " + field(line, "text") if " text=" in line else "")
                texts[text] = texts.get(text, 0) + 1
    return counts, sorted(texts.items(), key=lambda e: -e[1])[:4]


NEVER_KEPT = ("dated eleven minutes ahead", "from the year 146 million", "held-back words", "words of a second history")


def kept_what_it_should(h, check):
    """What the attacker sent that h must not have kept, and how it shows the authors the attacker invented."""
    rooms = h.lan.lanchat_json(h.host, "rooms")
    rooms = [r["room"] if isinstance(r, dict) else r for r in (rooms.get("rooms", rooms) if isinstance(rooms, dict) else rooms)]
    invented, own = 0, 0
    for room in [ROOM] + sorted(r for r in rooms if r.startswith("soak-")):
        for m in h.lan.lanchat_json(h.host, "history", "--room", room, "--limit", "100000"):
            check(not m["text"].startswith(NEVER_KEPT), f"{h.name} kept in {room}: {m['sender']!r} {m['text'][:60]!r}")
            if m["text"].startswith("invented words labelled"):
                invented += 1
                check(m["sender"] == f"{m['sender_id'][:12]} (not a member)",
                      f"{h.name} shows a record by an invented author in {room} as {m['sender']!r}: {m['text']!r}")
            own += m["text"] == "my own old words"
    print(f"{h.name}: in lab and {len([r for r in rooms if r.startswith('soak-')])} rooms of the attacker's: {invented} records by "
          f"invented authors (each shown as '<short id> (not a member)'), {own} of the attacker's own old words")


def arrival(receiver, text, started, timeout):
    """Seconds from `started` to `text` arriving in `receiver`'s watch, or None after `timeout`."""
    needle = json.dumps(text)
    try:
        stamp, _ = read_line(receiver.watch.stdout, max(0.0, started + timeout - time.monotonic()), f"{text!r} at {receiver.name}",
                             match=lambda l: needle in l and '"message"' in l, with_time=True)
    except AssertionError:
        return None
    return stamp - started


def test_a_member_running_every_attack_leaves_the_room_usable_and_the_daemons_bounded(lan):
    lan.up(5)
    honest = [Honest(lan, host, name) for host, name in HONEST]
    alice, bob, carol = honest
    for other in ("bob", "carol"):
        wait_for(lambda: any(p["name"] == other and p["addresses"] for p in lan.peers("h1")), timeout=30, what=f"alice to see {other}")
        assert lan.lanchat_json("h1", "invite", other, "--room", ROOM, "--wait")["outcome"] == "accepted"
    wait_for(lambda: {alice.id, carol.id} <= bob.connected_members() and {alice.id, bob.id} <= carol.connected_members(),
             timeout=30, what="bob and carol connected to each other in lab")
    for h in honest:
        h.start_watch()
    ports = [f"{lan.addr(h.host)}:{h.daemon.status()['port']}" for h in honest]
    attacker = lan.popen("h4", [sys.executable, ATTACKER, ROOM, str(SECONDS), str(FAKE_PORT), *ports],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    problems = []

    def check(ok, what):
        if not ok:
            problems.append(what)
            print(f"PROBLEM: {what}")

    def tell_attacker(line):
        attacker.stdin.write(line + "\n")
        attacker.stdin.flush()

    try:
        member = json.loads(read_line(attacker.stdout, 180, "the attacker in lab", match=lambda l: '"member"' in l))
        attacker_id, fakes = member["id"], set(member["fakes"])
        print(f"\nattacker {attacker_id[:12]}: made its keys in {member['made_seconds']} s; wire versions {member['versions']}; "
              f"joined: {member['joined']}")
        assert member["versions"] == [3, 3, 3], member
        wait_for(lambda: all(attacker_id in h.members() for h in honest), timeout=30, what="every honest member to count the attacker a member")
        time.sleep(2)
        for h in honest:
            h.fd_start = h.sample()[0]
        print("before the attack: " + ", ".join(f"{h.name} {h.fds[-1]} fds {h.rss[-1]:.1f} MB" for h in honest))
        tell_attacker("go")
        started = time.monotonic()
        dave = None
        joined_at = None
        number = 0
        receivers_of = {}
        while time.monotonic() - started < SECONDS:
            tick = time.monotonic()
            members = honest + ([dave] if dave else [])
            sender = members[number % len(members)]
            text = f"soak {number} from {sender.name} at {tick - started:.0f} s"
            sent_at = time.monotonic()
            lan.lanchat(sender.host, "send", "--room", ROOM, text)
            sender.sent += 1
            receivers = [h for h in members if h is not sender]
            receivers_of[number] = [h.name for h in receivers]
            for h in receivers:
                latency = arrival(h, text, sent_at, 15)
                h.latencies.append(latency if latency is not None else float("inf"))
                check(latency is not None and latency <= DELIVERY,
                      f"{text!r} reached {h.name} after {'more than 15' if latency is None else f'{latency:.2f}'} s")
            for h in members:
                h.sample()
            if number % 6 == 1:
                for h in honest:
                    write_in_side_rooms(h, number)
            number += 1
            # Midway: a new honest member is invited and joins.
            if dave is None and time.monotonic() - started >= SECONDS / 2:
                dave = Honest(lan, "h5", "dave")
                wait_for(lambda: any(p["name"] == "dave" and p["addresses"] for p in lan.peers("h1")), timeout=30, what="alice to see dave")
                invited = lan.lanchat("h1", "invite", "dave", "--room", ROOM, "--wait", "--json", check=False, timeout=90)
                said = (invited.stdout + invited.stderr).strip()
                print(f"midway ({time.monotonic() - started:.0f} s): lanchat invite dave --room {ROOM} --wait: exit {invited.returncode}: {said[:300]}")
                outcome = json.loads(invited.stdout).get("outcome") if invited.returncode == 0 else None
                check(outcome == "accepted", f"dave's invitation: {said[:300]}")
                wait_for(lambda: {alice.id, bob.id, carol.id} <= dave.connected_members(), timeout=30,
                         what="dave connected to alice, bob and carol in lab")
                dave.start_watch()
                dave.fd_start = dave.sample()[0]
                joined_at = time.monotonic() - started
            time.sleep(max(0.0, tick + EVERY - time.monotonic()))
        check(dave is not None and len(dave.latencies) > 0, "dave never received a message")

        done = json.loads(read_line(attacker.stdout, 60, "the attacker's report", match=lambda l: '"done"' in l))
        print(f"attacker ran {done['seconds']} s, {done['rounds']} rounds")
        for name, t in zip(("alice", "bob", "carol"), done["targets"]):
            print(f"  vs {name}: {json.dumps(t)}")

        # The creator removes the attacker: it and the members of its making that never connected go everywhere.
        everyone = honest + [dave]
        fakes_before = {h.name: len(h.members() & fakes) for h in everyone}
        removed = lan.lanchat("h1", "remove", attacker_id, "--room", ROOM, "--reason", "soak", check=False)
        print(f"lanchat remove {attacker_id[:12]} --room {ROOM} --reason soak: exit {removed.returncode}: "
              f"{(removed.stdout + removed.stderr).strip()[:200]}")
        check(removed.returncode == 0, f"remove failed: {(removed.stdout + removed.stderr).strip()[:300]}")
        try:
            wait_for(lambda: all(attacker_id not in h.members() and not (h.members() & fakes) for h in everyone), timeout=30,
                     what="the attacker and its members gone from every honest member")
        except AssertionError as error:
            check(False, str(error))
        fakes_after = {h.name: len(h.members() & fakes) for h in everyone}
        print(f"members of the attacker's making in lab: before the removal {fakes_before}, after {fakes_after}; "
              f"the attacker still a member at: {[h.name for h in everyone if attacker_id in h.members()]}")
        tell_attacker("removed")
        after = json.loads(read_line(attacker.stdout, 60, "the attacker after its removal", match=lambda l: '"after"' in l))
        print(f"the removed attacker's INVITEs into lab: {[t['invite_replies'] for t in after['targets']]}")
        for name, t in zip(("alice", "bob", "carol"), after["targets"]):
            replies = t["invite_replies"]
            check(replies and all(" refused " in k or k.endswith(" refused") for k in replies),
                  f"{name} answered the removed attacker's INVITE into lab: {replies}")
        check(all(attacker_id not in h.members() for h in everyone), "the attacker is a member again after its INVITEs")
        # The room still works after all that.
        last = "the last word, after the removal"
        sent_at = time.monotonic()
        lan.lanchat("h2", "send", "--room", ROOM, last)
        for h in everyone:
            if h is not bob:
                latency = arrival(h, last, sent_at, 15)
                check(latency is not None and latency <= DELIVERY, f"the last message reached {h.name} after {latency} s")
        for h in everyone:
            h.sample()
            check(h.daemon.process.poll() is None, f"{h.name}'s daemon exited")
        for h in honest:
            kept_what_it_should(h, check)
    finally:
        if attacker.poll() is None:
            attacker.kill()

    # The summary, and the bounds.
    print(f"\nsoak of {SECONDS:.0f} s (LANCHAT_SOAK_SECONDS), dave invited at {joined_at and round(joined_at)} s; bounds: descriptors "
          f"<= start + {FD_MARGIN}, RSS <= {RSS_MB} MB, every message within {DELIVERY:.0f} s")
    print(f"{'daemon':8} {'fds start':>9} {'fds min':>7} {'fds max':>7} {'fds end':>7} {'RSS start':>9} {'RSS max':>7} {'RSS end':>7} "
          f"{'msgs in':>7} {'sent':>4} {'latency max':>11} {'mean':>6}")
    for h in everyone:
        got = [x for x in h.latencies if x != float("inf")]
        print(f"{h.name:8} {h.fd_start:>9} {min(h.fds):>7} {max(h.fds):>7} {h.fds[-1]:>7} {h.rss[0]:>8.1f}M {max(h.rss):>6.1f}M "
              f"{h.rss[-1]:>6.1f}M {len(h.latencies):>7} {h.sent:>4} {max(h.latencies, default=0):>10.2f}s "
              f"{(sum(got) / len(got) if got else 0):>5.2f}s")
        check(max(h.fds) <= h.fd_start + FD_MARGIN, f"{h.name}'s descriptors reached {max(h.fds)} (started at {h.fd_start}; bound +{FD_MARGIN})")
        check(max(h.rss) <= RSS_MB, f"{h.name}'s RSS reached {max(h.rss):.1f} MB (bound {RSS_MB} MB)")
    for h in everyone:
        step = max(1, len(h.fds) // 12)
        counts, frequent = log_summary(h)
        print(f"{h.name}: every {step * EVERY:.0f} s: fds {h.fds[::step]}, RSS MB {[round(x) for x in h.rss[::step]]}; "
              f"log: {counts['warning']} warnings, {counts['error']} errors, most frequent {frequent}")
    for h in everyone:
        if h.watch and h.watch.poll() is None:
            h.watch.kill()
    assert problems == [], "\n".join(problems)
