#!/usr/bin/env bash
# Fuzzes the wire protocol decoder with libFuzzer (and AddressSanitizer), starting from the checked-in
# corpus. Usage: scripts/fuzz.sh [SECONDS] (default 60). Crashers are written to .build-fuzz/crashes/;
# minimise one (add -minimize_crash=1) and add it to Tests/LanchatWireTests/Corpus/ as err-*.bin or
# any-*.bin so that the tests replay it from then on.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}
swift build -c release --scratch-path .build-fuzz --product WireFuzz \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING 2>&1 | grep -v "prohibited flag" | tail -n 3
work=.build-fuzz/corpus
mkdir -p "$work" .build-fuzz/crashes
cp -n Tests/LanchatWireTests/Corpus/*.bin "$work"/ 2>/dev/null || true
exec .build-fuzz/release/WireFuzz -max_total_time="$seconds" -max_len=8192 \
  -artifact_prefix=.build-fuzz/crashes/ "$work"
