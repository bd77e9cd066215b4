#!/usr/bin/env bash
# LanchatKit's public API against its last release (api/LanchatKit.baseline: "TAG COMMIT"), with
# `swift package diagnose-api-breaking-changes`. The release's API digest is kept in api/baselines/COMMIT,
# so the check builds only the current tree (about 30 s), not the release too (about 5 minutes).
#   scripts/api-check.sh            check (exit 1 on a breaking change)
#   scripts/api-check.sh --release TAG
#                                   after tagging TAG (`git tag TAG`): make it the baseline (writes
#                                   api/LanchatKit.baseline and api/baselines/COMMIT; commit them)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ "${1:-}" = "--release" ]; then
  tag=${2:?usage: scripts/api-check.sh --release TAG}
  commit=$(git rev-list -n 1 "$tag")
  swift package diagnose-api-breaking-changes "$commit" --products LanchatKit --baseline-dir api/baselines --regenerate-baseline \
    2>&1 | grep -v "prohibited flag" | tail -n 3
  echo "$tag $commit" > api/LanchatKit.baseline
  echo "api-check: LanchatKit's baseline is now $tag ($commit)"
  exit 0
fi
read -r tag commit < api/LanchatKit.baseline
[ -f "api/baselines/$commit/LanchatKit.json" ] || { echo "api-check: api/baselines/$commit/LanchatKit.json is missing (scripts/api-check.sh --release $tag)" >&2; exit 1; }
git cat-file -e "$commit^{commit}" 2>/dev/null || { echo "api-check: commit $commit ($tag) is not in this clone (a shallow clone?)" >&2; exit 1; }
echo "api-check: LanchatKit against $tag ($commit)"
log=$(mktemp)
if swift package diagnose-api-breaking-changes "$commit" --products LanchatKit --baseline-dir api/baselines > "$log" 2>&1; then rc=0; else rc=$?; fi
grep -vE "prohibited flag|^\[[0-9]+/[0-9]+\]" "$log" | tail -n 20
rm -f "$log"
[ "$rc" = 0 ] || { echo "api-check: LanchatKit's API breaks $tag (above); a new major version needs a new tag and baseline" >&2; exit 1; }
