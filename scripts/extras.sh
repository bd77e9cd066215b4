#!/usr/bin/env bash
# Shell completions (bash, zsh, fish) and man pages for lanchat and lanchatd, generated from the
# argument parser of the built binaries (swift-argument-parser's completion scripts and its
# generate-manual tool): nothing here is written by hand, so they always match the commands.
#   scripts/extras.sh BIN_DIR OUT_DIR
# OUT_DIR/bash-completion/completions/{lanchat,lanchatd}, OUT_DIR/zsh/vendor-completions/_{lanchat,lanchatd},
# OUT_DIR/fish/vendor_completions.d/{lanchat,lanchatd}.fish, OUT_DIR/man/man1/{lanchat,lanchatd}.1.gz:
# a tree to copy under /usr/share or /usr/local/share.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:?usage: extras.sh BIN_DIR OUT_DIR}
out=${2:?usage: extras.sh BIN_DIR OUT_DIR}
for tool in lanchat lanchatd; do [ -x "$bin/$tool" ] || { echo "extras: no $bin/$tool (build first)" >&2; exit 1; }; done
mkdir -p "$out/bash-completion/completions" "$out/zsh/vendor-completions" "$out/fish/vendor_completions.d" "$out/man/man1"
for tool in lanchat lanchatd; do
  "$bin/$tool" --generate-completion-script bash > "$out/bash-completion/completions/$tool"
  "$bin/$tool" --generate-completion-script zsh > "$out/zsh/vendor-completions/_$tool"
  "$bin/$tool" --generate-completion-script fish > "$out/fish/vendor_completions.d/$tool.fish"
done
# The man page generator is a product of swift-argument-parser (the package's dependency).
(cd "$root" && swift build --product generate-manual 2>&1 | grep -v "prohibited flag" | tail -n 1 >&2)
generator=$(cd "$root" && swift build --product generate-manual --show-bin-path)/generate-manual
date=$(git -C "$root" log -1 --format=%cs 2>/dev/null || date +%F)
for tool in lanchat lanchatd; do
  "$generator" "$bin/$tool" --date "$date" --authors "lanchat developers" -o "$out/man/man1"
  gzip -9nf "$out/man/man1/$tool.1"
done
