"""A room member whose seals do not verify (wire version 4), speaking the wire protocol (docs/wire-protocol.md,
"Seals (version 4)") through Tests/e2e/wire_client.py's pieces (their Merkle tree and layouts are
scripts/wire-vectors.py's). Each scenario but `below-version-4` negotiates version 4 and first invites the
daemon (which runs --auto-accept all) into ROOM, so that we are a member there.

    python3 attack_seals.py HOST PORT forged-seal ROOM
    python3 attack_seals.py HOST PORT unsealed-leaves ROOM OTHER_ROOM
    python3 attack_seals.py HOST PORT reused-seal ROOM
    python3 attack_seals.py HOST PORT sealed-history ROOM
    python3 attack_seals.py HOST PORT below-version-4 ROOM

prints JSON lines of observations (the test reads the daemon's history and events for the rest). Message
ids are printed in hex; "acked" lists every id an ACK named on the connection, whenever it came.

forged-seal: three SEALs that do not verify, each followed by sealed MESSAGEs naming it: (A) signed by
carol (a second key of ours), her key in the frame; (B) our key, signed over other leaf hashes than the
frame's; (C) our key, signed for another room. We print a first line, then wait for a line on stdin (the
test reads the daemon meanwhile), then send a genuine SEAL over the first forged message again and two new
ones, those three sealed, and print a last line.

unsealed-leaves: OTHER_ROOM too. A genuine SEAL of six leaves, then sealed MESSAGEs: three siblings that
match their leaves, one with another body than its leaf's, one sent in OTHER_ROOM (its leaf is ROOM's), one
naming another leaf than its own, and one naming leaf 6 of 6 (past the count).

reused-seal: a genuine SEAL (id X) of two leaves and its leaf 0; then a second genuine SEAL under id X over
two other messages, and those two messages naming X; then the first seal's leaf 1.

sealed-history: the daemon asks us (its inviter) for ROOM's history; we offer a sealed history (kind 4):
(a) our message under our genuine seal; (b) carol's under her genuine seal of two leaves; (c) a record under
carol's id whose seal head (carol's id) carries our key and our signature; (d) the second leaf of carol's
seal, its body changed after she sealed it (its audit path fails). Then a genuine sealed live message.

below-version-4: three connections at version 3, on each one frame a version 3 connection must not carry:
a (genuine) SEAL, a sealed MESSAGE, a RESOURCE_OFFER of kind 4; each GOODBYE is recorded. Then a version 4
connection and a PING."""
import json
import os
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import (  # noqa: E402
    SealMaker, chunk, frame, handshake, identity, invite, leaf_hash, now_ms, offer, sealable,
)

MAX_VERSION = 4
INVITE_REPLY, HISTORY_REQUEST, MESSAGE, ACK = 0x03, 0x06, 0x10, 0x11
PING, PONG, GOODBYE = 0x20, 0x21, 0x2F
RESOURCE_ACCEPT, RESOURCE_END = 0x41, 0x43
SEALED_HISTORY = 4


class Peer:
    """A connection read by one loop that answers PINGs like a live peer and remembers every ACKed id and
    the GOODBYE, whichever wait read them."""

    def __init__(self, c):
        self.c = c
        self.acked = set()
        self.goodbye = None
        self.closed = False

    def read(self, timeout):
        got = self.c.read_frame(timeout)
        if got is None:
            return None
        if got[0] == "closed":
            self.closed = True
            return got
        kind, _, payload = got
        if kind == PING:
            self.c.send(frame(PONG, payload))
        elif kind == ACK:
            count = struct.unpack(">H", payload[:2])[0]
            self.acked |= {payload[2 + 16 * n:18 + 16 * n] for n in range(count)}
        elif kind == GOODBYE:
            length = struct.unpack(">H", payload[1:3])[0]
            self.goodbye = {"reason": payload[0], "text": payload[3:3 + length].decode("utf-8", "replace")}
        return got

    def until(self, done, timeout):
        """Reads until done(frame) (done(None) is asked first), the connection closes, or `timeout` seconds:
        the frame that ended it, or None."""
        if done(None):
            return None
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            got = self.read(min(1.0, max(0.05, deadline - time.monotonic())))
            if got is not None and got[0] != "closed" and done(got):
                return got
        return None

    def of_type(self, kinds, timeout=10):
        return self.until(lambda got: got is not None and got[0] in kinds, timeout)

    def acks(self, ids, timeout):
        """The ids among `ids` acknowledged within `timeout` seconds (from the start of the connection)."""
        wanted = set(ids)
        self.until(lambda _: wanted <= self.acked, timeout)
        return wanted & self.acked

    def pump(self, seconds):
        self.until(lambda _: False, seconds)

    def pinged(self, nonce, timeout=10):
        """A PING answered: the daemon read everything sent before it (frames are handled in order)."""
        self.c.send(frame(PING, struct.pack(">Q", nonce)))
        return self.until(lambda got: got is not None and got[0] == PONG and got[2] == struct.pack(">Q", nonce), timeout) is not None

    def join(self, room, timeout=10):
        """Invites the daemon into `room`: True when it answered accepted."""
        self.c.send(invite(room))
        got = self.of_type((INVITE_REPLY,), timeout)
        return got is not None and got[2][16] == 0


def hexes(ids):
    return sorted(i.hex() for i in ids)


def connect(host, port, key, cert, peer_id, out, max_version=MAX_VERSION):
    c, out["version"] = handshake(host, port, key, cert, peer_id, max_version)
    return Peer(c)


def acked_of(p, messages):
    """Which of `messages` (Sealables) were ever acknowledged on the connection, by body."""
    return sorted(m.body for m in messages if m.message_id in p.acked)


# MARK: forged-seal

def forged_seal(p, key, peer_id, out, room):
    carol_key, _, carol_id = identity(tempfile.mkdtemp())
    out["carol_id"] = carol_id
    out["joined"] = p.join(room)
    f = [sealable(room, f"forged seal message {n}", n) for n in range(1, 6)]
    never_sent = sealable(room, "words never sent", 99)
    # (A) carol signs our seal, her key in the frame (it is not the connection's peer's).
    a = SealMaker(key, peer_id, room, f[0:2], signer=carol_key)
    # (B) our key, over other leaf hashes than the frame carries.
    b = SealMaker(key, peer_id, room, f[2:4], signed_hashes=[leaf_hash(peer_id, f[2]), leaf_hash(peer_id, never_sent)])
    # (C) our key, signed for another room.
    c = SealMaker(key, peer_id, room, f[4:5], signed_room="elsewhere")
    p.c.send(a.frame() + a.message(0) + a.message(1) + b.frame() + b.message(0) + b.message(1) + c.frame() + c.message(0))
    out["pong_after_forged"] = p.pinged(1)
    p.pump(2)  # an ACK for them would have come by now (the genuine ones below come in well under a second)
    out["forged"] = [m.body for m in f]
    out["forged_acked"] = acked_of(p, f)
    out["marker"] = "forged sent"
    print(json.dumps(out), flush=True)
    # The test reads the daemon now, then tells us to go on (a line on stdin).
    sys.stdin.readline()
    g_new = [sealable(room, "genuine sealed message 1", 6), sealable(room, "genuine sealed message 2", 7)]
    g = SealMaker(key, peer_id, room, [f[0]] + g_new)
    p.c.send(g.frame() + g.message(0) + g.message(1) + g.message(2))
    out["genuine_acked"] = sorted(m.body for m in g.messages if m.message_id in p.acks([m.message_id for m in g.messages], 10))
    out["pong_after"] = p.pinged(2)
    p.pump(1)
    out["forged_acked_at_last"] = acked_of(p, f)
    out["marker"] = "genuine sent"


# MARK: unsealed-leaves

def unsealed_leaves(p, key, peer_id, out, room, other_room):
    out["joined"] = p.join(room)
    out["joined_other"] = p.join(other_room)
    leaves = [sealable(room, text, n) for n, text in enumerate(
        ["sibling one", "the body as sealed", "sealed for the first room", "sealed at leaf 3", "sibling two", "sibling three"], 1)]
    past = sealable(room, "past the last leaf", 7)
    s = SealMaker(key, peer_id, room, leaves)
    # A stray message naming leaf 6 of 6: built as a message of a seal holding it, sent naming our seal's id.
    stray = SealMaker(key, peer_id, room, leaves + [past], seal_id=s.id)
    p.c.send(s.frame()
             + s.message(0)                            # sibling one: its leaf
             + s.message(1, body="the body as sent")   # another body than its leaf's
             + s.message(2, room=other_room)           # its leaf is the first room's
             + s.message(3, leaf_index=4)              # names another leaf than its own
             + s.message(4)                            # sibling two
             + stray.message(6)                        # leaf 6 of 6: past the count
             + s.message(5))                           # sibling three
    sent = leaves + [past]
    got = p.acks([m.message_id for m in sent], 10)
    out["acked"] = sorted(m.body for m in sent if m.message_id in got)
    out["sent"] = [m.body for m in sent]
    out["pong_after"] = p.pinged(3)


# MARK: reused-seal

def reused_seal(p, key, peer_id, out, room):
    out["joined"] = p.join(room)
    first = SealMaker(key, peer_id, room, [sealable(room, "first seal, leaf 0", 1), sealable(room, "first seal, leaf 1", 2)])
    second = SealMaker(key, peer_id, room, [sealable(room, "second seal, leaf 0", 3), sealable(room, "second seal, leaf 1", 4)],
                       seal_id=first.id)
    p.c.send(first.frame() + first.message(0))
    out["first_leaf_0_acked"] = bool(p.acks([first.messages[0].message_id], 10))
    # A second genuine seal (its signature verifies) under the first one's id, then its messages.
    p.c.send(second.frame() + second.message(0) + second.message(1) + first.message(1))
    ids = [m.message_id for m in second.messages] + [first.messages[1].message_id]
    p.acks(ids, 10)
    out["acked"] = acked_of(p, first.messages + second.messages)
    out["pong_after"] = p.pinged(4)


# MARK: sealed-history

def sealed_history(p, key, peer_id, out, room):
    carol_key, _, carol_id = identity(tempfile.mkdtemp())
    out["carol_id"] = carol_id
    out["joined"] = p.join(room)
    out["history_requested"] = p.of_type((HISTORY_REQUEST,), 10) is not None
    then = now_ms() - 3_600_000
    ours = SealMaker(key, peer_id, room, [sealable(room, "my sealed words", 1, then)])
    carols = SealMaker(carol_key, carol_id, room, [sealable(room, "carol's sealed words", 1, then + 1000),
                                                   sealable(room, "carol sealed something", 2, then + 2000)])
    # Under carol's id, our key in the head and our signature: words put in her mouth.
    mouth = SealMaker(key, carol_id, room, [sealable(room, "words put in carol's mouth", 3, then + 3000)])
    records = (ours.head_entry() + ours.record_entry(0, "wire-client")
               + carols.head_entry() + carols.record_entry(0, "carol")
               + mouth.head_entry() + mouth.record_entry(0, "carol")
               # carol's seal is kept (named above): her second leaf, with another body than she sealed.
               + carols.record_entry(1, "carol", body="carol sealed something else"))
    rid = os.urandom(16)
    p.c.send(offer(rid, b"history", records, room=room.encode(), kind=SEALED_HISTORY))
    got = p.until(lambda got: got is not None and got[0] in (RESOURCE_ACCEPT, RESOURCE_END) and got[2][:16] == rid, 10)
    out["accepted"] = got is not None and got[0] == RESOURCE_ACCEPT
    if out["accepted"]:
        p.c.send(chunk(rid, 0, records))
        got = p.until(lambda got: got is not None and got[0] == RESOURCE_END and got[2][:16] == rid, 15)
        out["end_status"] = got[2][16] if got else None
    live = SealMaker(key, peer_id, room, [sealable(room, "a sealed live message", 2)])
    p.c.send(live.frame() + live.message(0))
    out["live_acked"] = bool(p.acks([live.messages[0].message_id], 10))
    out["pong_after"] = p.pinged(5)


# MARK: below-version-4

def below_version_4(host, port, key, cert, peer_id, out, room):
    seal = SealMaker(key, peer_id, room, [sealable(room, "sealed on a version 3 connection", 1)])
    history = seal.head_entry() + seal.record_entry(0, "wire-client")
    attempts = [("seal", seal.frame()), ("sealed_message", seal.message(0)),
                ("sealed_history_offer", offer(os.urandom(16), b"history", history, room=room.encode(), kind=SEALED_HISTORY))]
    for name, data in attempts:
        result = {}
        p = connect(host, port, key, cert, peer_id, result, max_version=3)
        if result["version"] == 3:
            result["joined"] = p.join(room)
            result["pong_before"] = p.pinged(6)
            p.c.send(data)
            p.until(lambda got: p.goodbye is not None, 10)
            p.until(lambda got: False, 5)  # then the connection closes
            result.update(goodbye=p.goodbye, closed=p.closed)
        p.c.sock.close()
        out[name] = result
    result = {}
    p = connect(host, port, key, cert, peer_id, result)
    result["pong"] = result["version"] == MAX_VERSION and p.pinged(7)
    out["version_4_after"] = result


def main():
    host, port, scenario, room = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    key, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    if scenario == "below-version-4":
        below_version_4(host, port, key, cert, peer_id, out, room)
        print(json.dumps(out), flush=True)
        return
    p = connect(host, port, key, cert, peer_id, out)
    out["hello"] = out["version"] is not None
    if scenario == "forged-seal":
        forged_seal(p, key, peer_id, out, room)
    elif scenario == "unsealed-leaves":
        unsealed_leaves(p, key, peer_id, out, room, sys.argv[5])
    elif scenario == "reused-seal":
        reused_seal(p, key, peer_id, out, room)
    elif scenario == "sealed-history":
        sealed_history(p, key, peer_id, out, room)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    out["goodbye"] = p.goodbye
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
