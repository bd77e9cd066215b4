"""Shell completions and man pages are generated from the commands' argument parsers
(scripts/extras.sh), so they name every subcommand and flag there is."""
import gzip
import os
import subprocess

from testlan import BIN, ROOT


def test_completions_and_man_pages_are_generated_from_the_commands(tmp_path):
    out = tmp_path / "extras"
    subprocess.run([os.path.join(ROOT, "scripts", "extras.sh"), BIN, str(out)], check=True, capture_output=True, timeout=600)
    for tool in ("lanchat", "lanchatd"):
        assert (out / "zsh" / "vendor-completions" / f"_{tool}").read_text().startswith("#compdef")
        assert f"complete -c '{tool}'" in (out / "fish" / "vendor_completions.d" / f"{tool}.fish").read_text()
        # The bash completion loads and registers itself.
        script = out / "bash-completion" / "completions" / tool
        registered = subprocess.run(["bash", "-c", f"source {script} && complete -p {tool}"], capture_output=True, text=True)
        assert registered.returncode == 0 and f" {tool}" in registered.stdout, registered.stderr
        page = gzip.open(out / "man" / "man1" / f"{tool}.1.gz", "rt").read()
        assert f".Nm {tool}" in page
    lanchat = gzip.open(out / "man" / "man1" / "lanchat.1.gz", "rt").read()
    for subcommand in ("peers", "invite", "send-file", "stream", "connect", "disconnect", "doctor"):
        assert f"Em {subcommand}" in lanchat, subcommand
    assert "static-peer" in gzip.open(out / "man" / "man1" / "lanchatd.1.gz", "rt").read()
    assert "connect" in (out / "bash-completion" / "completions" / "lanchat").read_text()
