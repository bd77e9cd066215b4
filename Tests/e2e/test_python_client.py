"""The Python client (clients/python) against real daemons on the simulated LAN: it runs inside a
host, as a program there would."""
import hashlib
import json
import os

from testlan import ROOT, wait_for

CLIENT = os.path.join(ROOT, "clients", "python")

SCRIPT = r'''
import json, os, sys, threading
sys.path.insert(0, sys.argv[1])
from lanchat_client import Client, LanchatError
source = sys.argv[2]
lanchat = Client(timeout=20)
out = {"status": lanchat.status()["name"]}
out["peers"] = [p["name"] for p in lanchat.peers() if p["compatible"]]
try:
    lanchat.invite("nobody-here", room="lab")
except LanchatError as error:
    out["unknown_peer"] = [error.code, error.message]
events = lanchat.watch(timeout=20)
out["invite"] = lanchat.invite("bob", room="lab", wait=True, timeout=20)["outcome"]
out["sent"] = lanchat.send("hello from python", room="lab")["recipients"]
# The watch sees our own message.
for event in events:
    if event["type"] == "message" and event["message"]["text"] == "hello from python":
        out["watched"] = event["message"]["sender"]
        break
events.close()
out["history"] = [m["text"] for m in lanchat.history(room="lab") if m["kind"] == "text"]
updates = []
final = lanchat.send_file(source, peer="bob", progress=updates.append, timeout=60)
out["file"] = final["state"]
out["updates"] = len(updates)
out["members"] = [m["name"] for m in lanchat.members("lab")["members"]]
try:
    lanchat.send("x", room="no-such-room")
except LanchatError as error:
    out["unknown_room"] = error.code
print(json.dumps(out))
'''


def test_the_python_client_drives_a_real_daemon(lan):
    lan.up(2)
    lan.start_daemon("h1", name="alice")
    bob = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all", "--download-dir", os.path.join(lan.dir, "downloads")])
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="discovery")
    source = os.path.join(lan.dir, "report.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(3 << 20))
    result = lan.run("h1", ["python3", "-c", SCRIPT, CLIENT, source], timeout=120)
    out = json.loads(result.stdout)
    assert out["status"] == "alice" and out["peers"] == ["bob"], out
    assert out["unknown_peer"][0] == "unknown_peer" and "nobody-here" in out["unknown_peer"][1]
    assert out["invite"] == "accepted" and out["sent"] == 1 and out["watched"] == "alice"
    assert out["history"] == ["hello from python"]
    assert out["file"] == "complete" and out["updates"] >= 2, out
    assert out["members"] == ["bob"] and out["unknown_room"] == "unknown_room"
    received = os.path.join(lan.dir, "downloads", "report.bin")
    assert hashlib.sha256(open(received, "rb").read()).digest() == hashlib.sha256(open(source, "rb").read()).digest()
    assert bob.process.poll() is None


def test_the_client_says_when_no_daemon_runs(lan):
    lan.up(1)
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from lanchat_client import Client, LanchatError\n"
              "try:\n    Client('/run/lanchat/none.sock', timeout=2).status()\nexcept LanchatError as e:\n    print(e.code, e.message)")
    out = lan.run("h1", ["python3", "-c", script, CLIENT]).stdout
    assert out.startswith("connection lanchatd is not running: no socket at /run/lanchat/none.sock"), out
