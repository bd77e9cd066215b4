"""Issue 28, item 7: a member's pushed file never takes the last 64 MiB of the receiver's disk
(TransferLimits.keptFree). Before, a file was accepted while it fitted at all: on a disk with 70 MiB free a
member's 10 MiB file left 60 MiB, and ten of them left nothing for the history database and the logs."""
import json
import os

from test_files import pair


def test_a_pushed_file_never_takes_the_last_64_mib_of_the_disk(lan):
    downloads = os.path.join(lan.dir, "small")
    os.makedirs(downloads)
    pair(lan, downloads)
    lan.run("h2", ["mount", "-t", "tmpfs", "-o", "size=70m", "tmpfs", downloads])
    source = os.path.join(lan.dir, "ten.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(10 << 20))
    result = lan.lanchat("h1", "send-file", "--to", "bob", source, check=False, timeout=60)
    print(f"\nsend-file: exit {result.returncode}: {result.stderr.strip()}")
    assert result.returncode == 1 and "did not complete" in result.stderr, result
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["state"] == "refused" and "kept free" in last["error"], last
    assert lan.run("h2", ["ls", "-A", downloads]).stdout.strip() == ""
    # A small one that leaves 64 MiB is taken.
    with open(source, "wb") as f:
        f.write(os.urandom(1 << 20))
    assert lan.lanchat("h1", "send-file", "--to", "bob", source, timeout=60).returncode == 0
