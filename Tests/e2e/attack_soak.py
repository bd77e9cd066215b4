"""A hostile room member that runs every attack of issue 28 in a loop until a deadline, against several
lanchatd at once (issue 28, "What must be shown": the soak). Built on the other attackers' pieces
(attack_history.py, attack_meta.py, attack_relay.py, attack_members.py) and wire_client.py; wire
version 3.

    python3 attack_soak.py ROOM SECONDS FAKE_PORT HOST:PORT [HOST:PORT ...]

Every HOST:PORT is an honest daemon running `--auto-accept all` (the first: the room's creator). Before
connecting we make what costs openssl time (the daemons close a link that is silent for 8 s): 253
members of our making with valid proofs, our metadata flood (signed), three invented authors' keys.
Then we invite each daemon into ROOM (it is in it already: it accepts, and we are a member there) and
send our own signed membership, and print {"marker": "member", "id", "fakes", ...}. We answer PINGs
until a line on stdin, then attack until SECONDS have passed. Every round (2 s), to every daemon:
  - item 3: SYNC_REQUEST with no runs in every room we share with it; its relay answers never accepted;
  - item 5: FILE_REQUEST for a random digest in ROOM, and in a room we are not in;
  - item 4: a signed MESSAGE dated 11 minutes ahead and one dated 2^62 ms (every 15th round one 5 minutes
    ahead: within the tolerance, it is stored);
  - item 7: we never send an ACK in ROOM (its messages to us stay queued and are resent; in our own rooms
    we do, so that what the daemon writes there goes into its relay answers).
Every 5th round (10 s), to every daemon:
  - item 2: the topic and 255 keys at version 2^62, 300 keys at version 1, deletions of 64 of them at
    version 2 and the 300 at version 1 again (deleted values replayed);
  - items 6 and 8: our 253 made-up members introduced again (ROOM_MEMBERS pages of 32 with proofs, port
    FAKE_PORT, at 127.0.0.1, 224.0.0.1 and the unused 198.18.0.200-254);
  - item 7: a ROOM_MEMBERS of 1,024 membership proofs that fail (made-up members' keys, random
    signatures); 4 pushed one-byte files whose bytes never come (while it holds fewer than 12), a pushed file said to be 1 TiB, a
    256 MiB file announced in ROOM that nobody serves (their FILE_REQUESTs to us are never answered);
  - item 1: an INVITE into ROOM again (already a member), and two signed histories offered at once, not
    asked for, with records signed by invented authors labelled with members' names.
Every 30 s (at most 6 rooms per daemon): an INVITE into a room of our own (soak-N); the daemon joins and
asks us for its history: in every other such room we answer at once with two signed histories whose
records are signed by invented authors labelled with members' names, in the others we hold the request
and offer a history 130 s later (past the door's 120 s). A daemon that closes our link is dialed again.

After SECONDS we print {"marker": "done", per daemon: what it sent us and how it answered}, answer PINGs
until a line on stdin (the creator removes us meanwhile), then invite every daemon into ROOM once more
(a removed member must be refused) and send a message there, and print {"marker": "after", ...}."""
import concurrent.futures
import json
import os
import ssl
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import (  # noqa: E402
    OUTCOMES, TIMESTAMP_MS, author_key, chunk, frame, handshake, history_record, identity, invite, lp, now_ms,
    proven_members, signed_history_record, signed_message,
)
from attack_history import offer_history  # noqa: E402
from attack_meta import LAST_VERSION, meta_entry, room_meta  # noqa: E402
from attack_relay import file_request, sync_request  # noqa: E402
from attack_members import FAR_FUTURE_MS, introduction_pages, make_fakes  # noqa: E402

MAX_VERSION = 3
HELLO, INVITE, INVITE_REPLY, ROOM_MEMBERS, ROOM_LEAVE, HISTORY_REQUEST = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
MESSAGE, ACK, PING, PONG, GOODBYE = 0x10, 0x11, 0x20, 0x21, 0x2F
RESOURCE_OFFER, RESOURCE_ACCEPT, RESOURCE_END, FILE_REQUEST = 0x40, 0x41, 0x43, 0x45
ROUND = 2.0
FAKES = 253
SIDE_ROOMS, SIDE_ROOM_EVERY = 6, 30.0
LATE_HISTORY_AFTER = 130.0


def pooled(function, items):
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(function, items))


class Prepared:
    """What costs openssl time, made before we connect."""

    def __init__(self, room, fake_port):
        work = tempfile.mkdtemp()
        self.room = room
        self.key, self.cert, self.id = identity(work)
        self.compressed = author_key(self.key)
        self.fakes = make_fakes(FAKES, room, lambda n: self.id, work)
        self.introductions = introduction_pages(room, self.fakes, fake_port)
        self.failing_proofs = self._failing_proofs(1024)
        sign_meta = lambda args: meta_entry(self.key, self.compressed, self.id, room, *args)  # noqa: E731
        frozen = [("topic", "the room is mine", LAST_VERSION)] + [(f"k{n:03d}", "x", LAST_VERSION) for n in range(255)]
        share = [(f"m{n:03d}", "y", 1) for n in range(300)]
        deletions = [(f"m{n:03d}", "", 2, True) for n in range(64)]
        self.meta = (room_meta(room, pooled(sign_meta, frozen)) + room_meta(room, pooled(sign_meta, share))
                     + room_meta(room, pooled(sign_meta, deletions)))
        self.meta += room_meta(room, pooled(sign_meta, share))  # the deleted values, replayed
        self.invented = []
        for label in ("wire-client", "alice", "bob"):
            directory = os.path.join(work, "invented-" + label)
            os.makedirs(directory)
            invented_key, _, invented_id = identity(directory)
            self.invented.append((invented_key, invented_id, label))
        self.unasked = self.two_histories(room)

    def _failing_proofs(self, count):
        """ROOM_MEMBERS (flag 0x02) of `count` made-up members, each with its own key (so the key hashes to
        its id and the signature must be checked) and a random signature."""
        payload = lp(self.room.encode()) + struct.pack(">H", count)
        for n in range(count):
            f = self.fakes[n % len(self.fakes)]
            payload += lp(f["id"].encode()) + lp(f["name"].encode()) + struct.pack(">HB", 0, 0)
            payload += b"\x01" + lp(self.id.encode()) + struct.pack(">Q", now_ms()) + f["key"] + os.urandom(64)
        return frame(ROOM_MEMBERS, payload, 0x02)

    def two_histories(self, room):
        """Two signed histories' records for `room`: invented authors labelled with members' names, and one of ours."""
        (k1, a1, l1), (k2, a2, l2), (k3, a3, l3) = self.invented
        first = (signed_history_record(room, a1, l1, 1, f"invented words labelled {l1}", key=k1)
                 + signed_history_record(room, a2, l2, 1, f"invented words labelled {l2}", key=k2)
                 + signed_history_record(room, self.id, "wire-client", 1, "my own old words", key=self.key))
        second = signed_history_record(room, a3, l3, 1, "words of a second history", key=k3)
        return first, second


class Target:
    """One honest daemon: our link to it and what it did."""

    def __init__(self, address, prepared):
        host, port = address.rsplit(":", 1)
        self.host, self.port, self.p = host, int(port), prepared
        self.c = None
        self.seen = {}            # frame type -> count
        self.ends = {}            # "status text" of RESOURCE_ENDs -> count
        self.invites = {}         # invitation id -> room
        self.replies = {}         # "room outcome reason" -> count
        self.pending = {}         # resource id -> records to send once accepted (histories)
        self.relay_offers, self.relay_ends = set(), set()
        self.most_outstanding = 0
        self.history_requests = []     # (room, when)
        self.held = []                 # (room, when to offer late)
        self.history_results = {}      # "answer/status" -> count
        self.side_rooms = []
        self.closings = []
        self.leaves = {}
        self.acks = 0
        self.pushes, self.pushes_open = set(), set()   # our pushed files whose bytes never come; those accepted
        self.acked_side = 0
        self.sequence = 1
        self.version = None
        self.connect()

    def connect(self):
        self.c, self.version = handshake(self.host, self.port, self.p.key, self.p.cert, self.p.id, MAX_VERSION)

    def send(self, data):
        """Sends with a deadline of its own (read_frame leaves short timeouts on the socket)."""
        if self.c is None:
            return False
        try:
            self.c.sock.settimeout(30)
            self.c.sock.sendall(data)
            return True
        except (OSError, ssl.SSLError) as error:
            self.lost(f"send failed: {error!r}")
            return False

    def lost(self, why):
        self.closings.append([round(time.monotonic() - STARTED, 1), why])
        try:
            self.c.sock.close()
        except OSError:
            pass
        self.c = None

    def invite(self, room):
        invitation = os.urandom(16)
        self.invites[invitation] = room
        return self.send(invite(room, invitation_id=invitation))

    def next_sequence(self):
        self.sequence += 1
        return self.sequence

    def pump(self, budget=0.0):
        """Handles what arrived (at most 500 frames), then waits up to `budget` seconds for more."""
        if self.c is None:
            return
        deadline = time.monotonic() + budget
        for _ in range(500):
            got = self.c.read_frame(timeout=max(0.002, deadline - time.monotonic()) if budget else 0.002)
            if got is None:
                if time.monotonic() >= deadline:
                    return
                continue
            if got[0] == "closed":
                self.lost("closed by the daemon")
                return
            self.handle(*got)
            if self.c is None:
                return

    def handle(self, kind, flags, payload):
        self.seen[f"0x{kind:02x}"] = self.seen.get(f"0x{kind:02x}", 0) + 1
        if kind == PING:
            self.send(frame(PONG, payload))
        elif kind == MESSAGE and flags & 0x01:
            # Never acknowledged in ROOM (item 7); in our own rooms acknowledged, so that what the daemon
            # writes there is not queued for us and its relay answers carry it (item 3).
            if payload[17:17 + payload[16]].decode("utf-8", "replace") in self.side_rooms:
                self.acked_side += 1
                self.send(frame(ACK, struct.pack(">H", 1) + payload[:16]))
        elif kind == ACK:
            self.acks += struct.unpack(">H", payload[:2])[0]
        elif kind == INVITE_REPLY:
            room = self.invites.pop(payload[:16], "?")
            reason = payload[19:19 + struct.unpack(">H", payload[17:19])[0]].decode("utf-8", "replace") if len(payload) >= 19 else ""
            key = f"{room} {OUTCOMES.get(payload[16], payload[16])} {reason}".strip()
            self.replies[key] = self.replies.get(key, 0) + 1
        elif kind == ROOM_LEAVE:
            room = payload[1:1 + payload[0]].decode("utf-8", "replace")
            at = 1 + payload[0]
            text = payload[at + 2:at + 2 + struct.unpack(">H", payload[at:at + 2])[0]].decode("utf-8", "replace")
            key = f"{room}: {text}"
            self.leaves[key] = self.leaves.get(key, 0) + 1
        elif kind == HISTORY_REQUEST:
            room = payload[1:1 + payload[0]].decode("utf-8", "replace")
            self.history_requests.append(room)
            if len(self.history_requests) % 2 == 1:
                self.offer_two_histories(room)
            else:
                self.held.append((room, time.monotonic() + LATE_HISTORY_AFTER))
        elif kind == RESOURCE_OFFER:
            room_length = payload[16]
            if payload[17 + room_length] == 2:   # a signed history: a relay answer, never accepted
                self.relay_offers.add(payload[:16])
                self.most_outstanding = max(self.most_outstanding, len(self.relay_offers - self.relay_ends))
        elif kind == RESOURCE_ACCEPT:
            if payload[:16] in self.pushes:
                self.pushes_open.add(payload[:16])
            records = self.pending.pop(payload[:16], None)
            if records is not None:
                self.history_results["accepted"] = self.history_results.get("accepted", 0) + 1
                self.send(chunk(payload[:16], 0, records))
        elif kind == RESOURCE_END:
            rid, status = payload[:16], payload[16]
            text = payload[19:19 + struct.unpack(">H", payload[17:19])[0]].decode("utf-8", "replace")
            key = f"{status} {text[:80]}"
            self.ends[key] = self.ends.get(key, 0) + 1
            self.pushes_open.discard(rid)
            if rid in self.relay_offers:
                self.relay_ends.add(rid)
            if self.pending.pop(rid, None) is not None:
                verdict = f"refused: {text[:60]}"
                self.history_results[verdict] = self.history_results.get(verdict, 0) + 1
        elif kind == GOODBYE:
            text = payload[3:3 + struct.unpack(">H", payload[1:3])[0]].decode("utf-8", "replace")
            self.closings.append([round(time.monotonic() - STARTED, 1), f"GOODBYE {payload[0]} {text}"])
        # MESSAGE: never acknowledged (item 7). FILE_REQUEST (for our announcements): never answered.

    def offer_histories(self, room, histories, kind=2):
        data = b""
        for records in histories:
            rid = os.urandom(16)
            self.pending[rid] = records
            data += offer_history(rid, room, records, kind=kind)
        self.send(data)

    def offer_two_histories(self, room):
        self.offer_histories(room, self.p.two_histories(room))

    def late_histories(self):
        now = time.monotonic()
        due = [room for room, when in self.held if when <= now]
        self.held = [(room, when) for room, when in self.held if when > now]
        for room in due:
            records = history_record(self.p.id, "wire-client", 1, "held-back words")
            self.offer_histories(room, [records], kind=1)

    # MARK: the attacks of one round

    def every_round(self, round_number):
        room, p = self.p.room, self.p
        for shared in [room] + self.side_rooms:
            self.send(sync_request(shared))
        self.send(file_request(os.urandom(16), room, os.urandom(32)) + file_request(os.urandom(16), "secret", os.urandom(32)))
        ahead = signed_message(p.key, p.id, room, "dated eleven minutes ahead", sequence=self.next_sequence(), timestamp_ms=now_ms() + 11 * 60_000)
        far = signed_message(p.key, p.id, room, "from the year 146 million", sequence=self.next_sequence(), timestamp_ms=FAR_FUTURE_MS + round_number)
        self.send(ahead + far)
        if round_number % 15 == 7:
            self.send(signed_message(p.key, p.id, room, "dated five minutes ahead", sequence=self.next_sequence(), timestamp_ms=now_ms() + 5 * 60_000))
        self.late_histories()

    def every_fifth_round(self, round_number):
        room, p = self.p.room, self.p
        self.send(p.meta)
        self.send(b"".join(p.introductions))
        self.send(p.failing_proofs)
        # 4 more pushed files whose bytes never come, while fewer than 12 are held (16 from one peer would
        # leave no transfer for our histories), and one said to be 1 TiB.
        pushes = [os.urandom(16) for _ in range(4 if len(self.pushes_open) < 12 else 0)]
        self.pushes.update(pushes)
        self.send(b"".join(pushed_offer(rid, room, b"never.bin", 1) for rid in pushes)
                  + pushed_offer(os.urandom(16), room, b"huge.bin", 1 << 40))
        digest = os.urandom(32).hex()
        body = "\n".join(["lanchat-file/1", f"sha256: {digest}", f"size: {256 << 20}", "type: application/octet-stream",
                          f"name: nobody-serves-{round_number}.bin"])
        self.send(signed_message(p.key, p.id, room, body, kind=1, sequence=self.next_sequence()))
        self.invite(room)
        self.offer_histories(room, p.unasked)

    def new_side_room(self, number):
        name = f"soak-{number}"
        self.side_rooms.append(name)
        self.invite(name)


def pushed_offer(rid, room, name, size):
    """A pushed file (RESOURCE_OFFER kind 0) said to be `size` bytes, with a made-up digest."""
    return frame(RESOURCE_OFFER, rid + lp(room.encode()) + bytes([0]) + lp(name, 2) + struct.pack(">Q", size) + os.urandom(32)
                 + struct.pack(">Q", TIMESTAMP_MS))


def pump_all(targets, seconds):
    deadline = time.monotonic() + seconds
    while True:
        for t in targets:
            t.pump()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.02, left))


def reconnect(targets, room):
    for t in targets:
        if t.c is None and time.monotonic() - t.closings[-1][0] - STARTED > 1:
            try:
                t.connect()
                t.invite(room)
            except (OSError, ssl.SSLError) as error:
                t.closings.append([round(time.monotonic() - STARTED, 1), f"redial failed: {error!r}"])


def wait_stdin(targets):
    line = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), line.set()), daemon=True).start()
    while not line.is_set():
        pump_all(targets, 0.2)


def report(t):
    return {"address": f"{t.host}:{t.port}", "version": t.version, "frames_from_it": t.seen, "acks": t.acks,
            "invite_replies": t.replies, "leaves": t.leaves, "history_requests": t.history_requests,
            "history_offers": t.history_results, "relay_answers": len(t.relay_offers), "relay_ended": len(t.relay_ends),
            "relay_most_outstanding": t.most_outstanding, "pushes": len(t.pushes), "pushes_held_at_end": len(t.pushes_open),
            "acked_in_own_rooms": t.acked_side, "ends": t.ends, "closings": t.closings, "side_rooms": t.side_rooms}


STARTED = time.monotonic()


def main():
    global STARTED
    room, seconds, fake_port, addresses = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    made = time.monotonic()
    p = Prepared(room, fake_port)
    made = round(time.monotonic() - made, 1)
    STARTED = time.monotonic()
    targets = [Target(address, p) for address in addresses]
    for t in targets:
        t.invite(room)
    own_proof = proven_members(room, [(p.id, "wire-client", [], ("", now_ms(), p.key))])
    pump_all(targets, 3)
    for t in targets:
        t.send(own_proof)
    pump_all(targets, 1)
    print(json.dumps({"marker": "member", "id": p.id, "made_seconds": made, "versions": [t.version for t in targets],
                      "joined": [t.replies for t in targets], "fakes": [f["id"] for f in p.fakes]}), flush=True)
    wait_stdin(targets)

    STARTED = time.monotonic()
    deadline = STARTED + seconds
    round_number, next_round, next_side = 0, STARTED, STARTED
    while time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_side and len(targets[0].side_rooms) < SIDE_ROOMS:
            for t in targets:
                t.new_side_room(len(t.side_rooms) + 1)
            next_side += SIDE_ROOM_EVERY
        if now >= next_round:
            reconnect(targets, room)
            for t in targets:
                t.every_round(round_number)
                if round_number % 5 == 0:
                    t.every_fifth_round(round_number)
                t.pump()
            round_number += 1
            next_round += ROUND
        pump_all(targets, max(0.0, min(next_round, deadline) - time.monotonic()))
    print(json.dumps({"marker": "done", "rounds": round_number, "seconds": round(time.monotonic() - STARTED, 1),
                      "targets": [report(t) for t in targets]}), flush=True)

    wait_stdin(targets)   # the creator removes us now
    for t in targets:
        t.replies.clear()
        t.leaves.clear()
        if t.c is None:
            reconnect(targets, room)
        t.invite(room)
        message_id = os.urandom(16)
        t.send(signed_message(p.key, p.id, room, "words of a removed member", message_id=message_id, sequence=t.next_sequence()))
    pump_all(targets, 8)
    print(json.dumps({"marker": "after", "targets": [{"address": f"{t.host}:{t.port}", "invite_replies": t.replies,
                                                      "leaves": t.leaves, "closings": t.closings[-3:]} for t in targets]}), flush=True)


if __name__ == "__main__":
    main()
