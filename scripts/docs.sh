#!/usr/bin/env bash
# LanchatKit's documentation (the DocC catalog in Sources/LanchatKit/LanchatKit.docc and the API's own
# comments), built with swift-docc-plugin; any warning (a broken link, an unknown symbol) fails it.
#   scripts/docs.sh [OUTPUT]   the archive goes to OUTPUT (default .build/docs/LanchatKit.doccarchive);
#                              `swift package --disable-sandbox preview-documentation --target LanchatKit` serves it
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-.build/docs/LanchatKit.doccarchive}
mkdir -p "$(dirname "$out")"
rm -rf "$out"
log=$(mktemp)
if swift package --disable-sandbox generate-documentation --target LanchatKit --warnings-as-errors --output-path "$out" > "$log" 2>&1; then rc=0; else rc=$?; fi
grep -vE "prohibited flag|^\[[0-9]+/[0-9]+\]" "$log" | tail -n 15
rm -f "$log"
[ "$rc" = 0 ] || { echo "docs: LanchatKit's documentation does not build cleanly (above)" >&2; exit 1; }
echo "docs: $out"
