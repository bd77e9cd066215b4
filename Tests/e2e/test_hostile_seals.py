"""Wire version 4's seals against a room member whose seals do not verify (docs/wire-protocol.md, "Seals
(version 4)"; DESIGN.md (in ../shared), "Who is trusted with what": a member speaks for itself only). The member
is Tests/e2e/attack_seals.py, an attacker speaking the wire protocol through wire_client.py's pieces (the
Merkle tree, leaf hashes and seal layouts of scripts/wire-vectors.py, independent of the Swift code); it
negotiates version 4 with a real lanchatd (bob, --auto-accept all) on the simulated LAN and joins by inviting
it. What must hold, as the engine has it (SealBook in Sources/LanchatEngine/Seals.swift,
SessionStateMachine.received(_ seal:) and receive(_ message:) in SessionStateMachine+Seals.swift and
+Delivery.swift, HistoryDecoder in Driver/HistoryResource.swift):
- a SEAL whose signature does not verify for the connection's peer holds nothing for long: over TLS it is
  held unchecked while its signature is checked off the event loop (its messages stored and acknowledged
  meanwhile, never handed on), then dropped with its messages when the check fails, and a security event
  names its author; from then on that author's seals are checked before their messages are stored (as on a
  plaintext link: not held, told once per connection); a sealed MESSAGE whose seal is not held is neither
  stored nor acknowledged;
- a sealed MESSAGE its held seal does not cover (body, room or leaf index) is acknowledged and not stored;
- a SEAL under the id of a held one with other contents is refused;
- a sealed history's record is kept only if its head's signature is its author's and its audit path leads to
  the head's root;
- a version 3 connection that carries a SEAL, a sealed MESSAGE or a sealed history is closed with a protocol
  error.

Each test lists every failure it sees, then asserts them at once, so that one run says all that is wrong."""
import json
import os
import subprocess
import sys
import time

from test_hostile_members import events
from testlan import ROOT, read_line

ATTACKER = os.path.join(ROOT, "Tests", "e2e", "attack_seals.py")
ROOM, OTHER_ROOM = "vault", "annex"
PROTOCOL_ERROR = 2


def solo(lan):
    lan.up(2)
    daemon = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    return daemon, str(daemon.status()["port"])


def argv(lan, port, scenario, *extra):
    return [sys.executable, ATTACKER, lan.addr("h2"), port, scenario, *extra]


def attack(lan, port, scenario, *extra, timeout=90):
    started = time.monotonic()
    result = lan.run("h1", argv(lan, port, scenario, *extra), timeout=timeout)
    out = json.loads(result.stdout.splitlines()[-1])
    print(f"\n{scenario} ({time.monotonic() - started:.1f} s): {json.dumps(out)}")
    return out


def history(lan, room=ROOM):
    messages = lan.lanchat_json("h2", "history", "--room", room)
    for m in messages:
        print(f"  {room}: sender_id {m['sender_id'][:12]} sender {m['sender']!r} signed {m.get('signed')} {m['text']!r}")
    return messages


def texts_by(messages, sender_id):
    """{text: message} of `sender_id`'s text messages."""
    return {m["text"]: m for m in messages if m["sender_id"] == sender_id and m["kind"] != "system"}


def security_event(stream, phrase, timeout):
    """The next security event (parsed) whose text contains `phrase`, or None when none came in time."""
    try:
        line = read_line(stream, timeout, f"a security event saying {phrase!r}", match=lambda l: '"security"' in l and phrase in l)
    except AssertionError:
        return None
    return json.loads(line)


def lines_for(stream, seconds):
    """Every line `stream` gives in the next `seconds` seconds."""
    lines, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            lines.append(read_line(stream, max(0.01, deadline - time.monotonic()), "a line"))
        except AssertionError:
            break
    return lines


class Problems(list):
    def check(self, ok, what):
        if not ok:
            self.append(what)


def check_event(problems, event, attacker_id, *phrases):
    """The event names the attacker (its `name`, and in its text its name and short id: the first 12
    characters of its id) and says each phrase."""
    print(f"security event: {event}")
    problems.check(event is not None, f"no security event saying {phrases!r}")
    if event is None:
        return
    problems.check(event.get("name") == "wire-client", f"the security event is not about wire-client: {event}")
    named = f"wire-client ({attacker_id[:12]})"
    problems.check(named in event["text"] and all(p in event["text"] for p in phrases),
                   f"the security event does not name {named!r} and say {phrases!r}: {event['text']!r}")


def check_stored_signed(problems, mine, texts, author_id):
    for text in texts:
        m = mine.get(text)
        problems.check(m is not None and m["sender_id"] == author_id and m.get("signed") is True,
                       f"{text!r} is not stored, shown signed, under its author: {m}")


def test_a_forged_seal_holds_nothing_and_the_connection_goes_on(lan):
    """Scenario 1. Three SEALs that do not verify, each followed by its sealed MESSAGEs (five in all): one
    signed by carol's key (her key in the frame, not the connection's peer's), one with the member's key
    over other leaf hashes than the frame carries, one with its key for another room. Over TLS the first is
    held unchecked while its signature is checked off the event loop (its messages may be acknowledged and
    stored meanwhile); within seconds none of the five is stored, and bob's events hold a security event
    naming the member (its peer, "wire-client") whose seal "does not verify"; at most one event of each kind
    (the seal dropped once checked; a seal refused where it came, once the member's seals are checked
    first), not one per seal. Then, on the same connection, a genuine SEAL over the first forged message
    again and two new ones: all three acknowledged, stored under the member's id and shown signed; a PING
    is answered; the forged seals' other messages are never stored."""
    bob, port = solo(lan)
    watch = events(lan)
    client = lan.popen("h1", argv(lan, port, "forged-seal", ROOM), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    problems = Problems()
    try:
        first = json.loads(read_line(client.stdout, 60, "the attacker's observations after the forged seals"))
        print(f"\nforged-seal, forged: {json.dumps(first)}")
        assert first["version"] == 4 and first["joined"] and first["pong_after_forged"], first
        attacker = first["id"]
        print(f"acknowledged of the forged seals' messages (held unchecked, then dropped): {first['forged_acked']}")
        check_event(problems, security_event(watch.stdout, "does not verify", 10), attacker, "does not verify")
        # Dropped once their checks answer (milliseconds; polled for up to 10 s).
        deadline = time.monotonic() + 10
        while (stored := texts_by(history(lan), attacker)) and time.monotonic() < deadline:
            time.sleep(0.2)
        problems.check(stored == {}, f"messages of forged seals are still stored: {sorted(stored)}")

        client.stdin.write("go on\n")
        client.stdin.flush()
        last = json.loads(read_line(client.stdout, 30, "the attacker's observations after the genuine seal"))
        print(f"forged-seal, genuine: {json.dumps(last)}")
        genuine = ["forged seal message 1", "genuine sealed message 1", "genuine sealed message 2"]
        problems.check(last["genuine_acked"] == sorted(genuine), f"of the genuinely sealed messages only {last['genuine_acked']} were acknowledged")
        problems.check(last["pong_after"], "no PONG after the genuine seal: the connection did not go on")
        problems.check("forged seal message 1" in last["forged_acked_at_last"], f"the forged message sealed again was not acknowledged: {last}")
        mine = texts_by(history(lan), attacker)
        check_stored_signed(problems, mine, genuine, attacker)
        leaked = sorted(set(mine) & set(first["forged"][1:]))
        problems.check(leaked == [], f"messages only ever under forged seals were stored: {leaked}")
        more = [line for line in lines_for(watch.stdout, 2) if '"security"' in line and "does not verify" in line]
        problems.check(len(more) <= 1 and not any("its messages were removed" in line for line in more),
                       f"more than one security event of a kind for the forged seals of one connection: {more}")
    finally:
        client.kill()
        watch.kill()
    problems.check(bob.process.poll() is None, "the daemon exited")
    assert problems == [], "\n".join(problems)


def test_sealed_messages_the_seal_does_not_cover_are_acknowledged_and_refused(lan):
    """Scenario 2. A genuine SEAL of six leaves in `vault`, then seven sealed MESSAGEs naming it: three
    siblings that match their leaves; one with another body than its leaf's; one sent in `annex` (the
    member is in both rooms) whose leaf is `vault`'s; one naming leaf 4, not its own leaf 3; one naming leaf
    6 of 6. All seven are acknowledged (a refused message is not sent again); only the three siblings are
    stored, shown signed; nothing the member sent is in `annex`; a security event names the member and says
    the message "is not sealed by its author"."""
    bob, port = solo(lan)
    watch = events(lan)
    out = attack(lan, port, "unsealed-leaves", ROOM, OTHER_ROOM)
    problems = Problems()
    assert out["version"] == 4 and out["joined"] and out["joined_other"] and out["pong_after"], out
    attacker = out["id"]
    problems.check(out["acked"] == sorted(out["sent"]), f"not all were acknowledged: {sorted(set(out['sent']) - set(out['acked']))}")
    mine = texts_by(history(lan), attacker)
    siblings = ["sibling one", "sibling two", "sibling three"]
    check_stored_signed(problems, mine, siblings, attacker)
    stray = sorted(set(mine) - set(siblings))
    problems.check(stray == [], f"messages their seal does not cover were stored: {stray}")
    other = texts_by(history(lan, OTHER_ROOM), attacker)
    problems.check(other == {}, f"stored in {OTHER_ROOM}: {sorted(other)}")
    check_event(problems, security_event(watch.stdout, "is not sealed by its author", 10), attacker, "refused a message")
    watch.kill()
    problems.check(bob.process.poll() is None, "the daemon exited")
    assert problems == [], "\n".join(problems)


def test_a_seal_that_reuses_a_held_seals_id_is_refused(lan):
    """Scenario 3. A genuine SEAL (id X) of two leaves and its leaf 0 (stored); then a second SEAL under id X
    over two other messages, itself genuinely signed, and those two messages naming X; then the first
    seal's leaf 1. The second SEAL is refused: its messages are acknowledged (X is held: the first seal) and
    not stored, and a security event names the member and says the seal "reuses the id of another seal";
    both of the first seal's messages are stored, shown signed."""
    bob, port = solo(lan)
    watch = events(lan)
    out = attack(lan, port, "reused-seal", ROOM)
    problems = Problems()
    assert out["version"] == 4 and out["joined"] and out["first_leaf_0_acked"] and out["pong_after"], out
    attacker = out["id"]
    everything = ["first seal, leaf 0", "first seal, leaf 1", "second seal, leaf 0", "second seal, leaf 1"]
    problems.check(out["acked"] == everything, f"acknowledged: {out['acked']}, not all four")
    mine = texts_by(history(lan), attacker)
    check_stored_signed(problems, mine, everything[:2], attacker)
    stored = sorted(set(mine) & set(everything[2:]))
    problems.check(stored == [], f"messages of the seal that reused a held id were stored: {stored}")
    check_event(problems, security_event(watch.stdout, "reuses the id of another seal", 10), attacker, "refused a seal")
    watch.kill()
    problems.check(bob.process.poll() is None, "the daemon exited")
    assert problems == [], "\n".join(problems)


def test_a_sealed_history_keeps_only_records_their_authors_sealed(lan):
    """Scenario 4. bob, the newcomer, asks the member (its inviter) for `vault`'s history, and gets a sealed
    history (kind 4): (a) the member's own record under its genuine seal; (b) carol's (a second key: a
    member who left) under her genuine seal of two leaves, relayed; (c) a record under carol's id whose seal
    head carries the member's key and signature; (d) the second leaf of carol's seal, its body changed
    after she sealed it. bob takes the history (RESOURCE_END complete), keeps (a) and (b), shown signed,
    carol's under her short id "(not a member)", never the label "carol"; refuses (c) and (d): the notice
    says "2 earlier messages" and "2 refused as forged", naming wire-client, as for a signed history
    (test_hostile.py), and a security event names the member. A sealed live message afterwards is stored."""
    bob, port = solo(lan)
    watch = events(lan)
    out = attack(lan, port, "sealed-history", ROOM)
    problems = Problems()
    assert out["version"] == 4 and out["joined"] and out["history_requested"], out
    problems.check(out["accepted"] and out.get("end_status") == 0, f"the sealed history was not taken and imported: {out}")
    attacker, carol = out["id"], out["carol_id"]
    messages = history(lan)
    by_text = {m["text"]: m for m in messages}
    check_stored_signed(problems, by_text, ["my sealed words", "a sealed live message"], attacker)
    check_stored_signed(problems, by_text, ["carol's sealed words"], carol)
    shown = by_text.get("carol's sealed words", {}).get("sender")
    problems.check(shown == f"{carol[:12]} (not a member)", f"carol's relayed record is shown as {shown!r}, not '{carol[:12]} (not a member)'")
    forged = sorted({"words put in carol's mouth", "carol sealed something else", "carol sealed something"} & set(by_text))
    problems.check(forged == [], f"forged records were stored: {forged}")
    notices = [m["text"] for m in messages if m["kind"] == "system"]
    problems.check(any("2 earlier messages" in n and "2 refused as forged" in n and "wire-client" in n for n in notices),
                   f"no notice of 2 earlier messages and 2 refused as forged, naming wire-client: {notices}")
    check_event(problems, security_event(watch.stdout, "forged message", 10), attacker, "relayed 2 forged messages")
    problems.check(out["live_acked"] and out["pong_after"], f"the connection did not go on after the history: {out}")
    watch.kill()
    problems.check(bob.process.poll() is None, "the daemon exited")
    assert problems == [], "\n".join(problems)


def test_seals_on_a_version_3_connection_close_it(lan):
    """Scenario 5. On a connection negotiated at version 3 (the member offers at most 3), after joining
    `vault`: a genuine SEAL; on a second connection, a sealed MESSAGE; on a third, a RESOURCE_OFFER of a
    sealed history (kind 4). Each connection is closed with GOODBYE reason 2 (protocol error) saying the
    frame "needs protocol version 4" (the SEAL's: "SEAL needs protocol version 4"); nothing is stored;
    a version 4 connection afterwards still negotiates 4 and answers a PING."""
    bob, port = solo(lan)
    out = attack(lan, port, "below-version-4", ROOM)
    problems = Problems()
    for name in ("seal", "sealed_message", "sealed_history_offer"):
        result = out[name]
        problems.check(result.get("version") == 3 and result.get("pong_before"), f"{name}: no version 3 connection that answered a PING first: {result}")
        goodbye = result.get("goodbye") or {}
        problems.check(goodbye.get("reason") == PROTOCOL_ERROR and "needs protocol version 4" in goodbye.get("text", ""),
                       f"{name}: no GOODBYE for a protocol error saying it needs protocol version 4: {result}")
        problems.check(result.get("closed"), f"{name}: the connection was not closed: {result}")
    problems.check("SEAL needs protocol version 4" in ((out["seal"].get("goodbye") or {}).get("text") or ""),
                   f"the SEAL's GOODBYE does not say 'SEAL needs protocol version 4': {out['seal']}")
    problems.check(out["seal"].get("joined"), f"the version 3 member did not join: {out['seal']}")
    problems.check(texts_by(history(lan), out["id"]) == {}, "something sent on a version 3 connection was stored")
    after = out["version_4_after"]
    problems.check(after.get("version") == 4 and after.get("pong"), f"no version 4 connection with a PING answered afterwards: {after}")
    problems.check(bob.process.poll() is None, "the daemon exited")
    assert problems == [], "\n".join(problems)
