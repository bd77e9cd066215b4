"""A hostile inviter against a newcomer's history door (issue 28, item 1), speaking the wire protocol
(docs/wire-protocol.md) through Tests/e2e/wire_client.py's pieces. Version 2: signed messages and
signed histories.

    python3 attack_history.py HOST PORT late-history ROOM HOLD_SECONDS
    python3 attack_history.py HOST PORT two-histories ROOM
    python3 attack_history.py HOST PORT cut-history ROOM COUNT

prints one JSON line of observations (the test reads the daemon's history for the rest).

late-history: we invite the daemon into ROOM (it auto-accepts) and it asks us for the room's history.
We hold that request HOLD_SECONDS (answering heartbeats), then offer a history (kind 1: a relay answer
to a SYNC_REQUEST is a signed history only, so only the newcomer's door can take this one).

two-histories: we invite the daemon; at its request we offer two signed histories at once (two ids).
The first holds records signed by keys we made up (authors that were never members), labelled with
members' names ("wire-client", ours, and "bob", the daemon's), and one of our own; the second holds
one more invented record. Then a signed live MESSAGE of ours under the id of one invented record.

cut-history: we invite the daemon; at its request we offer a history (kind 2) of COUNT records of our own
words (unsigned: the relay's own word), then the first bytes of one more: the file ends inside a record.
The daemon reads it in pieces (5,000 records, up to 3 read ahead of its storing) and fails at the end."""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import (  # noqa: E402
    acked, chunk, handshake, history_record, identity, join, offer, pinged, signed_history_record, signed_message,
)

MAX_VERSION = 2
HISTORY_REQUEST = 0x06
RESOURCE_ACCEPT, RESOURCE_END = 0x41, 0x43


def answers(c, ids, timeout=10):
    """The daemon's first answer (ACCEPT or END) to each offered resource id: {id: (type, status, text)}."""
    found, deadline = {}, time.monotonic() + timeout
    while len(found) < len(ids) and time.monotonic() < deadline:
        got = c.frames_until((RESOURCE_ACCEPT, RESOURCE_END), timeout=max(0.1, deadline - time.monotonic()))
        if got is None or got[0] == "closed":
            break
        rid = got[2][:16]
        if rid in ids and rid not in found:
            if got[0] == RESOURCE_END:
                found[rid] = ("end", got[2][16], got[2][19:].decode("utf-8", "replace"))
            else:
                found[rid] = ("accept", None, None)
    return found


def end_status(c, rid, timeout=10):
    """The status of the RESOURCE_END for `rid` (after we sent its bytes), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = c.frames_until(RESOURCE_END, timeout=max(0.1, deadline - time.monotonic()))
        if got is None or got[0] == "closed":
            return None
        if got[2][:16] == rid:
            return got[2][16]
    return None


def join_asked(c, room, out):
    """Invites the daemon into `room`; records its reply and its HISTORY_REQUEST (when it came)."""
    out["joined"] = join(c, room)
    got = c.frames_until(HISTORY_REQUEST, timeout=10)
    out["history_requested"] = got is not None and got[0] == HISTORY_REQUEST
    return time.monotonic()


def offer_history(rid, room, records, kind):
    """RESOURCE_OFFER of a history (kind 1, or 2 signed) for `room` holding `records`."""
    return offer(rid, b"history", records, room=room.encode(), kind=kind)


def send_accepted(c, rid, records, answer):
    """A result for one offer: how the daemon answered, and when it took it, the END after the bytes."""
    kind, status, text = answer if answer else ("none", None, None)
    result = {"answer": kind, "status": status, "text": text}
    if kind == "accept":
        c.send(chunk(rid, 0, records))
        result["end_status"] = end_status(c, rid)
    return result


def late_history(c, key, peer_id, out, room, hold):
    requested = join_asked(c, room, out)
    seen = {}
    out["alive_while_held"] = c.pump(hold, seen) != ("closed",)
    out["held_seconds"] = round(time.monotonic() - requested, 1)
    out["frames_while_held"] = seen
    records = history_record(peer_id, "wire-client", 1, "held-back words") + history_record(peer_id, "wire-client", 2, "more held-back words")
    rid = os.urandom(16)
    c.send(offer_history(rid, room, records, kind=1))
    out["late_offer"] = send_accepted(c, rid, records, answers(c, [rid]).get(rid))


def two_histories(c, key, peer_id, out, room):
    join_asked(c, room, out)
    work = tempfile.mkdtemp()
    invented = []
    for label in ("wire-client", "bob", "mallory"):
        directory = os.path.join(work, label)
        os.makedirs(directory)
        invented_key, _, invented_id = identity(directory)
        invented.append((invented_key, invented_id, label))
    out["invented"] = [{"id": invented_id, "label": label} for _, invented_id, label in invented]
    ids = [os.urandom(16) for _ in range(4)]
    out["record_ids"] = [i.hex() for i in ids]
    (k1, a1, l1), (k2, a2, l2), (k3, a3, l3) = invented
    first = (signed_history_record(room, a1, l1, 1, "invented words labelled wire-client", key=k1, message_id=ids[0])
             + signed_history_record(room, a2, l2, 1, "invented words labelled bob", key=k2, message_id=ids[1])
             + signed_history_record(room, peer_id, "wire-client", 1, "my own old words", key=key, message_id=ids[2]))
    second = signed_history_record(room, a3, l3, 1, "words of a second history", key=k3, message_id=ids[3])
    rid1, rid2 = os.urandom(16), os.urandom(16)
    # Both at once, before the daemon has answered either.
    c.send(offer_history(rid1, room, first, kind=2) + offer_history(rid2, room, second, kind=2))
    got = answers(c, [rid1, rid2])
    out["first_offer"] = send_accepted(c, rid1, first, got.get(rid1))
    out["second_offer"] = send_accepted(c, rid2, second, got.get(rid2))
    # Our own signed live message, under the id of the record we made up for "wire-client".
    c.send(signed_message(key, peer_id, room, "my live words under a taken id", message_id=ids[0], sequence=2))
    out["live_acked"] = acked(c, ids[0], timeout=10)


def cut_history(c, key, peer_id, out, room, count):
    join_asked(c, room, out)
    records = b"".join(signed_history_record(room, peer_id, "wire-client", n + 1, f"cut history {n}") for n in range(count))
    records += signed_history_record(room, peer_id, "wire-client", count + 1, "never whole")[:30]
    rid = os.urandom(16)
    c.send(offer_history(rid, room, records, kind=2))
    answer = answers(c, [rid]).get(rid)
    out["offer"] = {"answer": answer[0] if answer else "none", "bytes": len(records)}
    if answer and answer[0] == "accept":
        step = 256 * 1024
        for at in range(0, len(records), step):
            c.send(chunk(rid, at, records[at:at + step]))
        out["offer"]["end_status"] = end_status(c, rid, timeout=60)


def main():
    host, port, scenario, room = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    key, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    c, out["version"] = handshake(host, port, key, cert, peer_id, MAX_VERSION)
    out["hello"] = out["version"] is not None
    if scenario == "late-history":
        late_history(c, key, peer_id, out, room, float(sys.argv[5]))
    elif scenario == "two-histories":
        two_histories(c, key, peer_id, out, room)
    elif scenario == "cut-history":
        cut_history(c, key, peer_id, out, room, int(sys.argv[5]))
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    out["pong_after"] = pinged(c, 99, timeout=10)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
