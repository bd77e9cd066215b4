"""A fresh machine works: daemons started as a person would start them (no path flags), on hosts whose
/var/lib, /run, /tmp and home directories start empty, receive files and a room's history; a download
directory that cannot be used is refused as what it is, on both sides, and `doctor` names it."""
import hashlib
import json
import os

import pytest

from testlan import wait_for


def ready(lan, host, count, socket=None):
    wait_for(lambda: len([p for p in lan.peers(host, socket=socket) if p["addresses"]]) >= count, timeout=20,
             what=f"{host} to see {count} peers")


def texts(lan, host, room="lab"):
    return [m["text"] for m in lan.lanchat_json(host, "history", "--room", room) if m["kind"] == "text"]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_each_host_starts_from_empty_directories(lan):
    lan.up(1)
    listing = lan.run("h1", ["sh", "-c", "ls -A /var/lib /run /tmp /home /root"]).stdout
    for leftover in ("lanchat", "Downloads"):
        assert leftover not in listing.split(), listing
    # What the host writes stays in the host.
    lan.run("h1", ["mkdir", "-p", "/var/lib/lanchat/only-on-h1"])
    assert not os.path.exists("/var/lib/lanchat/only-on-h1")


def test_default_paths_receive_a_file_and_a_rooms_history(lan):
    lan.up(3)
    for host in ("h1", "h2", "h3"):
        # Only what a person would type: no --state-dir, --socket or --download-dir.
        lan.start_daemon(host, extra=["--auto-accept", "all"], default_paths=True)
    for host in ("h1", "h2", "h3"):
        ready(lan, host, 2)
    status = lan.lanchat_json("h2", "status")
    assert status["download_directory"] == "/var/lib/lanchat/downloads" and "download_problem" not in status, status
    assert lan.lanchat_json("h1", "invite", "root@h2", "--room", "lab", "--wait")["outcome"] == "accepted"
    for i in range(20):
        lan.lanchat("h1" if i % 2 == 0 else "h2", "send", "--room", "lab", f"m{i:02d}")
    source = os.path.join(lan.dir, "notes.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(3 << 20))
    result = lan.lanchat("h1", "send-file", "--room", "lab", source, timeout=120)
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "complete"
    placed = lan.run("h2", ["sha256sum", "/var/lib/lanchat/downloads/notes.bin"]).stdout.split()[0]
    assert placed == sha(source)
    # A newcomer gets the history from its inviter; the part file went to the state directory, not /tmp.
    wait_for(lambda: len(texts(lan, "h1")) == 20, what="20 messages at h1")
    assert lan.lanchat_json("h1", "invite", "root@h3", "--room", "lab", "--wait")["outcome"] == "accepted"
    wait_for(lambda: len(texts(lan, "h3")) == 20, timeout=20, what="the history at h3")
    assert texts(lan, "h3") == [f"m{i:02d}" for i in range(20)]
    leftovers = lan.run("h3", ["sh", "-c", "ls -A /tmp /var/lib/lanchat/incoming"]).stdout
    assert ".part" not in leftovers, leftovers


CASES = {
    # The daemon runs as nobody; the directory belongs to root.
    "not writable": dict(prefix=["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"],
                         setup=["mkdir", "-m", "0755", "/var/lib/dl"], downloads="/var/lib/dl",
                         reason="cannot use the download directory /var/lib/dl: Permission denied",
                         repair=["chown", "nobody", "/var/lib/dl"]),
    # Its parent is a file.
    "parent is a file": dict(prefix=[], setup=["touch", "/var/lib/afile"], downloads="/var/lib/afile/downloads",
                             reason="cannot use the download directory /var/lib/afile/downloads: Not a directory",
                             repair=["rm", "/var/lib/afile"]),
}


@pytest.mark.parametrize("case", CASES.keys())
def test_an_unusable_download_directory_is_refused_with_the_reason(lan, case):
    c = CASES[case]
    lan.up(2)
    lan.run("h2", c["setup"])
    lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
    # State and socket in the fresh /tmp (writable for nobody too); the download directory is the problem.
    sock = "/tmp/bob.sock"
    bob = lan.start_daemon("h2", name="bob", socket=sock, prefix=c["prefix"], default_paths=True,
                           extra=["--auto-accept", "all", "--state-dir", "/tmp/bob-state", "--download-dir", c["downloads"]])
    assert c["reason"] in bob.log()  # said at startup
    doctor = lan.lanchat("h2", "doctor", socket=sock, check=False)
    assert doctor.returncode == 1 and f"FAIL  downloads: {c['reason']}" in doctor.stdout and "fix:" in doctor.stdout, doctor.stdout
    ready(lan, "h1", 1)
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"

    source = os.path.join(lan.dir, "report.pdf")
    with open(source, "wb") as f:
        f.write(os.urandom(1 << 20))
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, check=False, timeout=60)
    assert result.returncode == 1 and "did not complete" in result.stderr
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["state"] == "refused" and last["error"] == c["reason"], last
    incoming = [t for t in lan.lanchat_json("h2", "transfers", socket=sock) if t["direction"] == "incoming"]
    assert incoming[-1]["state"] == "refused" and incoming[-1]["error"] == c["reason"], incoming
    line = lan.lanchat("h2", "transfers", socket=sock).stdout
    assert f"refused: {c['reason']}" in line and "refused: refused" not in line, line

    # The daemon keeps serving: chat goes on.
    lan.lanchat("h1", "send", "--room", "lab", "still here?")
    wait_for(lambda: "still here?" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab", socket=sock)],
             what="the message at bob")
    # Once the directory is fixed, files arrive (the check is made for every offer, not only at startup).
    lan.run("h2", c["repair"])
    assert lan.lanchat("h2", "doctor", socket=sock, check=False).stdout.count("ok    downloads") == 1
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=60)
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "complete"
    placed = lan.run("h2", ["sha256sum", os.path.join(c["downloads"], "report.pdf")]).stdout.split()[0]
    assert placed == sha(source)
