"""Writes packaging/lanchatd.order: the functions lanchatd runs, for lld to lay out first and together.

The kernel maps a read fault's neighbours too (64 KiB around it): with the functions an idle lanchatd
runs scattered through 21 MiB of code, nearly all of it ended up resident (issue 33, item 5). This runs
lanchatd on h1 of a 4-host simulated LAN under callgrind (valgrind), twice, and lists every function of
lanchatd that ran:
  1. idle: start, find 3 peers, 30 s idle (what `scripts/bench.sh discovery` measures);
  2. chatting: the same, then a room with two of them and 20 messages.
The first run's functions come first, then the second's that the first did not run. Package.swift passes
the file to lld (`--symbol-ordering-file`) in release builds; a name that no longer exists is skipped, so
an old file costs only memory. Run `scripts/bench.sh order` after changes that move much code.
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "e2e"))
import testlan  # noqa: E402
from testlan import TestLAN, wait_for  # noqa: E402

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(ROOT, "packaging", "lanchatd.order")


def profile(out, chat):
    """One run: h1's lanchatd under callgrind, the others plain. Returns callgrind's output file."""
    lan = TestLAN()
    try:
        lan.up(4)
        extra = ["--log-level", "warning"]
        peers = [lan.start_daemon(h, name=f"order-{h}", extra=extra + (["--auto-accept", "all"] if chat else []))
                 for h in ("h2", "h3", "h4")]
        callgrind = ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no", "--demangle=no",
                     f"--callgrind-out-file={out}"]
        # Under valgrind the daemon starts slowly: its first status answer may take longer than the usual 20 s.
        daemon = lan.start_daemon("h1", name="order-h1", extra=extra, prefix=callgrind, start_timeout=120)
        wait_for(lambda: len(lan.peers("h1")) == 3, timeout=180, what="h1 under callgrind to see 3 peers")
        if chat:
            for peer in ("order-h2", "order-h3"):
                lan.lanchat("h1", "invite", peer, "--room", "lab", "--wait", timeout=120)
            for i in range(20):
                lan.lanchat("h1", "send", f"hello {i}", timeout=120)
        time.sleep(10 if chat else 30)
        daemon.stop(timeout=120)
        for peer in peers:
            peer.stop()
    finally:
        lan.down()
    return out


def functions(path, program):
    """lanchatd's functions in a callgrind file, in the order they first appear (callgrind's own marks of
    recursion, `'2`, removed)."""
    names, seen, ob, cob = [], set(), None, None
    for line in open(path, errors="replace"):
        if line.startswith("ob="):
            ob = line[3:].strip()
        elif line.startswith("cob="):
            cob = line[4:].strip()
        elif line.startswith(("fn=", "cfn=")):
            called = line.startswith("cfn=")
            name = re.sub(r"'\d+$", "", line.split("=", 1)[1].strip())
            owner = (cob or ob) if called else ob
            cob = None
            if owner == program and not name.startswith("0x") and name not in seen:
                seen.add(name)
                names.append(name)
    return names


def main():
    if subprocess.run(["which", "valgrind"], capture_output=True).returncode != 0:
        sys.exit("order: valgrind is not installed (scripts/setup.sh test installs it)")
    # valgrind 3.19 (Debian 12) cannot read the DWARF 5 of our builds: copies without debug sections, in a
    # directory the simulated hosts see (each has a /tmp of its own), used as the LAN's binaries.
    work = os.path.join(ROOT, ".build", "order")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        for tool in ("lanchatd", "lanchat"):
            subprocess.run(["objcopy", "--strip-debug", os.path.join(testlan.BIN, tool), os.path.join(work, tool)], check=True)
        program = os.path.join(work, "lanchatd")
        testlan.BIN = work
        idle = functions(profile(os.path.join(work, "idle.out"), chat=False), program)
        print(f"order: idle: {len(idle)} functions", file=sys.stderr)
        if not idle:
            sys.exit(f"order: callgrind saw no function of {program}: nothing written")
        chat = functions(profile(os.path.join(work, "chat.out"), chat=True), program)
        first = set(idle)
        more = [name for name in chat if name not in first]
        print(f"order: chatting: {len(more)} more", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(OUT, "w") as f:
        f.write("\n".join(idle + more) + "\n")
    # SwiftPM does not know the file is an input of the link: remove the linked lanchatd so that the next
    # release build links it again, with the new order.
    linked = os.path.join(ROOT, ".build", "release", "lanchatd")
    if os.path.exists(linked):
        os.remove(linked)
    print(f"order: wrote {OUT} ({len(idle) + len(more)} functions); the next release build links lanchatd with it",
          file=sys.stderr)


if __name__ == "__main__":
    main()
