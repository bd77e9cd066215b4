#!/usr/bin/env bash
# Renders the diagrams of docs/architecture.md from their text (docs/architecture/*.dot) with Graphviz
# (`apt-get install graphviz`). Run after changing a .dot file; the SVGs are checked in.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v dot >/dev/null || { echo "architecture: needs Graphviz's dot (apt-get install graphviz)" >&2; exit 1; }
for source in "$root"/docs/architecture/*.dot; do
  dot -Tsvg "$source" -o "${source%.dot}.svg"
  echo "architecture: ${source#"$root"/} -> ${source%.dot}.svg" | sed "s|$root/||"
done
