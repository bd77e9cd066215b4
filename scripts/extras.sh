#!/usr/bin/env bash
# Shell completions (bash, zsh, fish) and man pages for lanchat and lanchatd, generated from the
# argument parser of the built binaries (swift-argument-parser's completion scripts and its
# generate-manual tool), so they always match the commands. Written here by hand: the man pages' FILES
# (default paths) and SEE ALSO sections, which no argument parser knows.
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
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What the generator cannot know, written here: FILES (the default paths: DaemonConfiguration.defaults,
# ControlSocketPath, systemd/lanchatd.service) and SEE ALSO, in mdoc, inserted before EXIT STATUS and
# AUTHORS (mdoc's section order).
files_lanchatd='.Sh FILES
.Bl -tag -width Ds
.It Pa /var/lib/lanchat/
State directory of the system service (systemd StateDirectory=) and of a daemon run by root: the identity key
.Pa identity.pem ,
the history
.Pa history.sqlite3 ,
.Pa known_peers.json ,
.Pa static-peers.json ,
histories being received in
.Pa incoming/ ,
files shared in rooms in
.Pa shared/
and received files in
.Pa downloads/ .
Set with
.Fl -state-dir .
.It Pa $XDG_STATE_HOME/lanchat/ , Pa ~/.local/state/lanchat/
State directory of a daemon run by a user (the first when XDG_STATE_HOME is set), with the same files.
.It Pa $XDG_RUNTIME_DIR/lanchat/lanchatd.sock
Control socket of a daemon run by a user (mode 0600): the default whenever XDG_RUNTIME_DIR is set.
.It Pa /run/lanchat/lanchatd.sock
Control socket of the system service (mode 0660, group lanchat, from
.Fl -socket-group ) ;
also the default when XDG_RUNTIME_DIR is not set. Set with
.Fl -socket .
.It Pa ~/Downloads/
Received files of a daemon run by a user with the default paths; otherwise (root, the system service, or
.Fl -state-dir
given)
.Pa downloads/
in the state directory. Set with
.Fl -download-dir .
.It Pa /etc/lanchat/lanchatd.env
LANCHATD_* variables for the system service (its EnvironmentFile=, optional).
.Nm
reads no config file by default: only the one named by
.Fl -config
or LANCHATD_CONFIG.
.El'
files_lanchat='.Sh FILES
.Bl -tag -width Ds
.It Pa $XDG_RUNTIME_DIR/lanchat/lanchatd.sock
Control socket of this user'"'"'s lanchatd, used when it exists (unless
.Fl -socket
or LANCHAT_SOCKET names another).
.It Pa /run/lanchat/lanchatd.sock
Control socket of the system service, used when no user'"'"'s daemon socket exists; members of group lanchat may use it.
.It Pa ~/Downloads/ , Pa /var/lib/lanchat/downloads/
Where the daemon puts received files: the first for a user'"'"'s daemon, the second for the system service
(set with lanchatd
.Fl -download-dir ) .
.It Pa ~/.local/state/lanchat/ , Pa /var/lib/lanchat/
The daemon'"'"'s state directory (identity key, history), a user'"'"'s and the system service'"'"'s: see
.Xr lanchatd 1 .
.El'
see_also_lanchatd='.Sh "SEE ALSO"
.Xr lanchat 1 ,
.Xr avahi-daemon 8 ,
.Xr systemctl 1 ,
.Xr systemd.exec 5
.Pp
The project'"'"'s README: /usr/share/doc/lanchat/README.md where the Debian package is installed.'
see_also_lanchat='.Sh "SEE ALSO"
.Xr lanchatd 1 ,
.Xr avahi-daemon 8
.Pp
The project'"'"'s README: /usr/share/doc/lanchat/README.md where the Debian package is installed.'

for tool in lanchat lanchatd; do
  # The argument parser's dump lists a `help` subcommand for every root command, but a command with no
  # subcommands of its own has none (`lanchatd help` is "Unexpected argument"): the page would show
  # "lanchatd subcommand [options]" and a `help` entry. Dropped from the dump the generator reads.
  "$bin/$tool" --experimental-dump-help | python3 -c '
import json, sys
dump = json.load(sys.stdin)
command = dump["command"]
if [sub["commandName"] for sub in command.get("subcommands", [])] == ["help"]:
    del command["subcommands"]
    command.pop("defaultSubcommand", None)
json.dump(dump, sys.stdout)' > "$work/$tool.json"
  mkdir -p "$work/$tool.bin"
  printf '#!/bin/sh\nexec cat %q\n' "$work/$tool.json" > "$work/$tool.bin/$tool"
  chmod +x "$work/$tool.bin/$tool"
  "$generator" "$work/$tool.bin/$tool" --date "$date" --authors "lanchat developers" -o "$work"
  files=files_$tool see_also=see_also_$tool
  FILES=${!files} SEE_ALSO=${!see_also} awk '
    /^\.Sh "EXIT STATUS"/ { print ENVIRON["FILES"]; files++ }
    /^\.Sh AUTHORS/ { print ENVIRON["SEE_ALSO"]; see_also++ }
    { print }
    END { if (files != 1 || see_also != 1) { print "extras: no EXIT STATUS or AUTHORS section to place FILES and SEE ALSO before" > "/dev/stderr"; exit 1 } }
  ' "$work/$tool.1" > "$out/man/man1/$tool.1"
  gzip -9nf "$out/man/man1/$tool.1"
done
