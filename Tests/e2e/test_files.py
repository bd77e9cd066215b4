"""Files end to end (the first part of issue 4): a file arrives byte-identical with its mtime, names
offered by a hostile peer land inside the download directory under safe names or are refused, and a
full download directory refuses with a clear error on both sides and leaves nothing behind."""
import hashlib
import json
import os

from testlan import BIN, wait_for



def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pair(lan, downloads, extra_b=()):
    lan.up(2)
    a = lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
    b = lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all", "--download-dir", downloads, *extra_b])
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    return a, b


def test_a_file_arrives_identical_with_progress_and_mtime(lan):
    downloads = os.path.join(lan.dir, "downloads")
    pair(lan, downloads)
    source = os.path.join(lan.dir, "photo archive.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(40 << 20))
    os.utime(source, (1_700_000_000, 1_700_000_000))
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=120)
    lines = [json.loads(line) for line in result.stdout.splitlines()]   # not a terminal: JSON progress lines
    assert lines[-1]["state"] == "complete" and lines[-1]["done"] == 40 << 20
    assert any(0 < line["done"] < (40 << 20) for line in lines), "no progress reported"
    target = os.path.join(downloads, "photo archive.bin")
    wait_for(lambda: os.path.exists(target), what="the file in place")
    assert sha(target) == sha(source)
    assert int(os.stat(target).st_mtime) == 1_700_000_000
    assert [n for n in os.listdir(downloads) if n.endswith(".part")] == []
    # Sent again: a collision gets a counter, never an overwrite.
    lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=120)
    wait_for(lambda: os.path.exists(os.path.join(downloads, "photo archive (1).bin")), what="the second copy")
    received = lan.lanchat_json("h2", "transfers")
    assert [t["state"] for t in received if t["direction"] == "incoming"] == ["complete", "complete"]


def test_hostile_names_land_inside_the_download_directory_or_are_refused(lan):
    downloads = os.path.join(lan.dir, "downloads")
    a, b = pair(lan, downloads)
    port = str(b.status()["port"])
    out = lan.wire_client("h1", "h2", port, "hostile-names")
    assert out["no_room"] == 1, out           # refused: shares no room
    assert out["joined"] is True
    statuses = {name: (status, text) for name, status, text in out["results"]}
    refused = {name for name, (status, _) in statuses.items() if status == 1}
    assert refused == {"", ".."}, statuses
    # The status says "refused"; the text says why (and does not repeat "refused").
    assert "empty" in statuses[""][1] and "no usable characters" in statuses[".."][1], statuses
    assert not any(statuses[name][1].startswith("refused") for name in refused), statuses
    landed = sorted(os.listdir(downloads))
    assert all(status == 0 for name, (status, _) in statuses.items() if name not in refused), statuses
    assert "passwd" in landed and "path" in landed and "new_line.txt" in landed and "_[2Jescape.txt" in landed
    assert "hidden" in landed and "x" in landed and "same.txt" in landed and "same (1).txt" in landed
    assert any(len(n.encode()) == 255 and set(n) == {"a"} for n in landed)
    for name in landed:
        assert "/" not in name and not name.startswith(".") and "\n" not in name and "\x1b" not in name
    # Nothing was written outside: the parent of the download directory holds only what the test put there.
    assert not os.path.exists(os.path.join(lan.dir, "etc"))
    assert b.process.poll() is None


def test_a_full_download_directory_refuses_clearly_and_leaves_nothing(lan):
    downloads = os.path.join(lan.dir, "small")
    os.makedirs(downloads)
    pair(lan, downloads)
    lan.run("h2", ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", downloads])
    source = os.path.join(lan.dir, "too-big.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(8 << 20))
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, check=False, timeout=60)
    assert result.returncode == 1 and "did not complete" in result.stderr
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["state"] == "refused" and "not enough free space" in last["error"]
    incoming = [t for t in lan.lanchat_json("h2", "transfers") if t["direction"] == "incoming"]
    assert incoming[-1]["state"] == "refused" and "free space" in incoming[-1]["error"]
    assert lan.run("h2", ["ls", "-A", downloads]).stdout.strip() == ""


def test_a_file_sent_to_a_room_reaches_every_member(lan):
    lan.up(3)
    downloads = {h: os.path.join(lan.dir, f"downloads-{h}") for h in ("h2", "h3")}
    lan.start_daemon("h1", name="alice", extra=["--auto-accept", "all"])
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all", "--download-dir", downloads["h2"]])
    lan.start_daemon("h3", name="carol", extra=["--auto-accept", "all", "--download-dir", downloads["h3"]])
    wait_for(lambda: {"bob", "carol"} <= {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="discovery")
    for peer in ("bob", "carol"):
        assert lan.lanchat_json("h1", "invite", peer, "--room", "team", "--wait")["outcome"] == "accepted"
    source = os.path.join(lan.dir, "minutes.pdf")
    with open(source, "wb") as f:
        f.write(os.urandom(5 << 20))
    result = lan.lanchat("h1", "send-file", "--room", "team", source, timeout=120)
    ends = [json.loads(line) for line in result.stdout.splitlines() if json.loads(line)["state"] == "complete"]
    assert sorted(e["peer"] for e in ends) == ["bob", "carol"]
    for host in ("h2", "h3"):
        target = os.path.join(downloads[host], "minutes.pdf")
        assert sha(target) == sha(source)
        incoming = [t for t in lan.lanchat_json(host, "transfers") if t["direction"] == "incoming"]
        assert incoming[-1]["state"] == "complete" and incoming[-1]["peer"] == "alice"


HOSTILE_FD_CLIENT = r'''
import json, os, socket, sys
path = sys.argv[1]
def attempt(payload, fds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)  # the daemon's answer, or this case fails with a timeout
    s.connect(path)
    if fds:
        socket.send_fds(s, [payload], fds)
    else:
        s.send(payload)
    answer = s.recv(512).decode()
    s.close()
    return answer
token = os.urandom(16).hex().encode()
regular = os.open("/etc/hostname", os.O_RDONLY)
out = {
    "no_fd": attempt(token, []),
    "two_fds": attempt(token, [regular, regular]),
    "directory": attempt(token, [os.open("/", os.O_RDONLY)]),
    "bad_token": attempt(b"../../etc/passwd", [regular]),
    "write_only": attempt(os.urandom(16).hex().encode(), [os.open("/tmp/wo", os.O_WRONLY | os.O_CREAT)]),
    "ok": attempt(token, [regular]),
    "same_token_again": attempt(token, [regular]),
}
print(json.dumps(out))
'''


def test_a_file_the_daemon_cannot_open_is_sent_through_a_passed_descriptor(lan):
    """The system service cannot open people's files (its own user, ProtectHome): the client opens the file
    and passes the descriptor. Here the file lives on a tmpfs mounted only in the client's own mount
    namespace: the daemon cannot see the path at all."""
    downloads = os.path.join(lan.dir, "downloads")
    a, b = pair(lan, downloads)
    script = ("mount -t tmpfs none /mnt && head -c 3145728 /dev/urandom > /mnt/private.bin && sha256sum /mnt/private.bin"
              f" && {os.path.join(BIN, 'lanchat')} send-file --to bob /mnt/private.bin > /dev/null")
    out = lan.run("h1", ["unshare", "-m", "--propagation", "private", "sh", "-c", script], timeout=120).stdout
    digest = out.split()[0]
    assert lan.run("h1", ["test", "-e", "/mnt/private.bin"], check=False).returncode != 0, "the daemon's namespace must not see the file"
    target = os.path.join(downloads, "private.bin")
    wait_for(lambda: os.path.exists(target), what="the file at bob")
    assert sha(target) == digest


def test_the_descriptor_socket_refuses_hostile_input(lan):
    a, b = pair(lan, os.path.join(lan.dir, "downloads"))
    control = lan.lanchat_json("h1", "status")
    sockets = lan.run("h1", ["sh", "-c", "ls /run/lanchat/*.files $XDG_RUNTIME_DIR/lanchat/*.files 2>/dev/null"], check=False).stdout.split()
    assert sockets, control
    out = json.loads(lan.run("h1", ["python3", "-c", HOSTILE_FD_CLIENT, sockets[0]]).stdout)
    assert out["no_fd"].startswith("error:") and out["two_fds"].startswith("error:"), out
    assert out["directory"] == "error: not a regular file", out
    assert "token" in out["bad_token"] and out["write_only"] == "error: the file is not open for reading", out
    assert out["ok"] == "ok" and out["same_token_again"].startswith("error:"), out
    # An unknown token in send-file is a clear error; the daemon keeps serving.
    bad = lan.run("h1", ["python3", "-c",
                         "import socket,sys,json; s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]);"
                         "s.send(json.dumps({'id':1,'method':'send-file','params':{'peer':'bob','path':'/x','file_token':'0'*32}}).encode()+b'\\n');"
                         "print(s.recv(4096).decode())", sockets[0][:-len(".files")]]).stdout
    assert '"bad_file"' in bad and "no file was handed over" in bad, bad
    assert a.process.poll() is None


def test_downloads_are_readable_by_the_socket_group_of_a_system_daemon(lan):
    """With --socket-group (the system service: people reach lanchatd through its group), received
    files are 0640 in a 0750 directory, so those people can read them; otherwise 0600 / 0700."""
    downloads = os.path.join(lan.dir, "shared")
    pair(lan, downloads, extra_b=["--socket-group", "root"])
    source = os.path.join(lan.dir, "report.txt")
    with open(source, "w") as f:
        f.write("quarterly\n")
    lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=60)
    target = os.path.join(downloads, "report.txt")
    wait_for(lambda: os.path.exists(target), what="the file")
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert os.stat(downloads).st_mode & 0o777 == 0o750


def test_a_file_over_the_size_limit_is_refused_with_the_limit(lan):
    downloads = os.path.join(lan.dir, "downloads")
    pair(lan, downloads, extra_b=["--max-file-size", "1M"])
    source = os.path.join(lan.dir, "big.iso")
    with open(source, "wb") as f:
        f.write(os.urandom(2 << 20))
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, check=False, timeout=60)
    assert result.returncode == 1
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["state"] == "refused" and "over this peer's limit of 1048576 bytes" in last["error"], last
    assert not os.path.exists(downloads) or os.listdir(downloads) == []


def test_a_255_byte_name_twice_and_a_dangling_link_still_get_names(lan):
    """Issue 11, item 8: a file with a 255-byte name received twice hung the daemon's only file thread
    (every counted candidate was cut back to the taken name), and so did a dangling symbolic link at the
    target name. Both now land under a free name, the link is left alone, and the daemon goes on."""
    downloads = os.path.join(lan.dir, "downloads")
    a, b = pair(lan, downloads)
    long_name = "漢" * 85                      # 255 bytes of UTF-8
    source = os.path.join(lan.dir, long_name)
    with open(source, "wb") as f:
        f.write(os.urandom(4096))
    os.makedirs(downloads, exist_ok=True)
    os.symlink("/nonexistent/target", os.path.join(downloads, "linked.bin"))
    linked = os.path.join(lan.dir, "linked.bin")
    with open(linked, "wb") as f:
        f.write(b"not through the link")
    for path in (source, source, linked):
        result = lan.lanchat("h1", "send-file", "--to", "bob", path, timeout=60)
        assert json.loads(result.stdout.splitlines()[-1])["state"] == "complete", result.stdout
    landed = set(os.listdir(downloads))
    assert long_name in landed, landed
    counted = [n for n in landed if n.startswith("漢") and n != long_name]
    assert len(counted) == 1 and counted[0].endswith(" (1)") and len(counted[0].encode()) <= 255, landed
    assert os.readlink(os.path.join(downloads, "linked.bin")) == "/nonexistent/target"
    assert open(os.path.join(downloads, "linked (1).bin"), "rb").read() == b"not through the link"
    # Still serving: a message goes through.
    assert lan.lanchat_json("h1", "send", "--room", "lab", "still here")["sent_now"] == 1
