"""Instruction counts of fixed workloads, which do not move with the machine's load the way times do (issue
14). Each workload runs in one process under callgrind (valgrind), twice: at a small size and at that size
plus the measured amount; the difference divided by the amount is the count per message or per MiB, so the
start (identities, TLS handshakes, the invitation, schemas) cancels out. Each runs `--rounds` times; the
figures print as min / median / max.

1. Messages: two session nodes in one process (TLS 1.3 over loopback, a SQLite file each, signed envelopes),
   `--messages` reliable messages one way in calls of 100, until the receiver has stored them all and the
   sender has every acknowledgement (`lanchat-bench workload DIR messages N`). Its floor, the same way: N
   round trips of 64 bytes over TLS 1.3 with the same library, each side syncing a small write before it
   sends (`lanchat-bench floor DIR tls-ping N`). Then `--lone` messages sent one call each (`lanchat-bench
   workload DIR messages N 1`): each pays its own seal (a signature and its check) and its own commits, as a
   message typed by a person does.
2. A file of `--mib` MiB from one node to the other, until both ends say complete (on disk, verified)
   (`lanchat-bench workload DIR file PATH`). Its floor: the same bytes over TLS 1.3 with the same library into
   a file synced at the end (`lanchat-bench floor DIR tls-copy PATH`).

Counts are of valgrind's simulated CPU (its own instruction set: code that picks AES or SHA instructions at
run time may take another path than on the bare CPU). Usage: python3 bench/instructions.py [--messages N]
[--lone N] [--mib N] [--rounds N] [--json]"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figures import figure, median  # noqa: E402

BIN = os.environ.get("LANCHAT_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "release"))
SMALL_MESSAGES = 1000
SMALL_LONE = 100
SMALL_MIB = 8


def stripped_copy(directory):
    """lanchat-bench without its debug sections: valgrind 3.19 (Debian 12) cannot read the DWARF 5 that
    Swift 6 writes and gives up. The code is the same bytes; callgrind still names functions (symbols)."""
    path = os.path.join(directory, "lanchat-bench")
    subprocess.run(["objcopy", "--strip-debug", os.path.join(BIN, "lanchat-bench"), path], check=True)
    return path


def instructions(program, arguments, timeout=3600):
    """Instructions (callgrind's Ir) of one run of `program` (lanchat-bench) with `arguments` ("DIR": a new
    directory of its own)."""
    directory = tempfile.mkdtemp(prefix="lanchat-instructions-")
    try:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", program,
                   *(directory if argument == "DIR" else argument for argument in arguments)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(arguments)}: exit {result.returncode}: {result.stderr[-600:]}")
        found = re.search(r"Collected\s*:\s*(\d+)", result.stderr)
        if not found:
            raise RuntimeError(f"{' '.join(arguments)}: no instruction count in callgrind's output: {result.stderr[-600:]}")
        return int(found.group(1))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def make_file(path, mib):
    """`mib` MiB that do not compress (lanchat does not compress, but the same bytes for every run)."""
    with open("/dev/urandom", "rb") as source, open(path, "wb") as target:
        block = source.read(1024 * 1024)
        for index in range(mib):
            target.write(block[index % 7:] + block[:index % 7])


def per_unit(program, small_arguments, big_arguments, amount, rounds):
    """Instructions per unit, one figure per round: (big - small) / amount."""
    return [(instructions(program, big_arguments) - instructions(program, small_arguments)) / amount for _ in range(rounds)]


def spread(values, scale=1.0, digits=0):
    values = sorted(v / scale for v in values)
    return f"{values[0]:,.{digits}f} / {median(values):,.{digits}f} / {values[-1]:,.{digits}f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--lone", type=int, default=400, help="messages sent one call each (0: not measured)")
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not installed (scripts/setup.sh test installs it)", file=sys.stderr)
        sys.exit(1)
    missing = {}
    small_count, big_count = SMALL_MESSAGES, SMALL_MESSAGES + args.messages
    files = tempfile.mkdtemp(prefix="lanchat-instructions-files-")
    try:
        program = stripped_copy(files)
        lanchat_messages = figure(missing, "messages", per_unit, program, ["workload", "DIR", "messages", str(small_count)],
                                  ["workload", "DIR", "messages", str(big_count)], args.messages, args.rounds)
        floor_messages = figure(missing, "messages_floor", per_unit, program, ["floor", "DIR", "tls-ping", str(small_count)],
                                ["floor", "DIR", "tls-ping", str(big_count)], args.messages, args.rounds)
        lone = None
        if args.lone > 0:
            lone = figure(missing, "lone", per_unit, program, ["workload", "DIR", "messages", str(SMALL_LONE), "1"],
                          ["workload", "DIR", "messages", str(SMALL_LONE + args.lone), "1"], args.lone, args.rounds)
        # P-256 at work (`lanchat-bench envelopes`: each message signed and checked, hashed once more with
        # SHA-256, then sealed and checked in seals of 1, 10, 100 and 256).
        crypto = figure(missing, "signatures", per_unit, program, ["envelopes", str(small_count), "1"],
                        ["envelopes", str(big_count), "1"], args.messages, args.rounds)
        small, big = os.path.join(files, "small.bin"), os.path.join(files, "big.bin")
        make_file(small, SMALL_MIB)
        make_file(big, SMALL_MIB + args.mib)
        lanchat_file = figure(missing, "file", per_unit, program, ["workload", "DIR", "file", small], ["workload", "DIR", "file", big], args.mib, args.rounds)
        floor_file = figure(missing, "file_floor", per_unit, program, ["floor", "DIR", "tls-copy", small], ["floor", "DIR", "tls-copy", big], args.mib, args.rounds)
    finally:
        shutil.rmtree(files, ignore_errors=True)
    results = {"messages_count": args.messages, "file_mib": args.mib, "rounds_count": args.rounds,
               "lanchat_per_message": lanchat_messages, "floor_per_round_trip": floor_messages, "sign_and_verify_per_message": crypto,
               **({"lanchat_per_lone_message": lone} if args.lone > 0 else {}), "lone_count": args.lone,
               "lanchat_per_mib": lanchat_file, "floor_per_mib": floor_file}
    if args.json:
        print(json.dumps({**results, **({"missing": missing} if missing else {})}, indent=2))
        sys.exit(1 if missing else 0)
    print(f"instruction counts (callgrind; {args.rounds} runs each, min / median / max; the start of each run cancels out)")

    def line(name, ours, floor, unit, floor_name, keys):
        if ours is None or floor is None:
            print(f"   {name}: missing: " + "; ".join(missing[key] for key in keys if key in missing))
            return
        ratio = median(ours) / median(floor)
        print(f"   {name}: {spread(ours)} instructions per {unit}; {floor_name}: {spread(floor)}; {ratio:.2f}x")
    line(f"messages ({args.messages:,} signed, reliable, one way)", lanchat_messages, floor_messages, "message",
         "floor, TLS 1.3 round trip with one sync per side", ["messages", "messages_floor"])
    if crypto is None:
        print("   signatures and seals per message: missing: " + missing.get("signatures", ""))
    else:
        # (Not a share of a message's count: since seals, a message in calls of 100 shares one signature
        # with its batch.)
        print(f"   signatures and seals per message (`lanchat-bench envelopes`: each message signed and checked, then"
              f" sealed and checked in seals of 1, 10, 100 and 256): {spread(crypto)} instructions")
    if args.lone > 0:
        line(f"messages sent one call each ({args.lone:,}: a seal and its commits each)", lone, floor_messages, "message",
             "floor, TLS 1.3 round trip with one sync per side", ["lone", "messages_floor"])
    line(f"file ({args.mib} MiB to disk, verified)", lanchat_file, floor_file, "MiB", "floor, the bytes over TLS 1.3 into a synced file",
         ["file", "file_floor"])
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
