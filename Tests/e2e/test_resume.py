"""Resumable files (issue 4): a 1 GiB file arrives identical although the receiving daemon is killed
halfway, the sending daemon is killed halfway, or the cable is pulled for 20 s; only what was in
flight is sent twice. The sender's link is capped (tc tbf) so that "halfway" can be hit, then freed.

Bytes sent twice are measured twice: by the sender (`resent`: bytes handed to the connection again)
and independently by the kernel (bytes the sender's interface transmitted, against the file size)."""
import json
import os
import signal
import time

import pytest

from test_files import pair, sha
from testlan import BIN, wait_for

SIZE = 1 << 30


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("resume") / "disk image.bin")
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(SIZE >> 20):
            # Every MiB differs (a block repeated at the wrong offset would not pass the check).
            f.write(i.to_bytes(8, "little") + block[8:])
    return path, sha(path)


def tx_bytes(lan, host):
    """Bytes the host's interface transmitted (the kernel's count, in the host's network namespace)."""
    for line in lan.run(host, ["cat", "/proc/net/dev"]).stdout.splitlines():
        name, _, fields = line.partition(":")
        if name.strip() == "lan0":
            return int(fields.split()[8])
    raise AssertionError("no lan0 in /proc/net/dev")


def incoming(lan, host):
    return [t for t in lan.lanchat_json(host, "transfers") if t["direction"] == "incoming"]


def outgoing(lan, host):
    return [t for t in lan.lanchat_json(host, "transfers") if t["direction"] == "outgoing"]


def start_halfway(lan, big_file):
    """Sends the file from alice (capped at 800 Mbit/s) and returns once bob holds 30-70% of it."""
    downloads = os.path.join(lan.dir, "downloads")
    a, b = pair(lan, downloads)
    lan.script("rate", "h1", "800mbit")
    before = tx_bytes(lan, "h1")
    sender = lan.popen("h1", [os.path.join(BIN, "lanchat"), "send-file", "--to", "bob", big_file[0]],
                       stdout=open(os.path.join(lan.dir, "send-file.out"), "w"), stderr=open(os.path.join(lan.dir, "send-file.err"), "w"))
    wait_for(lambda: any(t["done"] >= 0.3 * SIZE for t in incoming(lan, "h2")), timeout=120, interval=0.2, what="bob holds 30%")
    done = max(t["done"] for t in incoming(lan, "h2"))
    assert done < 0.7 * SIZE, f"too late to interrupt: {done}"
    return a, b, downloads, sender, before


def finish(lan, big_file, downloads, before, sender_host="h1"):
    lan.script("rate", sender_host, "clear")
    target = os.path.join(downloads, "disk image.bin")
    wait_for(lambda: any(t["state"] == "complete" for t in outgoing(lan, sender_host)), timeout=240, interval=0.5,
             what="the sender says complete")
    assert os.path.exists(target) and sha(target) == big_file[1]
    assert [n for n in os.listdir(downloads) if n != "disk image.bin"] == [], os.listdir(downloads)
    done = [t for t in outgoing(lan, sender_host) if t["state"] == "complete"][0]
    resent = done.get("resent", 0)
    wire = tx_bytes(lan, sender_host) - before
    print(f"\nresent by the sender: {resent / 2**20:.1f} MiB ({100 * resent / SIZE:.2f} %); "
          f"bytes on the sender's interface: {wire / SIZE:.3f} x the file")
    assert resent < 0.02 * SIZE, resent
    # TCP/IP, TLS and framing add about 4 %; sending the file twice would be 2x.
    assert wire < 1.10 * SIZE, wire
    return done


def test_receiver_killed_halfway_resumes(lan, big_file):
    a, b, downloads, sender, before = start_halfway(lan, big_file)
    b.stop(signal.SIGKILL)
    wait_for(lambda: any(t["state"] == "waiting" for t in outgoing(lan, "h1")), timeout=15, what="alice waits for bob")
    assert [n for n in os.listdir(downloads) if n.endswith(".part")], "the partial file is kept"
    b.start()
    finish(lan, big_file, downloads, before)
    assert sender.wait(timeout=30) == 0, open(os.path.join(lan.dir, "send-file.err")).read()


def test_sender_killed_halfway_resumes(lan, big_file):
    a, b, downloads, sender, before = start_halfway(lan, big_file)
    a.stop(signal.SIGKILL)
    wait_for(lambda: any(t["state"] == "interrupted" for t in incoming(lan, "h2")), timeout=15, what="bob sees it interrupted")
    assert sender.wait(timeout=10) != 0   # the client lost its daemon
    a.start()
    done = finish(lan, big_file, downloads, before)
    assert done["id"] in {t["id"] for t in incoming(lan, "h2") if t["state"] == "complete"}


def test_link_down_for_20_seconds_resumes(lan, big_file):
    a, b, downloads, sender, before = start_halfway(lan, big_file)
    lan.script("link", "h2", "down")
    wait_for(lambda: any(t["state"] == "interrupted" for t in incoming(lan, "h2")), timeout=15, what="bob sees it interrupted")
    time.sleep(20)
    lan.script("link", "h2", "up")
    finish(lan, big_file, downloads, before)
    assert sender.wait(timeout=30) == 0


@pytest.mark.parametrize("side", ["receiver", "sender"])
def test_cancelling_from_either_side_ends_both_and_removes_the_partial_file(lan, big_file, side):
    a, b, downloads, sender, before = start_halfway(lan, big_file)
    host = "h2" if side == "receiver" else "h1"
    transfer = (incoming if side == "receiver" else outgoing)(lan, host)[0]
    out = lan.lanchat(host, "cancel", transfer["id"][:8]).stdout
    assert out.startswith("cancelled disk image.bin")
    wait_for(lambda: [t["state"] for t in outgoing(lan, "h1")] == ["cancelled"], what="the sender says cancelled")
    wait_for(lambda: [t["state"] for t in incoming(lan, "h2")] == ["cancelled"], what="the receiver says cancelled")
    by = "cancelled by the receiver" if side == "receiver" else "cancelled by the sender"
    other = outgoing(lan, "h1")[0] if side == "receiver" else incoming(lan, "h2")[0]
    assert other["error"] == by, other
    wait_for(lambda: os.listdir(downloads) == [], what="no partial file")
    assert sender.wait(timeout=10) == 1
    last = json.loads(open(os.path.join(lan.dir, "send-file.out")).read().splitlines()[-1])
    assert last["state"] == "cancelled"
    # Unknown ids are a clear error.
    bad = lan.lanchat(host, "cancel", "ffffffff", check=False)
    assert bad.returncode == 1 and "no active transfer" in bad.stderr


def test_100_mib_arrive_identical_with_5_percent_loss_both_ways(lan):
    """5% of the packets each host sends are dropped (nftables, real TCP retransmissions). The 20 ms
    delay of the issue needs sch_netem, which this kernel lacks (test_testlan.py skips its netem test
    for the same reason); where netem exists, it is added too."""
    downloads = os.path.join(lan.dir, "downloads")
    pair(lan, downloads)
    netem = lan.script("netem", "h1", "delay", "20ms", check=False).returncode == 0
    if netem:
        lan.script("netem", "h2", "delay", "20ms")
    lan.script("loss", "h1", "5")
    lan.script("loss", "h2", "5")
    source = os.path.join(lan.dir, "lossy.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(100 << 20))
    started = time.monotonic()
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, check=False, timeout=600)
    elapsed = time.monotonic() - started
    print(f"\n100 MiB with 5% loss each way{' and 20 ms delay' if netem else ' (no netem: no delay)'}: {elapsed:.1f} s")
    assert result.returncode == 0, result.stderr + result.stdout[-2000:]
    target = os.path.join(downloads, "lossy.bin")
    assert sha(target) == sha(source)
