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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import TIMESTAMP_MS, author_key, frame, handshake, identity, join, lp, pinged, sign  # noqa: E402

MAX_VERSION = 3
ROOM_META = 0x09
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


def pump(c, seconds, seen):
    """Reads frames for `seconds` (answering PINGs), collecting ROOM_META entries into `seen`."""
    def collect(got):
        if got[0] == ROOM_META:
            seen.extend(parse_meta(got[2], got[1]))

    c.pump(seconds, on_frame=collect)


def freeze(c, pem, peer_id, room, out):
    seen = []
    # (The daemon answers the INVITE before it sends the room's metadata: nothing is passed over.)
    out["invited"] = join(c, room, timeout=30)
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
    out["synced"] = pinged(c, 7, timeout=15)  # (what the daemon sent meanwhile is not looked at: `seen` is cleared below)
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
    c, out["version"] = handshake(host, port, pem, cert, peer_id, MAX_VERSION, timeout=5)
    out["hello"] = out["version"] is not None
    print(json.dumps({"id": peer_id, "version": out["version"], "marker": "connected"}), flush=True)
    if scenario == "freeze":
        freeze(c, pem, peer_id, room, out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
