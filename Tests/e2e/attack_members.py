"""A hostile room member (issue 28, items 4, 6, 7 and 8), speaking the wire protocol (docs/wire-protocol.md)
through Tests/e2e/wire_client.py's pieces. Version 3: signed messages and membership proofs. Each scenario
first invites the daemon (which runs --auto-accept all) into ROOM, so that we are a member there.

    python3 attack_members.py HOST PORT future ROOM WINDOW_ROOM
    python3 attack_members.py HOST PORT crowd ROOM FAKES PORT_FOR_FAKES [--identities N] [--hold SECONDS]
    python3 attack_members.py HOST PORT silent ROOM SECONDS

future (item 4): in ROOM, a signed live MESSAGE dated 11 minutes ahead of this host's clock (the daemon
shares it), then one dated 5 minutes ahead. In WINDOW_ROOM, 50 signed messages dated 2^62 ms (about
146 million years on). Which are acknowledged is recorded; the test reads the daemon's history.

crowd (items 6 and 8): FAKES members of our own making (a key each, made here, and a membership proof
signed by that key: valid, inviter us), introduced in ROOM_MEMBERS pages of 32 (flag 0x02) with port
PORT_FOR_FAKES and addresses: the first fake at 127.0.0.1 (the daemon's own loopback: the test listens
there), the second at 224.0.0.1 (a multicast group), the rest at 198.18.0.200-254 (unused addresses on
the simulated LAN: a dial there waits for ARP). With --identities N, N members of our making each invite
the daemon into ROOM (it auto-accepts) and each introduces its share of the FAKES. We print one JSON line
(the ids, and whether a PING after the introductions was answered), then hold the connections open
(answering PINGs, never anything else) until a line on stdin or --hold seconds, and print a last line.

silent (item 7): we are a member that never acknowledges. We print {"marker": "joined"}, then read
frames for SECONDS, answering PINGs only, and record every MESSAGE (id, body, when, in seconds after the
first copy of it). Never an ACK: the daemon keeps the message queued for us and resends it."""
import argparse
import concurrent.futures
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import (  # noqa: E402
    acks_for, frame, handshake, id_of_spki, identity, join, lp, membership_bytes, now_ms, pinged, sign, signed_message,
)

MAX_VERSION = 3
ROOM_MEMBERS, MESSAGE, PING, PONG = 0x04, 0x10, 0x20, 0x21
FAR_FUTURE_MS = 1 << 62
JOINED_MS = 1795000000000


# MARK: future (item 4)

def dated(key, peer_id, room, body, timestamp_ms, sequence):
    """(message id, a signed reliable MESSAGE (flags 0x03) dated `timestamp_ms`)."""
    message_id = os.urandom(16)
    return message_id, signed_message(key, peer_id, room, body, message_id=message_id, sequence=sequence, timestamp_ms=timestamp_ms)


def future(c, key, peer_id, out, room, window_room):
    out["joined"] = join(c, room)
    out["joined_window"] = join(c, window_room)
    now = now_ms()
    ahead_id, ahead = dated(key, peer_id, room, "dated eleven minutes ahead", now + 11 * 60_000, 1)
    within_id, within = dated(key, peer_id, room, "dated five minutes ahead", now + 5 * 60_000, 2)
    c.send(ahead + within)
    got = acks_for(c, [ahead_id, within_id])
    out["ahead_acked"], out["within_acked"] = ahead_id in got, within_id in got
    far = [dated(key, peer_id, window_room, f"from the year 146 million, number {n}", FAR_FUTURE_MS + n, n + 1) for n in range(50)]
    c.send(b"".join(data for _, data in far))
    out["far_acked"] = len(acks_for(c, [i for i, _ in far]))
    out["pong_after"] = pinged(c, 4)


# MARK: crowd (items 6 and 8)

def made_up_member(directory):
    """A P-256 key of our making: (key PEM path, its peer id, its compressed point). The id hashes the
    uncompressed SubjectPublicKeyInfo, as wire_client.identity() does; the point is taken from it."""
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key], check=True, capture_output=True)
    spki = subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-outform", "DER"], check=True, capture_output=True).stdout
    point = spki[-65:]
    assert point[0] == 0x04, spki.hex()
    compressed = bytes([0x02 | (point[64] & 1)]) + point[1:33]
    return key, id_of_spki(spki), compressed


def fake_addresses(n):
    if n == 0:
        return ["127.0.0.1"]
    if n == 1:
        return ["224.0.0.1"]
    return [f"198.18.0.{200 + (n - 2) % 55}"]


def make_fakes(count, room, inviter_of, work):
    """`count` members of our making, each with a valid proof of its own for `room`: dicts of id, name,
    addresses, and the proof's inviter, key and signature. `inviter_of(n)`: the inviter id fake n names."""
    def one(n):
        directory = os.path.join(work, f"fake{n}")
        os.makedirs(directory)
        key, peer_id, compressed = made_up_member(directory)
        inviter = inviter_of(n)
        signature = sign(key, membership_bytes(room, peer_id, inviter, JOINED_MS))
        return {"id": peer_id, "name": f"fake{n}", "addresses": fake_addresses(n), "inviter": inviter,
                "key": compressed, "signature": signature}
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(one, range(count)))


def introduction_pages(room, fakes, port):
    """ROOM_MEMBERS frames (flag 0x02, proofs), 32 members a page: each fake with `port`, its addresses and
    its own proof (inviter_id | joined_ms | member_key | signature)."""
    pages = []
    for start in range(0, len(fakes), 32):
        page = fakes[start:start + 32]
        payload = lp(room.encode()) + struct.pack(">H", len(page))
        for f in page:
            payload += lp(f["id"].encode()) + lp(f["name"].encode()) + struct.pack(">HB", port, len(f["addresses"]))
            payload += b"".join(lp(a.encode()) for a in f["addresses"])
            payload += b"\x01" + lp(f["inviter"].encode()) + struct.pack(">Q", JOINED_MS) + f["key"] + f["signature"]
        pages.append(frame(ROOM_MEMBERS, payload, 0x02))
    return pages


def hold(connections, seconds, seen, stop):
    """Keeps each connection open, answering PINGs (a thread each), until `stop` is set or `seconds` pass."""
    deadline = time.monotonic() + seconds

    def one(index, c):
        while not stop.is_set() and time.monotonic() < deadline:
            got = c.read_frame(timeout=0.5)
            if got is None:
                continue
            if got[0] == "closed":
                seen[f"closed{index}"] = round(time.monotonic() - (deadline - seconds), 1)
                return
            seen[f"0x{got[0]:02x}"] = seen.get(f"0x{got[0]:02x}", 0) + 1
            if got[0] == PING:
                c.send(frame(PONG, got[2]))
    threads = [threading.Thread(target=one, args=(i, c), daemon=True) for i, c in enumerate(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + 2)


def crowd(host, port, out, room, count, fake_port, identities, seconds):
    work = tempfile.mkdtemp()
    members = []  # (connection, id) of each member of our making that invites the daemon
    for n in range(identities):
        directory = os.path.join(work, f"member{n}")
        os.makedirs(directory)
        key, cert, peer_id = identity(directory)
        c, version = handshake(host, port, key, cert, peer_id, MAX_VERSION, name="wire-client" if n == 0 else f"wire-client{n}")
        out.setdefault("versions", []).append(version)
        out.setdefault("joined", []).append(join(c, room))
        members.append((c, peer_id))
    out["id"] = members[0][1]
    out["member_ids"] = [peer_id for _, peer_id in members]
    share = -(-count // identities)
    started = time.monotonic()
    fakes = make_fakes(count, room, lambda n: members[n // share][1], work)
    out["made_seconds"] = round(time.monotonic() - started, 1)
    out["fakes"] = [f["id"] for f in fakes]
    out["loopback_fake"], out["multicast_fake"] = fakes[0]["id"], fakes[1]["id"]
    for n, (c, _) in enumerate(members):
        for page in introduction_pages(room, fakes[n * share:(n + 1) * share], fake_port):
            c.send(page)
    out["pong_after"] = all(pinged(c, 6) for c, _ in members)
    out["marker"] = "introduced"
    print(json.dumps(out), flush=True)
    stop, seen = threading.Event(), {}
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    hold([c for c, _ in members], seconds, seen, stop)
    return {"marker": "done", "seen_while_held": seen}


# MARK: silent (item 7)

def silent(c, out, room, seconds):
    out["joined"] = join(c, room)
    print(json.dumps({"marker": "joined", **out}), flush=True)
    copies = {}  # message id (hex) -> {"body", "at": [seconds after its first copy]}
    frames = {}
    acks_sent = 0  # (never: a member that never acknowledges)

    def record(got):
        if got[0] == MESSAGE:
            payload = got[2]
            message_id = payload[:16].hex()
            room_length = payload[16]
            at = 17 + room_length + 8 + 8 + 1
            body_length = struct.unpack(">I", payload[at:at + 4])[0]
            body = payload[at + 4:at + 4 + body_length].decode("utf-8", "replace")
            entry = copies.setdefault(message_id, {"body": body, "first": time.monotonic(), "at": []})
            entry["at"].append(round(time.monotonic() - entry["first"], 1))

    started = time.monotonic()
    if c.pump(seconds, frames, on_frame=record) == ("closed",):
        out["closed_at"] = round(time.monotonic() - started, 1)
    for entry in copies.values():
        del entry["first"]
    out.update(marker="done", messages=copies, frames=frames, acks_sent=acks_sent)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("scenario", choices=["future", "crowd", "silent"])
    parser.add_argument("room")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--identities", type=int, default=1)
    parser.add_argument("--hold", type=float, default=60)
    args = parser.parse_args()
    if args.scenario == "crowd":
        last = crowd(args.host, args.port, {}, args.room, int(args.rest[0]), int(args.rest[1]), args.identities, args.hold)
        print(json.dumps(last), flush=True)
        return
    key, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    c, out["version"] = handshake(args.host, args.port, key, cert, peer_id, MAX_VERSION)
    if args.scenario == "future":
        future(c, key, peer_id, out, args.room, args.rest[0])
    else:
        silent(c, out, args.room, float(args.rest[0]))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
