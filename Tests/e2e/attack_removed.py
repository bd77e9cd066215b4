"""A member an administrator removed tries to come back through another member (issue 28, item 1),
speaking the wire protocol (docs/wire-protocol.md) through Tests/e2e/wire_client.py's pieces.

    python3 attack_removed.py CREATOR_HOST CREATOR_PORT OTHER_HOST OTHER_PORT ROOM

1. We invite the creator (it auto-accepts) into ROOM, a room of that name it made: we are a member.
   We print {"marker": "member", "id": ...} and wait for a line on stdin (the test removes us meanwhile).
2. We connect to the other member (it auto-accepts too) and invite it into ROOM. Before the fix it
   answered "accepted" and asked us for the room's history, which we answered with records of ours
   written after our removal. Now it must refuse, and ask nothing. We print what it answered."""
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import (  # noqa: E402
    OUTCOMES, chunk, handshake, identity, invite, join, now_ms, offer, proven_members, signed_history_record,
)

MAX_VERSION = 3
INVITE_REPLY, HISTORY_REQUEST = 0x03, 0x06
RESOURCE_ACCEPT, RESOURCE_END = 0x41, 0x43


def watch(c, seconds, seen, key, peer_id, room):
    """Reads frames for `seconds`, answering PINGs, and a HISTORY_REQUEST with a signed history of ours
    (what a removed member would want a newcomer to keep). Counts each frame type in `seen`."""
    def history_of_ours(got):
        if got[0] == HISTORY_REQUEST:
            records = signed_history_record(room, peer_id, "wire-client", 50, "written after my removal", key=key)
            rid = os.urandom(16)
            c.send(offer(rid, b"history", records, room=room.encode(), kind=2))
            answer = c.frames_until((RESOURCE_ACCEPT, RESOURCE_END), timeout=5)
            if answer is not None and answer[0] == RESOURCE_ACCEPT:
                c.send(chunk(rid, 0, records))

    if c.pump(seconds, seen, on_frame=history_of_ours) == ("closed",):
        seen["closed"] = 1


def main():
    creator_host, creator_port, other_host, other_port, room = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
    key, cert, peer_id = identity(tempfile.mkdtemp())
    out = {"id": peer_id}
    creator, out["version"] = handshake(creator_host, creator_port, key, cert, peer_id, MAX_VERSION)
    out["joined"] = join(creator, room, timeout=30)
    # Our own signed membership (we made our side of the room: no inviter), so the creator introduces us.
    creator.send(proven_members(room, [(peer_id, "wire-client", [], ("", now_ms(), key))]))
    seen = {}
    watch(creator, 2, seen, key, peer_id, room)
    print(json.dumps({"marker": "member", "id": peer_id, "joined": out["joined"], "version": out["version"]}), flush=True)
    sys.stdin.readline()  # the test removes us now

    other, _ = handshake(other_host, other_port, key, cert, peer_id, MAX_VERSION)
    other.send(invite(room))
    got = other.frames_until(INVITE_REPLY, timeout=30)
    if got is not None and got[0] == INVITE_REPLY:
        payload = got[2]
        out["outcome"] = OUTCOMES.get(payload[16], payload[16])
        reason_length = struct.unpack(">H", payload[17:19])[0] if len(payload) >= 19 else 0
        out["reason"] = payload[19:19 + reason_length].decode("utf-8", "replace")
    seen = {}
    watch(other, 4, seen, key, peer_id, room)
    out["history_requested"] = seen.get(f"0x{HISTORY_REQUEST:02x}", 0) > 0
    out["marker"] = "done"
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
