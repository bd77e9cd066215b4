"""Publishes hostile _chat-service._tcp services with hand-built mDNS responses, things avahi-publish
refuses to send: instance names that are not UTF-8, control characters, oversized TXT records; or, with
--flood N, N lanchat-looking services at once (fresh ids, all on this host).
With --contest PREFIX SECONDS it answers, for SECONDS, every probe for an instance whose name starts
with PREFIX (and has no "[") with a record of its own for that name, as a host that holds the name and
each "PREFIX #N" Avahi renames to would: such a registration never completes. With TAG_LENGTH it also
answers for names tagged "PREFIX [tag]" (and their "#N") whose tag has at most TAG_LENGTH characters.
Run on a simulated host without avahi (it binds UDP 5353).
Usage: mdns_raw.py ADDRESS HOSTNAME [--flood N | --contest PREFIX SECONDS [TAG_LENGTH]]"""
import base64
import os
import socket
import struct
import sys
import time

GROUP = ("224.0.0.251", 5353)


def name(labels):
    out = b""
    for label in labels:
        out += bytes([len(label)]) + label
    return out + b"\0"


def record(owner, rtype, rdata, cache_flush=True, ttl=120):
    klass = 0x8001 if cache_flush else 0x0001
    return owner + struct.pack("!HHIH", rtype, klass, ttl, len(rdata)) + rdata


def txt(items):
    return b"".join(bytes([len(i)]) + i for i in items) or b"\0"


def services():
    service = [b"_chat-service", b"_tcp", b"local"]
    yield [b"\xff\xfe-not-utf8"] + service, [b"v=1", b"name=\xff\xfe"]
    yield [b"ctl\x1b[31m\x07name"] + service, [b"v=1", b"id=" + b"a" * 52, b"name=\x1b]0;pwned\x07"]
    yield [b"oversized-txt"] + service, [b"v=1"] + [b"k" + bytes([48 + i]) + b"=" + b"x" * 252 for i in range(5)]
    yield [b"garbage-txt"] + service, [b"\x00\x01\x02", b"=", b"==", b"v"]


def flood(count):
    service = [b"_chat-service", b"_tcp", b"local"]
    for n in range(count):
        peer_id = base64.b32encode(os.urandom(32)).decode().lower().rstrip("=").encode()
        yield [b"flood-%d" % n] + service, [b"v=1", b"id=" + peer_id, b"name=flood-%d" % n, b"enc=required"]


def read_name(packet, offset):
    """The labels of the name at `offset` (following compression pointers) and the offset after it."""
    labels, end, hops = [], None, 0
    while True:
        length = packet[offset]
        if length & 0xC0 == 0xC0:
            if end is None:
                end = offset + 2
            offset = ((length & 0x3F) << 8) | packet[offset + 1]
            hops += 1
            if hops > 32:
                raise ValueError("pointer loop")
        elif length == 0:
            return labels, (end if end is not None else offset + 1)
        else:
            labels.append(packet[offset + 1:offset + 1 + length])
            offset += 1 + length


def contested(label, prefix, tag_length):
    """Whether the squatter claims an instance label: PREFIX..., untagged or with a short enough tag."""
    if not label.startswith(prefix):
        return False
    if b"[" not in label:
        return True
    tag = label.split(b"[", 1)[1].split(b"]", 1)[0]
    return len(tag) <= tag_length


def contest(sock, address, target, prefix, seconds, tag_length=-1):
    """Answers probes (queries with records in their authority section) for our service type's
    instances named PREFIX... with an SRV record of our own: the prober sees the name taken."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(GROUP[0]) + socket.inet_aton(address))
    service = [b"_chat-service", b"_tcp", b"local"]
    deadline = time.monotonic() + seconds
    answered = set()
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            packet, _ = sock.recvfrom(9000)
        except socket.timeout:
            continue
        try:
            flags, questions, _, authority = struct.unpack("!HHHH", packet[2:10])
            if flags & 0x8000 or not authority:
                continue  # a response, or a query that is not a probe
            offset = 12
            for _ in range(questions):
                labels, offset = read_name(packet, offset)
                offset += 4
                if labels[1:] == service and contested(labels[0], prefix, tag_length):
                    srv = record(name(labels), 33, struct.pack("!HHH", 0, 0, 9) + target)
                    sock.sendto(struct.pack("!HHHHHH", 0, 0x8400, 0, 1, 0, 0) + srv, GROUP)
                    if labels[0] not in answered:
                        answered.add(labels[0])
                        print(labels[0].decode(errors="replace"), flush=True)
        except (IndexError, ValueError, struct.error):
            continue


def main():
    address, host = sys.argv[1], sys.argv[2]
    many = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--flood" else None
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", 5353))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(address))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    target = name([host.encode(), b"local"])
    if len(sys.argv) > 5 and sys.argv[3] == "--contest":
        return contest(sock, address, target, sys.argv[4].encode(), float(sys.argv[5]),
                       int(sys.argv[6]) if len(sys.argv) > 6 else -1)
    answers = []
    port = 40000
    for labels, items in (flood(many) if many else services()):
        instance = name(labels)
        answers.append(record(name([b"_chat-service", b"_tcp", b"local"]), 12, instance, cache_flush=False))
        answers.append(record(instance, 33, struct.pack("!HHH", 0, 0, port) + target))
        answers.append(record(instance, 16, txt(items)))
        port += 1
    answers.append(record(target, 1, socket.inet_aton(address)))
    # One packet per service (plus the address) keeps each under the 1500-byte MTU.
    packets = []
    per = 3
    for index in range(0, len(answers) - 1, per):
        chunk = answers[index:index + per] + [answers[-1]]
        packets.append(struct.pack("!HHHHHH", 0, 0x8400, 0, len(chunk), 0, 0) + b"".join(chunk))
    for _ in range(3):
        for index, packet in enumerate(packets):
            sock.sendto(packet, GROUP)
            if index % 50 == 49:
                time.sleep(0.02)  # (a burst past the socket buffers would only be dropped here)
        time.sleep(0.3)


if __name__ == "__main__":
    main()
