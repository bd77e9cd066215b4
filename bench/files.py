"""File and history benchmarks on the simulated LAN, each next to a baseline from the same run.

1. A file (default 1 GiB) from h1 to h2, to disk, encryption on: `lanchat send-file` end to end (SHA-256
   on both sides included) and the transfer phase alone, next to `socat` moving the same file over raw
   TCP between the same hosts.
2. History to a newcomer: alice has N messages (default 100,000) in a room; she invites bob; time from
   the invitation until bob's history has them.

Usage (root): python3 bench/files.py [--mib 1024] [--messages 100000] [--json]"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "e2e"))
from testlan import BIN, TestLAN, wait_for  # noqa: E402


def file_transfer(lan, mib):
    downloads = os.path.join(lan.dir, "downloads")
    lan.start_daemon("h1", name="alice", extra=["--log-level", "warning", "--auto-accept", "all"])
    lan.start_daemon("h2", name="bob", extra=["--log-level", "warning", "--auto-accept", "all", "--download-dir", downloads])
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "files", "--wait")["outcome"] == "accepted"
    source = os.path.join(lan.dir, "big.bin")
    with open(source, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    subprocess.run(["sync"])
    # Baseline: socat, raw TCP, to disk.
    target = os.path.join(lan.dir, "socat.out")
    listener = lan.popen("h2", ["socat", "-u", "TCP-LISTEN:9100,reuseaddr", f"OPEN:{target},creat,trunc"])
    time.sleep(0.5)
    start = time.monotonic()
    lan.run("h1", ["socat", "-u", f"OPEN:{source}", f"TCP:{lan.addr('h2')}:9100"], timeout=600)
    listener.wait(timeout=600)
    socat_s = time.monotonic() - start
    os.remove(target)
    start = time.monotonic()
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=900)
    total_s = time.monotonic() - start
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["state"] == "complete", last
    size = mib << 20
    return {"mib": mib, "socat_mb_s": size / socat_s / 1e6, "lanchat_total_mb_s": size / total_s / 1e6,
            "lanchat_transfer_mb_s": last["rate"] / 1e6}


def history(lan, messages):
    config = os.path.join(lan.dir, "alice.conf")
    with open(config, "w") as f:
        f.write(f"history-for-newcomers = {messages}\n")
    alice = lan.start_daemon("h3", name="hist-alice", tag="h3", extra=["--log-level", "warning", "--auto-accept", "all", "--config", config])
    lan.start_daemon("h4", name="hist-bob", tag="h4", extra=["--log-level", "warning", "--auto-accept", "all"])
    carol = lan.start_daemon("h5", name="hist-carol", tag="h5", extra=["--log-level", "warning", "--auto-accept", "all"])
    wait_for(lambda: {"hist-bob", "hist-carol"} <= {p["name"] for p in lan.peers("h3") if p["addresses"]}, timeout=20, what="discovery")
    assert lan.lanchat_json("h3", "invite", "hist-carol", "--room", "big", "--wait")["outcome"] == "accepted"
    alice_id = alice.status()["id"]
    # Fill alice's history offline (sending 100,000 messages is not what this measures).
    alice.stop()
    carol.stop()
    db = sqlite3.connect(os.path.join(lan.dir, "h3", "state", "history.sqlite3"))
    base = 1_795_000_000_000
    db.executemany("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?)",
                   ((os.urandom(16).hex(), "big", alice_id, "hist-alice", i + 1, base + i, 0, f"message {i} " + "x" * 40, base + i)
                    for i in range(messages)))
    db.commit()
    db.close()
    alice.start()
    wait_for(lambda: any(p["name"] == "hist-bob" and p["addresses"] for p in lan.peers("h3")), timeout=20, what="bob listed")
    watch = lan.popen("h4", [os.path.join(BIN, "lanchat"), "watch", "--json"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    start = time.monotonic()
    assert lan.lanchat_json("h3", "invite", "hist-bob", "--room", "big", "--wait")["outcome"] == "accepted"
    while True:
        event = json.loads(watch.stdout.readline())
        message = event.get("message") or {}
        if message.get("kind") == "system" and "earlier message" in message.get("text", ""):
            break
    elapsed = time.monotonic() - start
    watch.kill()
    # The notice says how many were new to bob ("100000 earlier messages from ..."); check the ends too.
    assert message["text"].startswith(f"{messages} earlier messages"), message["text"]
    last = [m for m in lan.lanchat_json("h4", "history", "--room", "big", "--limit", "5") if m["kind"] == "text"]
    assert last and last[-1]["text"].startswith(f"message {messages - 1} "), last
    return {"messages": messages, "seconds": elapsed}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lan = TestLAN()
    try:
        lan.up(5)
        files = file_transfer(lan, args.mib)
        hist = history(lan, args.messages)
    finally:
        lan.down()
    if args.json:
        print(json.dumps({"file": files, "history": hist}, indent=2))
        return
    print(f"file and history benchmarks (simulated hosts over veth; TLS 1.3; to disk)")
    print(f"{args.mib} MiB file h1 -> h2, send-file end to end (hashing both sides)  {files['lanchat_total_mb_s']:.0f} MB/s"
          f"   socat raw TCP, same file, same hosts: {files['socat_mb_s']:.0f} MB/s   ratio {files['lanchat_total_mb_s'] / files['socat_mb_s']:.2f}x (goal >= 0.9x)")
    print(f"   transfer phase alone (after the sender's hash)                       {files['lanchat_transfer_mb_s']:.0f} MB/s"
          f"   ratio {files['lanchat_transfer_mb_s'] / files['socat_mb_s']:.2f}x")
    print(f"history to a newcomer: {hist['messages']} messages, invitation -> in the newcomer's history: {hist['seconds']:.2f} s (goal < 2 s)")


if __name__ == "__main__":
    main()
