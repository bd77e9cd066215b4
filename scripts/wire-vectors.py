#!/usr/bin/env python3
"""Test vectors for lanchat wire protocol version 2 (signed message envelopes), version 3 (signed membership) and
version 4 (seals, draft), computed independently of the Swift code: Python's standard library and the `openssl`
command line only.

    scripts/wire-vectors.py [--documented]

prints `name: value` lines (hex, except `author_id`, which is text). The key is fixed (below), so every
line is the same on every run except the signatures (`signature`, `membership_signature`,
`leave_signature`, `seal_signature`) and the values that carry them (`message_frame`, `history_record`,
`room_members_frame`, `room_leave_frame`, `seal_frame`, `seal_head`, `sealed_history`): ECDSA signatures are
randomized. With `--documented`, the message and seal signatures are the ones docs/wire-protocol.md lists
(checked like fresh ones), so that the values carrying them can be compared with the document byte for byte. Each signature
printed was verified first, by openssl (with a public key rebuilt from the 33-byte compressed key alone, as a receiver has it) and by
the small P-256 arithmetic below; the public key, the compressed form and the id are each computed two
ways and compared. Any mismatch stops the script with an error.

Layouts, v2 to v4 (all integers big-endian; `lp1`/`lp2`/`lp4`: a u8/u16/u32 length, then the bytes):
    signing bytes  = "LCHT-MSG-2" | author_id lp1 | room lp1 | message_id[16] | sequence u64
                     | timestamp_ms u64 | kind u8 | body lp4
    signature      = ECDSA P-256 / SHA-256 over the signing bytes, raw r[32] | s[32]
    MESSAGE 0x10, flags 0x03 (reliable | signed): the v1 payload | author_key[33] | signature[64]
    history record (RESOURCE_OFFER kind 2): the v1 record | author_key lp1 (0 or 33) | signature lp1 (0 or 64)
    membership     = "LCHT-JOIN-2" | room lp1 | member_id lp1 | inviter_id lp1 (may be empty) | joined_ms u64,
                     signed by the member's own key as above
    leave          = "LCHT-LEAVE-2" | room lp1 | member_id lp1 | left_ms u64, signed by the member's own key
    ROOM_MEMBERS 0x04, flag 0x02 (proofs): each member's v1 fields | has_proof u8 (0 or 1), and if 1
                     inviter_id lp1 | joined_ms u64 | member_key[33] | signature[64]
    ROOM_LEAVE 0x05, flag 0x02 (signed): room lp1 | text lp2 | member_id lp1 | left_ms u64 | member_key[33]
                     | signature[64]
    v4 (seals, draft: not yet negotiated):
    leaf hash      = SHA-256(0x00 | a message's signing bytes); node hash = SHA-256(0x01 | left | right)
    root           = RFC 9162 MTH over the leaf hashes (a tree of one leaf: its leaf hash; else the node hash of the
                     roots of the first k leaves and of the rest, k the largest power of two below the count)
    seal           = "LCHT-SEAL" | author_id lp1 | seal_id[16] | room lp1 | leaf_count u16 (1-256) | root[32],
                     signed by the author's key as above
    SEAL 0x12      = seal_id[16] | room lp1 | author_key[33] | signature[64] | leaf_count u16 | leaf_hash[32] * count
    seal proof     = seal_id[16] | leaf_index u16 | path_count u8 (<= 8) | path_hash[32] * path_count (RFC 9162 PATH)
    MESSAGE 0x10, flag 0x08 (sealed): the v1 payload | seal_id[16] | leaf_index u16 (with flag 0x02 too: an error)
    seal head      = seal_id[16] | author_id lp1 | author_key[33] | signature[64] | leaf_count u16 | root[32]
    sealed history = entries, each tag u8 | 0x00 a signed history record, 0x01 a seal head, 0x02 a v1 history
                     record | its seal proof
    author_key     = SEC1 compressed point (0x02/0x03 | X); author_id = base32(sha256(SPKI DER)), the SPKI
                     holding the uncompressed point (what `openssl pkey -pubout -outform DER` writes)."""
import base64
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

# Generated once with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`; a test key, never
# used for anything else.
FIXED_KEY_PEM = b"""-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaC3DABt22O09ldM7
7i+Tg9N7StSSOnZvYrvON5gwBQyhRANCAAQe4L8aPABivejZLPdCKQbtQVhrt9gC
/yoqFrEj+olP+lBCqIsUc/XQZBM351Kepc92Atha3D/eazC7fEyQfiDt
-----END PRIVATE KEY-----
"""

# The sample message (the v1 MESSAGE vector's values) and the v1 HELLO vector's values.
MESSAGE_ID = bytes(range(16))
ROOM = "lab"
SEQUENCE = 1
TIMESTAMP_MS = 1795000000000
KIND_TEXT = 0
BODY = "héllo\nworld"
SENDER_NAME = "alice@h1"
HELLO_PEER_ID = "liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a"
HELLO_NAME = "alice@h1"
MAX_PAYLOAD = 1 << 20
# Membership with provenance: the fixed key's id joined `lab` at TIMESTAMP_MS, invited by the HELLO vector's id,
# and left a minute later. The ROOM_MEMBERS vector names it (with its proof) and the v1 ROOM_MEMBERS vector's
# member (without one).
INVITER_ID = HELLO_PEER_ID
JOINED_MS = TIMESTAMP_MS
LEFT_MS = TIMESTAMP_MS + 60000
MEMBER_NAME = "alice@h1"
MEMBER_PORT = 7000
MEMBER_ADDRESSES = ["198.18.0.11"]
V1_MEMBER = (HELLO_PEER_ID, "bob@h2", 7000, ["198.18.0.12", "fe80::1%lan0"])
LEAVE_TEXT = "bye"
# Seals (version 4, draft): the fixed key's author seals three messages in `lab`: the sample message, then two
# more (ids 0f..00 and 10..1f, sequences 2 and 3, one and two seconds later).
SEAL_ID = bytes(range(0x20, 0x30))
SEALED_MESSAGES = [
    (MESSAGE_ID, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY),
    (bytes(range(15, -1, -1)), 2, TIMESTAMP_MS + 1000, KIND_TEXT, "two"),
    (bytes(range(0x10, 0x20)), 3, TIMESTAMP_MS + 2000, KIND_TEXT, "three\tand a tab"),
]

# docs/wire-protocol.md's message and seal signatures (made by an earlier run of this script), for --documented.
DOCUMENTED_SIGNATURES = {
    "message": "af858f9dece6ca86e30719dd0c229dcf7283cf93299f35d73101b872597323fde62f3b3bcecaf0ed7b83b331cf49189d586acf23b68de3268a160da3e1397054",
    "seal": "4c85d8df75fb8c89bce8983d7ff04550c91628dd8617e3ac1c239576cd55b319a7a2d7906ce494ecdb0a5865aacbcae7a3ca93e0d0da202ba563d78dfaa90798",
}

# docs/wire-protocol.md, "Test vectors" (v1): this script's v1 layouts must reproduce them.
V1_MESSAGE_FRAME = "000000371001000102030405060708090a0b0c0d0e0f036c61620000000000000001000001a1ee565e00000000000c68c3a96c6c6f0a776f726c64"
V1_ROOM_MEMBERS_FRAME = ("000000600400036c61620001346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b79"
                         "70366f6c696b6c687472326106626f624068321b58020b3139382e31382e302e31320c666538303a3a31256c616e30")
V1_ROOM_LEAVE_FRAME = "0000000b0500036c61620003627965"
V1_HELLO_FRAME = ("0000005201004c4348540001000100100000346c69763763616665746b716d7037696b726b796e3574706733657735783776656d65787a74706b79"
                  "70366f6c696b6c687472326108616c696365406831010463686174")

# P-256 (SEC 2 / FIPS 186-4): y^2 = x^3 - 3x + b over GF(p), base point G of order n.
P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff
B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b
N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551
G = (0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296,
     0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5)
SPKI_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")  # then 04 | X | Y


def openssl(*args, data=None):
    return subprocess.run(["openssl", *args], input=data, check=True, capture_output=True).stdout


# --- byte layouts -------------------------------------------------------------------------------------

def lp1(data):
    assert len(data) <= 0xff
    return struct.pack(">B", len(data)) + data


def lp4(data):
    return struct.pack(">I", len(data)) + data


def frame(kind, flags, payload):
    """length u32 (type + flags + payload) | type u8 | flags u8 | payload"""
    return struct.pack(">IBB", 2 + len(payload), kind, flags) + payload


def hello_payload(min_version, max_version):
    """magic "LCHT" | min_version u16 | max_version u16 | max_payload u32 | peer_id lp1 | name lp1 | capabilities"""
    return (b"LCHT" + struct.pack(">HHI", min_version, max_version, MAX_PAYLOAD) + lp1(HELLO_PEER_ID.encode())
            + lp1(HELLO_NAME.encode()) + struct.pack(">B", 1) + lp1(b"chat"))


def signing_bytes(author_id, room, message_id, sequence, timestamp_ms, kind, body, direct=0):
    """"LCHT-MSG-2" | author_id lp1 | room lp1 | message_id[16] | sequence u64 | timestamp_ms u64 | kind u8 |
    audience u8 (0 the room, 1 direct) | body lp4"""
    assert len(message_id) == 16
    return (b"LCHT-MSG-2" + lp1(author_id.encode()) + lp1(room.encode()) + message_id
            + struct.pack(">QQBB", sequence, timestamp_ms, kind, direct) + lp4(body.encode()))


def membership_bytes(room, member_id, inviter_id, joined_ms):
    """"LCHT-JOIN-2" | room lp1 | member_id lp1 | inviter_id lp1 (empty: none) | joined_ms u64"""
    return b"LCHT-JOIN-2" + lp1(room.encode()) + lp1(member_id.encode()) + lp1(inviter_id.encode()) + struct.pack(">Q", joined_ms)


def leave_bytes(room, member_id, left_ms):
    """"LCHT-LEAVE-2" | room lp1 | member_id lp1 | left_ms u64"""
    return b"LCHT-LEAVE-2" + lp1(room.encode()) + lp1(member_id.encode()) + struct.pack(">Q", left_ms)


def v1_member(peer_id, name, port, addresses):
    """peer_id lp1 | name lp1 | port u16 | address_count u8 | addresses, each lp1"""
    return (lp1(peer_id.encode()) + lp1(name.encode()) + struct.pack(">HB", port, len(addresses))
            + b"".join(lp1(address.encode()) for address in addresses))


def room_members_payload(room, members):
    """room lp1 | count u16 | members; `members` is a list of (v1 member bytes, proof or None), proof =
    (inviter_id, joined_ms, key, signature). With any proof (flag 0x02), each member is followed by has_proof u8
    and, if 1, inviter_id lp1 | joined_ms u64 | member_key[33] | signature[64]."""
    with_proofs = any(proof is not None for _, proof in members)
    out = lp1(room.encode()) + struct.pack(">H", len(members))
    for member, proof in members:
        out += member
        if not with_proofs:
            continue
        if proof is None:
            out += b"\x00"
            continue
        inviter_id, joined_ms, key, signature = proof
        assert len(key) == 33 and len(signature) == 64 and len(inviter_id) in (0, 52)
        out += b"\x01" + lp1(inviter_id.encode()) + struct.pack(">Q", joined_ms) + key + signature
    return out


def room_leave_payload(room, text, signed=None):
    """room lp1 | text lp2, then if signed (flag 0x02) member_id lp1 | left_ms u64 | member_key[33] | signature[64]"""
    out = lp1(room.encode()) + struct.pack(">H", len(text.encode())) + text.encode()
    if signed is not None:
        member_id, left_ms, key, signature = signed
        assert len(member_id) == 52 and len(key) == 33 and len(signature) == 64
        out += lp1(member_id.encode()) + struct.pack(">Q", left_ms) + key + signature
    return out


def v1_message_payload(message_id, room, sequence, timestamp_ms, kind, body):
    """message_id[16] | room lp1 | sequence u64 | timestamp_ms u64 | kind u8 | body lp4"""
    return message_id + lp1(room.encode()) + struct.pack(">QQB", sequence, timestamp_ms, kind) + lp4(body.encode())


def v1_history_record(message_id, sender_id, sender_name, sequence, timestamp_ms, kind, body):
    """message_id[16] | sender_id lp1 | sender_name lp1 | sequence u64 | timestamp_ms u64 | kind u8 | body lp4"""
    return (message_id + lp1(sender_id.encode()) + lp1(sender_name.encode())
            + struct.pack(">QQB", sequence, timestamp_ms, kind) + lp4(body.encode()))


# --- seals: RFC 9162's Merkle tree, by its recursive definition -----------------------------------------

def sha256(data):
    return hashlib.sha256(data).digest()


def leaf_hash(leaf):
    """SHA-256(0x00 | leaf): a leaf is a message's signing bytes."""
    return sha256(b"\x00" + leaf)


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


def split(n):
    """The largest power of two below n (n >= 2)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(hashes):
    """MTH(D[n]) from the leaf hashes (RFC 9162, 2.1.1), n >= 1."""
    if len(hashes) == 1:
        return hashes[0]
    k = split(len(hashes))
    return node_hash(mth(hashes[:k]), mth(hashes[k:]))


def audit_path(m, hashes):
    """PATH(m, D[n]) (RFC 9162, 2.1.3.1): the leaf's sibling first."""
    if len(hashes) == 1:
        return []
    k = split(len(hashes))
    if m < k:
        return audit_path(m, hashes[:k]) + [mth(hashes[k:])]
    return audit_path(m - k, hashes[k:]) + [mth(hashes[:k])]


def root_from_path(leaf, index, count, path):
    """RFC 9162, 2.1.3.2: the root a path leads to, or None."""
    if index >= count:
        return None
    fn, sn, r = index, count - 1, leaf
    for p in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None


def seal_bytes(author_id, seal_id, room, leaf_count, root):
    """"LCHT-SEAL" | author_id lp1 | seal_id[16] | room lp1 | leaf_count u16 | root[32]"""
    assert len(seal_id) == 16 and 1 <= leaf_count <= 256 and len(root) == 32
    return b"LCHT-SEAL" + lp1(author_id.encode()) + seal_id + lp1(room.encode()) + struct.pack(">H", leaf_count) + root


def seal_payload(seal_id, room, key, signature, hashes):
    """seal_id[16] | room lp1 | author_key[33] | signature[64] | leaf_count u16 | leaf_hash[32] * leaf_count"""
    assert len(key) == 33 and len(signature) == 64 and 1 <= len(hashes) <= 256
    return seal_id + lp1(room.encode()) + key + signature + struct.pack(">H", len(hashes)) + b"".join(hashes)


def seal_head(seal_id, author_id, key, signature, leaf_count, root):
    """seal_id[16] | author_id lp1 | author_key[33] | signature[64] | leaf_count u16 | root[32]"""
    assert len(seal_id) == 16 and len(author_id) == 52 and len(key) == 33 and len(signature) == 64 and len(root) == 32
    return seal_id + lp1(author_id.encode()) + key + signature + struct.pack(">H", leaf_count) + root


def seal_proof(seal_id, index, path):
    """seal_id[16] | leaf_index u16 | path_count u8 (<= 8) | path_hash[32] * path_count"""
    assert len(path) <= 8
    return seal_id + struct.pack(">HB", index, len(path)) + b"".join(path)


# --- keys ---------------------------------------------------------------------------------------------

def der_next(data, pos):
    """One DER element at `pos`: (tag, content, position after it)."""
    tag, length, pos = data[pos], data[pos + 1], pos + 2
    if length & 0x80:
        count = length & 0x7f
        length, pos = int.from_bytes(data[pos:pos + count], "big"), pos + count
    return tag, data[pos:pos + length], pos + length


def der_children(content):
    pos, out = 0, []
    while pos < len(content):
        tag, value, pos = der_next(content, pos)
        out.append((tag, value))
    return out


def scalar_of(pem):
    """The private scalar, from the SEC1 ECPrivateKey openssl writes: SEQUENCE { 1, OCTET STRING d, ... }."""
    sec1 = openssl("ec", "-outform", "DER", data=pem)
    tag, content, _ = der_next(sec1, 0)
    fields = der_children(content)
    assert tag == 0x30 and fields[0] == (0x02, b"\x01") and fields[1][0] == 0x04 and len(fields[1][1]) == 32
    return fields[1][1]


def point_add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0] and (a[1] + b[1]) % P == 0:
        return None
    if a == b:
        slope = (3 * a[0] * a[0] - 3) * pow(2 * a[1], -1, P) % P
    else:
        slope = (b[1] - a[1]) * pow(b[0] - a[0], -1, P) % P
    x = (slope * slope - a[0] - b[0]) % P
    return x, (slope * (a[0] - x) - a[1]) % P


def point_mul(k, point):
    result = None
    while k:
        if k & 1:
            result = point_add(result, point)
        point, k = point_add(point, point), k >> 1
    return result


def compress(point):
    """SEC1 compressed: 0x02 (y even) or 0x03 (y odd), then X (32 bytes)."""
    return bytes([2 + (point[1] & 1)]) + point[0].to_bytes(32, "big")


def decompress(key):
    """The point of a 33-byte compressed key: y = sqrt(x^3 - 3x + b), p = 3 mod 4, the root of the key's parity."""
    assert len(key) == 33 and key[0] in (2, 3)
    x = int.from_bytes(key[1:], "big")
    y = pow((x * x * x - 3 * x + B) % P, (P + 1) // 4, P)
    assert y * y % P == (x * x * x - 3 * x + B) % P, "not a point on P-256"
    if y & 1 != key[0] & 1:
        y = P - y
    return x, y


def spki_der(point):
    return SPKI_PREFIX + b"\x04" + point[0].to_bytes(32, "big") + point[1].to_bytes(32, "big")


def peer_id_of(spki):
    return base64.b32encode(hashlib.sha256(spki).digest()).decode().lower().rstrip("=")


# --- signatures ---------------------------------------------------------------------------------------

def raw_signature(der):
    """openssl's DER ECDSA-Sig-Value (SEQUENCE { INTEGER r, INTEGER s }) as raw r[32] | s[32]."""
    tag, content, end = der_next(der, 0)
    fields = der_children(content)
    assert tag == 0x30 and end == len(der) and [t for t, _ in fields] == [0x02, 0x02]
    r, s = (int.from_bytes(v, "big") for _, v in fields)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def der_signature(raw):
    """raw r | s back to DER, for openssl to verify."""
    def integer(value):
        data = value.lstrip(b"\x00") or b"\x00"
        if data[0] & 0x80:
            data = b"\x00" + data
        return b"\x02" + bytes([len(data)]) + data
    body = integer(raw[:32]) + integer(raw[32:])
    return b"\x30" + bytes([len(body)]) + body


def sign(pem_path, data):
    return raw_signature(openssl("dgst", "-sha256", "-sign", pem_path, data=data))


def verified_by_openssl(key, data, raw, directory):
    """Verifies with only what a receiver has: the compressed key, rebuilt into an SPKI file."""
    public, signature = os.path.join(directory, "public.der"), os.path.join(directory, "signature.der")
    with open(public, "wb") as f:
        f.write(spki_der(decompress(key)))
    with open(signature, "wb") as f:
        f.write(der_signature(raw))
    result = subprocess.run(["openssl", "dgst", "-sha256", "-verify", public, "-keyform", "DER", "-signature", signature],
                            input=data, capture_output=True)
    return result.returncode == 0 and b"Verified OK" in result.stdout


def verified_by_arithmetic(key, data, raw):
    """ECDSA verification (SEC 1, 4.1.4) in the P-256 arithmetic above."""
    r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
    if not (0 < r < N and 0 < s < N):
        return False
    e = int.from_bytes(hashlib.sha256(data).digest(), "big")
    w = pow(s, -1, N)
    point = point_add(point_mul(e * w % N, G), point_mul(r * w % N, decompress(key)))
    return point is not None and point[0] % N == r


def check(condition, what):
    if not condition:
        sys.exit(f"wire-vectors: {what}")


def main():
    directory = tempfile.mkdtemp()
    pem_path = os.path.join(directory, "key.pem")
    with open(pem_path, "wb") as f:
        f.write(FIXED_KEY_PEM)

    # The layouts reproduce the v1 vectors.
    v1 = frame(0x10, 0x01, v1_message_payload(MESSAGE_ID, ROOM, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY))
    check(v1.hex() == V1_MESSAGE_FRAME, "the v1 MESSAGE layout does not reproduce the v1 vector")
    check(frame(0x01, 0, hello_payload(1, 1)).hex() == V1_HELLO_FRAME, "the v1 HELLO layout does not reproduce the v1 vector")
    check(frame(0x04, 0, room_members_payload(ROOM, [(v1_member(*V1_MEMBER), None)])).hex() == V1_ROOM_MEMBERS_FRAME,
          "the v1 ROOM_MEMBERS layout does not reproduce the v1 vector")
    check(frame(0x05, 0, room_leave_payload(ROOM, LEAVE_TEXT)).hex() == V1_ROOM_LEAVE_FRAME, "the v1 ROOM_LEAVE layout does not reproduce the v1 vector")

    # The key, two ways: openssl's SPKI and compressed form, and the scalar times G.
    scalar = scalar_of(FIXED_KEY_PEM)
    point = point_mul(int.from_bytes(scalar, "big"), G)
    spki = openssl("pkey", "-pubout", "-outform", "DER", data=FIXED_KEY_PEM)
    check(spki == spki_der(point), "openssl's SPKI is not the scalar's point")
    key = compress(point)
    check(openssl("ec", "-conv_form", "compressed", "-pubout", "-outform", "DER", data=FIXED_KEY_PEM)[-33:] == key,
          "openssl's compressed key differs")
    check(decompress(key) == point, "decompressing the key does not give the point back")
    author_id = peer_id_of(spki)
    check(peer_id_of(spki_der(decompress(key))) == author_id, "the id from the compressed key differs")
    check(len(author_id) == 52, "the id is not 52 characters")

    signed = signing_bytes(author_id, ROOM, MESSAGE_ID, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY)
    documented = "--documented" in sys.argv[1:]
    signature = bytes.fromhex(DOCUMENTED_SIGNATURES["message"]) if documented else sign(pem_path, signed)
    check(len(signature) == 64, "the signature is not 64 bytes")
    check(verified_by_openssl(key, signed, signature, directory), "openssl does not verify the signature")
    check(not verified_by_openssl(key, signed, signature[:32] + signature[:32], directory), "openssl verifies r | r")
    check(verified_by_arithmetic(key, signed, signature), "the P-256 arithmetic does not verify the signature")
    check(not verified_by_arithmetic(key, signed[:-1] + b"X", signature), "a changed body still verifies")

    message_frame = frame(0x10, 0x03, v1_message_payload(MESSAGE_ID, ROOM, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY) + key + signature)
    record = (v1_history_record(MESSAGE_ID, author_id, SENDER_NAME, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY)
              + lp1(key) + lp1(signature))
    unsigned_record = v1_history_record(MESSAGE_ID, author_id, SENDER_NAME, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY) + lp1(b"") + lp1(b"")

    # Membership with provenance: the member signs its own joining and leaving, with the same key and scheme.
    joined = membership_bytes(ROOM, author_id, INVITER_ID, JOINED_MS)
    membership_signature = sign(pem_path, joined)
    check(len(membership_signature) == 64, "the membership signature is not 64 bytes")
    check(verified_by_openssl(key, joined, membership_signature, directory), "openssl does not verify the membership signature")
    check(verified_by_arithmetic(key, joined, membership_signature), "the P-256 arithmetic does not verify the membership signature")
    check(not verified_by_arithmetic(key, membership_bytes(ROOM, author_id, INVITER_ID, JOINED_MS + 1), membership_signature),
          "a membership with a changed time still verifies")
    check(not verified_by_arithmetic(key, membership_bytes("lab2", author_id, INVITER_ID, JOINED_MS), membership_signature),
          "a membership for another room still verifies")
    check(not verified_by_arithmetic(key, membership_bytes(ROOM, author_id, "", JOINED_MS), membership_signature),
          "a membership without its inviter still verifies")
    left = leave_bytes(ROOM, author_id, LEFT_MS)
    leave_signature = sign(pem_path, left)
    check(len(leave_signature) == 64, "the leave signature is not 64 bytes")
    check(verified_by_openssl(key, left, leave_signature, directory), "openssl does not verify the leave signature")
    check(verified_by_arithmetic(key, left, leave_signature), "the P-256 arithmetic does not verify the leave signature")
    check(not verified_by_arithmetic(key, leave_bytes(ROOM, author_id, LEFT_MS + 1), leave_signature), "a leave with a changed time still verifies")
    check(not verified_by_arithmetic(key, leave_bytes("lab2", author_id, LEFT_MS), leave_signature), "a leave for another room still verifies")
    # Contexts keep the schemes apart: neither signature verifies as the other, nor as a message.
    check(not verified_by_arithmetic(key, left, membership_signature), "the membership signature verifies as a leave")
    check(not verified_by_arithmetic(key, signed, leave_signature), "the leave signature verifies as a message")

    # ROOM_MEMBERS with proofs (flag 0x02): the fixed key's id with its proof, then the v1 vector's member without one.
    room_members_frame = frame(0x04, 0x02, room_members_payload(ROOM, [
        (v1_member(author_id, MEMBER_NAME, MEMBER_PORT, MEMBER_ADDRESSES), (INVITER_ID, JOINED_MS, key, membership_signature)),
        (v1_member(*V1_MEMBER), None),
    ]))
    # ROOM_LEAVE with the signed leave (flag 0x02).
    room_leave_frame = frame(0x05, 0x02, room_leave_payload(ROOM, LEAVE_TEXT, (author_id, LEFT_MS, key, leave_signature)))

    # Seals (version 4, draft). The tree, checked on its own first: for 1 to 40 leaves, every path leads to the root,
    # and not from another leaf, nor at another index, nor to the root of one more leaf; three leaves are
    # node(node(l0, l1), l2). (A path may lead to the same root under another count, leaf 0 of 3 as of 4: the seal
    # signs the count with the root.)
    for n in range(1, 41):
        hashes = [leaf_hash(bytes([n, i])) for i in range(n)]
        root, longer = mth(hashes), mth(hashes + [leaf_hash(b"more")])
        for i in range(n):
            path = audit_path(i, hashes)
            check(len(path) <= 8 and root_from_path(hashes[i], i, n, path) == root, f"the path of leaf {i} of {n} does not verify")
            check(n == 1 or root_from_path(hashes[(i + 1) % n], i, n, path) != root, f"leaf {i} of {n} verifies with another leaf")
            check(n == 1 or root_from_path(hashes[i], (i + 1) % n, n, path) != root, f"leaf {i} of {n} verifies at another index")
            check(root_from_path(hashes[i], i, n + 1, path) != longer, f"leaf {i} of {n} verifies in a tree of {n + 1}")
    t = [leaf_hash(b"a"), leaf_hash(b"b"), leaf_hash(b"c")]
    check(mth(t) == node_hash(node_hash(t[0], t[1]), t[2]), "the root of three leaves is not node(node(l0, l1), l2)")

    sealed = [signing_bytes(author_id, ROOM, *message) for message in SEALED_MESSAGES]
    check(sealed[0] == signed, "the first sealed message is not the sample message")
    leaves = [leaf_hash(leaf) for leaf in sealed]
    seal_root = mth(leaves)
    path_1 = audit_path(1, leaves)
    check(path_1 == [leaves[0], leaves[2]], "the path of leaf 1 of 3 is not [leaf 0, leaf 2]")
    check(root_from_path(leaves[1], 1, 3, path_1) == seal_root, "the path of leaf 1 of 3 does not verify")
    sealing = seal_bytes(author_id, SEAL_ID, ROOM, len(leaves), seal_root)
    seal_signature = bytes.fromhex(DOCUMENTED_SIGNATURES["seal"]) if documented else sign(pem_path, sealing)
    check(len(seal_signature) == 64, "the seal signature is not 64 bytes")
    check(verified_by_openssl(key, sealing, seal_signature, directory), "openssl does not verify the seal signature")
    check(verified_by_arithmetic(key, sealing, seal_signature), "the P-256 arithmetic does not verify the seal signature")
    check(not verified_by_arithmetic(key, seal_bytes(author_id, SEAL_ID, ROOM, 2, seal_root), seal_signature),
          "a seal with another leaf count still verifies")
    check(not verified_by_arithmetic(key, seal_bytes(author_id, SEAL_ID, ROOM, 3, mth(leaves[:2] + [leaves[0]])), seal_signature),
          "a seal over another message still verifies")
    check(not verified_by_arithmetic(key, seal_bytes(author_id, SEAL_ID, "lab2", 3, seal_root), seal_signature),
          "a seal for another room still verifies")
    check(not verified_by_arithmetic(key, signed, seal_signature), "the seal signature verifies as a message")
    seal_frame = frame(0x12, 0, seal_payload(SEAL_ID, ROOM, key, seal_signature, leaves))
    # The sample message sealed (flags 0x09: reliable and sealed; leaf 0 of the seal), and a sealed history: the
    # seal's head, then message 2 (leaf 1) with its proof, then the sample message as a signed record (tag 0).
    sealed_message_frame = frame(0x10, 0x09, v1_message_payload(MESSAGE_ID, ROOM, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY)
                                 + SEAL_ID + struct.pack(">H", 0))
    head = seal_head(SEAL_ID, author_id, key, seal_signature, len(leaves), seal_root)
    check(len(head) == 200, "a seal head is not 200 bytes")
    two_id, two_sequence, two_time, two_kind, two_body = SEALED_MESSAGES[1]
    sealed_record = (b"\x02" + v1_history_record(two_id, author_id, SENDER_NAME, two_sequence, two_time, two_kind, two_body)
                     + seal_proof(SEAL_ID, 1, path_1))
    sealed_history = b"\x01" + head + sealed_record + b"\x00" + record

    lines = [
        ("private_key_scalar", scalar.hex()),
        ("public_key_compressed", key.hex()),
        ("public_key_spki_der", spki.hex()),
        ("author_id", author_id),
        ("signing_bytes", signed.hex()),
        ("signature", signature.hex()),
        ("message_frame", message_frame.hex()),
        ("history_record", record.hex()),
        ("history_record_unsigned", unsigned_record.hex()),
        ("hello_frame", frame(0x01, 0, hello_payload(1, 2)).hex()),
        # SYNC_REQUEST: room `lab`, since 1795000000000, runs: the fixed key's id 1-4 and 7-7, the v1 vectors' id 1-1.
        ("sync_request_frame", frame(0x07, 0, lp1(ROOM.encode()) + struct.pack(">QH", TIMESTAMP_MS, 3)
                                     + lp1(author_id.encode()) + struct.pack(">QQ", 1, 4) + lp1(author_id.encode()) + struct.pack(">QQ", 7, 7)
                                     + lp1(b"liv7cafetkqmp7ikrkyn5tpg3ew5x7vemexztpkyp6oliklhtr2a") + struct.pack(">QQ", 1, 1)).hex()),
        # HISTORY_REQUEST with a limit (flag 0x01): room `lab`, since 1795000000000, at most 100 messages.
        ("history_request_limit_frame", frame(0x06, 0x01, lp1(ROOM.encode()) + struct.pack(">QI", TIMESTAMP_MS, 100)).hex()),
        # MESSAGE, direct (flags 0x05: reliable, to some members only), otherwise as the v1 vector.
        ("message_direct_frame", frame(0x10, 0x05, v1_message_payload(MESSAGE_ID, ROOM, SEQUENCE, TIMESTAMP_MS, KIND_TEXT, BODY)).hex()),
        # Membership with provenance: room `lab`, member the fixed key's id, inviter the HELLO vector's id, joined
        # 1795000000000; left 1795000060000.
        ("membership_signing_bytes", joined.hex()),
        ("membership_signature", membership_signature.hex()),
        # ROOM_MEMBERS, flags 0x02: the member `alice@h1` (port 7000, 198.18.0.11) with that proof, then the v1
        # vector's member `bob@h2` without a proof.
        ("room_members_frame", room_members_frame.hex()),
        ("leave_signing_bytes", left.hex()),
        ("leave_signature", leave_signature.hex()),
        # ROOM_LEAVE, flags 0x02: room `lab`, text `bye`, the member's signed leave.
        ("room_leave_frame", room_leave_frame.hex()),
        # Seals (version 4, draft): the leaf hashes of the three sealed messages (the sample message, then ids
        # 0f..00 and 10..1f), their root, the audit path of leaf 1 (its hashes back to back) and its proof form,
        # the seal's signing bytes (seal id 20..2f, room `lab`), a signature over them, and the SEAL frame.
        *((f"seal_leaf_hash_{i}", leaf.hex()) for i, leaf in enumerate(leaves)),
        ("seal_root", seal_root.hex()),
        ("seal_audit_path_1", b"".join(path_1).hex()),
        ("seal_proof_1", seal_proof(SEAL_ID, 1, path_1).hex()),
        ("seal_signing_bytes", sealing.hex()),
        ("seal_signature", seal_signature.hex()),
        ("seal_frame", seal_frame.hex()),
        # MESSAGE, reliable and sealed (flags 0x09): the sample message as leaf 0 of that seal.
        ("sealed_message_frame", sealed_message_frame.hex()),
        # A sealed history: tag 1 and the seal's head (with the signature above), tag 2 and message 2 by `alice@h1`
        # with the proof of leaf 1, then tag 0 and the signed history record above.
        ("seal_head", head.hex()),
        ("sealed_history_record_1", sealed_record.hex()),
        ("sealed_history", sealed_history.hex()),
    ]
    for name, value in lines:
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
