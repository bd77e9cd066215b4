"""Files that stay in a room (issue 13, item 4): a file shared while a member was offline is fetched by
it later from a member other than the sender (the sender stopped), and checked against the SHA-256 its
announcement carries; a copy that does not match is refused and the next member asked; images are
marked; a member that declined to keep shared files fetches on demand and keeps nothing."""
import hashlib
import json
import os

from testlan import wait_for
from test_rooms import members, three_in_lab


def files(lan, host, room="lab"):
    return {f["name"]: f for f in lan.lanchat_json(host, "files", room)}


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def fetch(lan, host, file_id, directory, check=True):
    """`lanchat fetch ID --to DIR --json` on `host`: the progress lines, parsed."""
    result = lan.lanchat(host, "fetch", file_id[-8:], "--to", directory, "--json", check=check, timeout=120)
    return result, [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_a_file_shared_while_a_member_was_away_is_fetched_later_from_another_member_and_verified(lan):
    daemons = three_in_lab(lan)
    daemons["h3"].stop()  # carol is away when the files are shared

    work = os.path.join(lan.dir, "h1", "files")
    os.makedirs(work)
    photo = os.path.join(work, "photo.png")
    with open(photo, "wb") as handle:  # a PNG by its first bytes (the content decides, not the name)
        handle.write(b"\x89PNG\r\n\x1a\n" + os.urandom(3 << 20))
    notes = os.path.join(work, "notes.bin")
    with open(notes, "wb") as handle:
        handle.write(os.urandom(200_000))
    shared = lan.lanchat_json("h1", "share", "lab", photo, notes)
    by_name = {f["name"]: f for f in shared}
    assert by_name["photo.png"]["sha256"] == sha256(photo) and by_name["photo.png"]["image"] is True, shared
    assert by_name["photo.png"]["type"] == "image/png" and by_name["photo.png"]["held"] is True, shared
    assert by_name["notes.bin"]["sha256"] == sha256(notes) and by_name["notes.bin"]["image"] is False, shared
    assert by_name["notes.bin"]["size"] == 200_000, shared

    # Bob keeps shared files (the default): he fetches both as they are announced.
    wait_for(lambda: all(f["held"] for f in files(lan, "h2").values()) and len(files(lan, "h2")) == 2,
             timeout=30, what="bob to keep both shared files")
    listing = lan.lanchat("h2", "files", "lab").stdout
    assert "[image]" in listing and "photo.png" in listing and "alice" in listing, listing
    history = lan.lanchat("h2", "history", "--room", "lab").stdout
    assert "alice shared photo.png (3.1 MB, image): lanchat fetch " + by_name["photo.png"]["id"][-8:] in history, history

    # The sender stops; carol comes back and learns of the files (relayed by bob: signed by alice).
    daemons["h1"].stop()
    daemons["h3"].start()
    wait_for(lambda: members(lan, "h3").get("bob", {}).get("state") == "connected", timeout=30, what="carol to reconnect to bob")
    wait_for(lambda: len(files(lan, "h3")) == 2, timeout=30, what="carol to learn of the shared files")
    assert not any(f["held"] for f in files(lan, "h3").values()), files(lan, "h3")  # older announcements wait to be asked for

    target = os.path.join(lan.dir, "h3", "fetched")
    result, lines = fetch(lan, "h3", by_name["photo.png"]["id"], target)
    done = lines[-1]
    assert done["state"] == "complete" and done["peer"] == "bob", lines
    assert done["path"] == os.path.join(target, "photo.png") and sha256(done["path"]) == sha256(photo), done
    assert files(lan, "h3")["photo.png"]["held"] is True  # carol keeps it too now, and serves it

    # Asked again: copied from what carol keeps, under a free name.
    result, lines = fetch(lan, "h3", by_name["photo.png"]["id"], target)
    assert lines[-1]["state"] == "complete" and lines[-1]["path"] == os.path.join(target, "photo (1).png"), lines
    assert sha256(lines[-1]["path"]) == sha256(photo)

    # Dave joins later (invited by bob) and keeps no shared files: he learns of them from bob's history.
    daemons["h3"].stop()  # only bob can serve notes.bin now: carol never fetched it
    lan.start_daemon("h4", name="dave", extra=["--auto-accept", "all", "--shared-files", "on-demand"])
    wait_for(lambda: any(p["name"] == "dave" and p["addresses"] for p in lan.peers("h2")), timeout=20, what="bob to see dave")
    assert lan.lanchat_json("h2", "invite", "dave", "--room", "lab", "--wait")["outcome"] == "accepted"
    wait_for(lambda: len(files(lan, "h4")) == 2, timeout=20, what="dave to see the shared files in bob's history")

    # Bob's copy of notes.bin goes bad on his disk: dave refuses it (its SHA-256 differs) and says so.
    kept = os.path.join(lan.dir, "h2", "state", "shared", by_name["notes.bin"]["sha256"])
    with open(kept, "r+b") as handle:
        handle.seek(1000)
        handle.write(b"tampered")
    dave_dir = os.path.join(lan.dir, "h4", "fetched")
    result, lines = fetch(lan, "h4", by_name["notes.bin"]["id"], dave_dir, check=False)
    assert result.returncode != 0, lines
    assert "bob" in result.stderr and "sha-256" in result.stderr.lower(), result.stderr
    assert not os.path.exists(os.path.join(dave_dir, "notes.bin")), os.listdir(dave_dir)

    # Carol is back; dave fetches the photo from bob or carol (both keep it), checked, and keeps nothing.
    os.unlink(kept)
    daemons["h3"].start()
    wait_for(lambda: members(lan, "h4").get("carol", {}).get("state") == "connected", timeout=30, what="dave to connect to carol")
    result, lines = fetch(lan, "h4", by_name["photo.png"]["id"], dave_dir)
    assert lines[-1]["state"] == "complete" and lines[-1]["peer"] in ("bob", "carol"), lines
    assert sha256(lines[-1]["path"]) == sha256(photo)
    assert files(lan, "h4")["photo.png"]["held"] is False, files(lan, "h4")  # on demand: not kept
    assert not os.path.exists(os.path.join(lan.dir, "h4", "state", "shared", by_name["photo.png"]["sha256"]))

    # Clear errors: an id nobody shared; a file no connected member holds.
    missing = lan.lanchat("h4", "fetch", "ffffffff", check=False)
    assert missing.returncode != 0 and "no shared file has the id ffffffff" in missing.stderr, missing.stderr
    result, lines = fetch(lan, "h4", by_name["notes.bin"]["id"], dave_dir, check=False)
    assert result.returncode != 0 and "could send it" in result.stderr, result.stderr
