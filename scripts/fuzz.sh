#!/usr/bin/env bash
# Fuzzes a decoder that outside input reaches, with libFuzzer and AddressSanitizer, from its checked-in
# corpus. Usage: scripts/fuzz.sh [TARGET] [SECONDS] (TARGET: wire (default), history, txt, control, seal;
# SECONDS: default 60). Prints libFuzzer's progress and, at the end, one summary line with the
# executions. Crashers are written to .build-fuzz/crashes/TARGET-*; replay one with
# `LANCHAT_FUZZ=TARGET .build/debug/LanchatFuzz FILE`, minimise it (-minimize_crash=1) and add it to the
# target's corpus (wire: Tests/LanchatWireTests/Corpus/ as err-*.bin or any-*.bin, which the tests
# replay; the others: Tests/FuzzCorpus/TARGET/).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=wire
if [[ $# -gt 0 && ! $1 =~ ^[0-9]+$ ]]; then target=$1; shift; fi
seconds=${1:-60}
case "$target" in
  wire) seeds=Tests/LanchatWireTests/Corpus; max_len=8192 ;;
  history) seeds=Tests/FuzzCorpus/history; max_len=16384 ;;
  txt) seeds=Tests/FuzzCorpus/txt; max_len=1300 ;;
  control) seeds=Tests/FuzzCorpus/control; max_len=4096 ;;
  seal) seeds=Tests/FuzzCorpus/seal; max_len=9000 ;;
  *) echo "fuzz.sh: no target '$target' (wire, history, txt, control, seal)" >&2; exit 2 ;;
esac
swift build -c release --scratch-path .build-fuzz --product LanchatFuzz \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING 2>&1 | grep -v "prohibited flag" | tail -n 3
work=.build-fuzz/corpus-$target
mkdir -p "$work" .build-fuzz/crashes
cp -n "$seeds"/*.bin "$work"/ 2>/dev/null || true
log=.build-fuzz/$target.log
set +e
LANCHAT_FUZZ=$target .build-fuzz/release/LanchatFuzz -max_total_time="$seconds" -max_len="$max_len" \
  -print_final_stats=1 -artifact_prefix=".build-fuzz/crashes/$target-" "$work" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
if [[ $rc -eq 0 ]]; then
  echo "fuzz: $target: $runs executions in ${seconds} s, no crash (corpus: $(ls "$work" | wc -l) inputs)"
else
  echo "fuzz: $target: FAILED after $runs executions: see .build-fuzz/crashes/$target-*" >&2
fi
exit "$rc"
