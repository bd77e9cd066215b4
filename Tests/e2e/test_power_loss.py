"""What "acknowledged" promises survives a power loss (issue 11, item 9).

The receiver's state directory (history database, identity key, known peers) and its download
directory live on an ext4 file system in a loop device, mounted with `commit=60` so that nothing
reaches the device by the journal's own timer during the test. Once the receiver has stored (and so
acknowledged) every message and said a file was received, the daemon is frozen (SIGSTOP) and the
loop device's backing file is copied: the copy holds exactly what the daemon's writes had made reach
the device, and not what still sat in the page cache. That copy is what a power loss would leave.
A daemon started on the copy must have every acknowledged message, the received file intact, and the
same identity.

What this does not model: a disk that reorders or drops writes it already took without a flush (the
loop device's writes land in the backing file's page cache, which the copy reads)."""
import hashlib
import os
import shutil
import signal

import pytest

from testlan import wait_for

MESSAGES = 40


def mount(lan, host, image, target):
    os.makedirs(target, exist_ok=True)
    lan.run(host, ["mount", "-o", "loop,commit=60", image, target])


def unmount(lan, host, target):
    lan.run(host, ["umount", target], check=False)


@pytest.mark.skipif(shutil.which("mkfs.ext4") is None, reason="needs mkfs.ext4 (e2fsprogs)")
def test_acknowledged_messages_and_received_files_survive_a_power_loss(lan):
    lan.up(2)
    image = os.path.join(lan.dir, "bob-disk.img")
    copy = os.path.join(lan.dir, "bob-disk-after-power-loss.img")
    with open(image, "wb") as f:
        # 128 MiB: a received file leaves 64 MiB free at least (TransferLimits.keptFree).
        f.truncate(128 << 20)
    lan.run("h2", ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image])
    state = os.path.join(lan.dir, "h2", "state")
    mount(lan, "h2", image, state)
    try:
        downloads = os.path.join(state, "downloads")
        alice = lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
        bob = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all", "--download-dir", downloads])
        bob_id = bob.status()["id"]
        wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="discovery")
        assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"

        source = os.path.join(lan.dir, "report.bin")
        with open(source, "wb") as f:
            f.write(os.urandom(3 << 20))
        digest = hashlib.sha256(open(source, "rb").read()).hexdigest()
        lines = lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=120).stdout.splitlines()
        assert '"complete"' in lines[-1], lines[-1]
        texts = [f"acknowledged {i}" for i in range(MESSAGES)]
        for text in texts:
            lan.lanchat("h1", "send", "--room", "lab", text)

        def stored():
            return {m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab", "--limit", "500")}
        # Stored means committed; the acknowledgement goes out only once the commit is on disk (synced on
        # the store's sync thread, with whatever else committed meanwhile: not at once). A send of bob's own
        # returns only after its sync, which also covers every commit before it: once it returns, every
        # message bob stored was synced, and acknowledged. (Without that sync, a checkpoint 2 s after a write
        # syncs them too, sooner or later: this waits for no timer.)
        wait_for(lambda: set(texts) <= stored(), timeout=30, interval=0.05, what="bob stored every message")
        lan.lanchat("h2", "send", "--room", "lab", "synced")

        # The power goes: bob's daemon does nothing more, and the device keeps what reached it.
        pid = str(bob.pid())
        lan.run("h2", ["kill", "-STOP", pid])
        shutil.copyfile(image, copy)
        lan.run("h2", ["kill", "-KILL", pid])
        # nsenter, the daemon's parent, stopped itself when its child stopped: it reaps it once continued.
        bob.process.send_signal(signal.SIGCONT)
        bob.process.wait(timeout=15)
    finally:
        unmount(lan, "h2", state)

    mount(lan, "h2", copy, state)
    try:
        bob = lan.start_daemon("h2", name="bob", extra=["--download-dir", downloads])
        assert bob.status()["id"] == bob_id, "the identity key was lost"
        after = {m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab", "--limit", "500")}
        lost = [t for t in texts if t not in after]
        print(f"\nafter the power loss: {MESSAGES - len(lost)} of {MESSAGES} acknowledged messages kept")
        assert lost == [], f"acknowledged but lost: {lost}"
        # The file system is mounted in h2's mount namespace only: look at it from there.
        listing = lan.run("h2", ["ls", "-A", downloads], check=False)
        assert listing.stdout.split() == ["report.bin"], (listing.stdout, listing.stderr)
        assert lan.run("h2", ["sha256sum", os.path.join(downloads, "report.bin")]).stdout.split()[0] == digest
        assert "lab" in {r["room"] for r in lan.lanchat_json("h2", "rooms")}
        bob.stop()
        alice.stop()
    finally:
        unmount(lan, "h2", state)
