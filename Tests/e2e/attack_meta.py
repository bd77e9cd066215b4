"""A hostile member against a room's metadata and administration (issue 28, item 2), speaking the wire
protocol (docs/wire-protocol.md) through Tests/e2e/wire_client.py's pieces. Version 3.

    python3 attack_meta.py HOST PORT freeze ROOM

prints JSON lines of observations; the test drives the daemon (the room's creator) in between.

freeze: the daemon made ROOM (it invited another daemon into it), so it is its creator; we invite it into
ROOM (a room of that name of ours: it accepts, `--auto-accept all`, and the two merge), which makes us a
member there (its creator's record stays: the first a member holds). Then, as a member, we write the topic and 255 keys of our
own at version 2^62 (the last version a writer may reach: before the fix the creator could then neither
set nor delete the topic, nor remove us nor close the room, "room has 256 keys already"), and 300 keys at
version 1 (one member's share of the ordinary keys), each entry signed by our key (ROOM_META, 0x09, with
the ignorable flag). We print what we sent, then wait for a line on stdin while the test runs the
creator's commands, and report the administration's entries the daemon sent us afterwards (our removal,
the closing)."""
import json
import os
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import (  # noqa: E402
    TIMESTAMP_MS, Connection, author_key, frame, hello, identity, invite, lp, negotiated_version, sign,
)

MAX_VERSION = 3
INVITE_REPLY, ROOM_META, PING, PONG = 0x03, 0x09, 0x20, 0x21
IGNORABLE = 0x80
LAST_VERSION = 1 << 62


def meta_bytes(room, key, deleted, value, version, timestamp_ms, author_id):
    """What a ROOM_META entry's author signs: "LCHT-META-2" | room (u8 len) | key (u8 len) | deleted u8 |
    value (u16 len) | version u64 | timestamp_ms u64 | author_id (u8 len)."""
    return (b"LCHT-META-2" + lp(room.encode()) + lp(key.encode()) + bytes([1 if deleted else 0]) + lp(value.encode(), 2)
            + struct.pack(">QQ", version, timestamp_ms) + lp(author_id.encode()))


def meta_entry(pem, compressed, author_id, room, key, value, version, deleted=False, timestamp_ms=TIMESTAMP_MS):
    """One entry: key (u8 len) | deleted u8 | value (u16 len) | version u64 | timestamp_ms u64 |
    author_id (u8 len) | author_key [33] | signature [64]."""
    signature = sign(pem, meta_bytes(room, key, deleted, value, version, timestamp_ms, author_id))
    return (lp(key.encode()) + bytes([1 if deleted else 0]) + lp(value.encode(), 2) + struct.pack(">QQ", version, timestamp_ms)
            + lp(author_id.encode()) + compressed + signature)


def room_meta(room, entries):
    """ROOM_META frames of at most 64 entries each: room (u8 len) | count u8 | entries."""
    return b"".join(frame(ROOM_META, lp(room.encode()) + bytes([len(entries[n:n + 64])]) + b"".join(entries[n:n + 64]), IGNORABLE)
                    for n in range(0, len(entries), 64))


def parse_meta(payload, flags):
    """The (key, deleted, value, version, author_id) of a ROOM_META's entries (none for a digest)."""
    if flags & 0x01:
        return []
    pos = 1 + payload[0]
    count, pos = payload[pos], pos + 1
    entries = []
    for _ in range(count):
        key = payload[pos + 1:pos + 1 + payload[pos]].decode()
        pos += 1 + payload[pos]
        deleted = payload[pos] == 1
        length = struct.unpack(">H", payload[pos + 1:pos + 3])[0]
        value = payload[pos + 3:pos + 3 + length].decode()
        pos += 3 + length
        version, _ = struct.unpack(">QQ", payload[pos:pos + 16])
        pos += 16
        author = payload[pos + 1:pos + 1 + payload[pos]].decode()
        pos += 1 + payload[pos] + 33 + 64
        entries.append((key, deleted, value, version, author))
    return entries


def pump(c, seconds, seen, until=None):
    """Reads frames for `seconds` (answering PINGs), collecting ROOM_META entries into `seen`; returns the
    first frame of a type in `until`, "closed", or None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = c.read_frame(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        if got is None:
            continue
        if got[0] == "closed":
            return "closed"
        if got[0] == PING:
            c.send(frame(PONG, got[2]))
        elif got[0] == ROOM_META:
            seen.extend(parse_meta(got[2], got[1]))
        if until and got[0] in until:
            return got
    return None


def synced(c, token, seen):
    """A PING answered: what we sent before it was read."""
    c.send(frame(PING, struct.pack(">Q", token)))
    got = pump(c, 15, seen, until=(PONG,))
    return got is not None and got != "closed"


def freeze(c, pem, peer_id, room, out):
    seen = []
    c.send(invite(room))
    got = pump(c, 30, seen, until=(INVITE_REPLY,))
    out["invited"] = got not in (None, "closed") and got[2][16] == 0
    if not out["invited"]:
        return
    pump(c, 3, seen)
    out["creator_record"] = [e[4][:8] for e in seen if e[0] == "admin.creator"]
    compressed = author_key(pem)
    frozen = [meta_entry(pem, compressed, peer_id, room, "topic", "the room is mine", LAST_VERSION)]
    frozen += [meta_entry(pem, compressed, peer_id, room, f"k{n:03d}", "x", LAST_VERSION) for n in range(255)]
    share = [meta_entry(pem, compressed, peer_id, room, f"m{n:03d}", "y", 1) for n in range(300)]
    c.send(room_meta(room, frozen) + room_meta(room, share))
    out["sent"] = {"at_last_version": len(frozen), "at_version_1": len(share)}
    out["synced"] = synced(c, 7, seen)
    out["marker"] = "flooded"
    print(json.dumps(out), flush=True)
    # The test runs the creator's commands now, then tells us to report (a line on stdin).
    sys.stdin.readline()
    seen.clear()
    pump(c, 3, seen)
    out["told"] = sorted({(e[0] if not e[0].startswith("removed.") else "removed." + e[0][8:16]) + (" deleted" if e[1] else "")
                          for e in seen if not e[0].startswith(("k", "m"))})
    out["removed_us"] = any(e[0] == "removed." + peer_id and not e[1] for e in seen)
    out["marker"] = "done"


def main():
    host, port, scenario, room = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    pem, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    c = Connection(host, port, pem, cert)
    c.send(hello(peer_id, max_version=MAX_VERSION))
    got = c.frames_until(0x01)
    out["hello"] = got is not None and got[0] == 0x01
    out["version"] = negotiated_version(got[2], MAX_VERSION) if out["hello"] else None
    print(json.dumps({"id": peer_id, "version": out["version"], "marker": "connected"}), flush=True)
    if scenario == "freeze":
        freeze(c, pem, peer_id, room, out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
