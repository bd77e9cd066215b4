"""Searching the history (issue 13, item 6): `lanchat history --grep` over 1,000,000 stored messages,
through the store's word index (SQLite FTS5), next to a plain `LIKE '%word%'` scan of the same file
in the same run; a rare word (one message in 10,000) and a common one, the last 50 matches, median of
5 runs each. Runs `lanchat-bench search` on this machine (no network). Usage: python3 bench/search.py
[--messages N] [--json]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

BIN = os.environ.get("LANCHAT_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "release"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanchat-search-") as directory:
        out = json.loads(subprocess.run([os.path.join(BIN, "lanchat-bench"), "search", directory, str(args.messages)],
                                        check=True, capture_output=True, text=True, timeout=1800).stdout)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"history search ({out['messages_count']:,} messages, {out['file_mib']:.0f} MiB history file, filled in {out['fill_s']:.1f} s)")
    for kind in ("rare", "common"):
        index, like = out[f"{kind}_index_ms"], out[f"{kind}_like_ms"]
        print(f"  {kind} word, last 50 matches: index {index:.2f} ms   LIKE scan {like:.2f} ms   {like / index:.1f}x   "
              f"(found {out[f'{kind}_found_count']}; goal < 100 ms)")
    if out["rare_found_count"] != out["rare_like_found_count"]:
        print("  the index and the scan found different counts for the rare word", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
