"""A hostile room member's attacks on relay answers and shared-file requests (issue 28, items 3 and 5),
built on the independent wire client (Tests/e2e/wire_client.py).

    python3 attack_relay.py HOST PORT relay-flood ROOMS SECONDS
        Joins ROOMS rooms (r1, r2, ...: the daemon auto-accepts our invitations) at version 2, prints one
        JSON line and waits for a line on stdin (the test has the daemon write in those rooms meanwhile);
        then sends SYNC_REQUEST with no runs in every room once a second for SECONDS seconds, acknowledging
        messages and never accepting an offer. Prints one JSON line: the relay answers offered, the ends
        received for them (by text), and the most that were outstanding at once.
    python3 attack_relay.py HOST PORT shared-probe SHA256_HEX
        A member of `lab` only (it invites the daemon in) asks for the file of digest SHA256_HEX (which the
        daemon shared in another room) and for a random digest: first as they are, then after announcing
        each itself in `lab`; and for the file in the other room. Prints one JSON line: what each request
        got (an offer, or the refusal's text).
    python3 attack_relay.py HOST PORT join ROOM
        Invites the daemon into ROOM (another identity: the prober is not a member there) and goes.

(run inside a simulated host)"""
import json
import os
import struct
import sys
import tempfile
import time

from wire_client import frame, handshake, identity, join, lp, pinged, signed_message


def connect(host, port, max_version=2):
    """A new identity of ours, connected: (connection, key, id, version)."""
    key, cert, peer_id = identity(tempfile.mkdtemp())
    c, version = handshake(host, port, key, cert, peer_id, max_version, timeout=5)
    return c, key, peer_id, version


def sync_request(room, since_ms=0, runs=()):
    """SYNC_REQUEST (0x07): room (u8 len) | since_ms u64 | count u16 | runs, each author_id (u8 len) |
    first u64 | last u64."""
    payload = lp(room.encode()) + struct.pack(">QH", since_ms, len(runs))
    for author, first, last in runs:
        payload += lp(author.encode()) + struct.pack(">QQ", first, last)
    return frame(0x07, payload)


def file_request(request_id, room, sha256):
    """FILE_REQUEST (0x45, flag 0x80 ignorable): request_id [16] | room (u8 len) | sha256 [32]."""
    return frame(0x45, request_id + lp(room.encode()) + sha256, 0x80)


def parse_end(payload):
    """RESOURCE_END's payload: resource_id [16] | status u8 | text (u16 len)."""
    return payload[:16], payload[16], payload[19:19 + struct.unpack(">H", payload[17:19])[0]].decode("utf-8", "replace")


def handle_routine(c, got):
    """Answers what a live peer answers: PING with PONG, a reliable MESSAGE with its ACK."""
    kind, flags, payload = got
    if kind == 0x20:
        c.send(frame(0x21, payload))
    elif kind == 0x10 and flags & 0x01:
        c.send(frame(0x11, struct.pack(">H", 1) + payload[:16]))


def relay_flood(host, port, rooms, seconds):
    c, _, peer_id, version = connect(host, port)
    names = [f"r{n + 1}" for n in range(rooms)]
    out = {"id": peer_id, "version": version, "joined": all(join(c, room) for room in names)}
    print(json.dumps(out), flush=True)
    sys.stdin.readline()
    offered, ended, texts, most = set(), set(), {}, 0
    requests = 0
    started = time.monotonic()
    next_round = started
    while time.monotonic() - started < seconds:
        now = time.monotonic()
        if now >= next_round:
            for room in names:
                c.send(sync_request(room))
                requests += 1
            next_round += 1
        got = c.read_frame(timeout=max(0.05, next_round - time.monotonic()))
        if got is None:
            continue
        if got[0] == "closed":
            out["closed_after"] = round(time.monotonic() - started, 1)
            break
        handle_routine(c, got)
        if got[0] == 0x40 and got[2][16 + 1 + got[2][16]] == 2:  # a signed history: a relay answer
            offered.add(got[2][:16])
        elif got[0] == 0x43:
            rid, status, text = parse_end(got[2])
            if rid in offered and rid not in ended:
                ended.add(rid)
                texts[f"{status} {text}"] = texts.get(f"{status} {text}", 0) + 1
        most = max(most, len(offered - ended))
    out.update(requests=requests, offered=len(offered), ended=len(ended), end_texts=texts, most_outstanding=most,
               outstanding=len(offered - ended), pong_after=pinged(c, 5, timeout=10))
    print(json.dumps(out), flush=True)


def ask(c, room, sha256):
    """FILE_REQUEST, then what answers it: "offered", or the RESOURCE_END's text (declining the offer)."""
    rid = os.urandom(16)
    c.send(file_request(rid, room, sha256))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = c.read_frame(timeout=max(0.05, deadline - time.monotonic()))
        if got is None or got[0] == "closed":
            return None
        handle_routine(c, got)
        if got[0] == 0x40 and got[2][:16] == rid:
            c.send(frame(0x43, rid + bytes([2]) + lp(b"no, thanks", 2)))  # cancelled: we only wanted to know
            return "offered"
        if got[0] == 0x43 and got[2][:16] == rid:
            return parse_end(got[2])[2]
    return None


def announce(c, key, peer_id, room, sha256, sequence):
    """A signed announcement (MESSAGE kind 1) of `sha256` in `room`, as ours; waits for its ACK."""
    body = "\n".join(["lanchat-file/1", "sha256: " + sha256.hex(), "size: 1000", "type: application/octet-stream", "name: probe.bin"])
    message_id = os.urandom(16)
    c.send(signed_message(key, peer_id, room, body, message_id=message_id, kind=1, sequence=sequence))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = c.read_frame(timeout=max(0.05, deadline - time.monotonic()))
        if got is None or got[0] == "closed":
            return False
        if got[0] == 0x11 and message_id in got[2]:
            return True
        handle_routine(c, got)
    return False


def shared_probe(host, port, held_hex):
    held, unknown = bytes.fromhex(held_hex), os.urandom(32)
    c, key, peer_id, version = connect(host, port)
    out = {"id": peer_id, "version": version, "joined": join(c, "lab")}
    out["held_unannounced"] = ask(c, "lab", held)
    out["unknown_unannounced"] = ask(c, "lab", unknown)
    out["announced_held"] = announce(c, key, peer_id, "lab", held, 1)
    out["announced_unknown"] = announce(c, key, peer_id, "lab", unknown, 2)
    out["held_self_announced"] = ask(c, "lab", held)
    out["unknown_self_announced"] = ask(c, "lab", unknown)
    out["held_other_room"] = ask(c, "secret", held)
    out["pong_after"] = pinged(c, 6, timeout=10)
    print(json.dumps(out), flush=True)


def main():
    host, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if scenario == "relay-flood":
        relay_flood(host, port, int(sys.argv[4]), float(sys.argv[5]))
    elif scenario == "shared-probe":
        shared_probe(host, port, sys.argv[4])
    elif scenario == "join":
        c, _, peer_id, version = connect(host, port)
        print(json.dumps({"id": peer_id, "version": version, "joined": join(c, sys.argv[4])}), flush=True)
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
