"""The terminal UI of `lanchat` (no subcommand, on a terminal), driven in tmux as a person would:
messages scroll above a fixed input line, a half-typed line survives messages and an invitation
prompt, the status line shows the room and a transfer's progress, and the terminal is restored."""
import os
import shutil
import subprocess
import time

import pytest

from testlan import BIN, read_line, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh test installs it)")


class Tmux:
    """lanchat in a tmux session of its own (`width` x `height`), inside a host's namespaces; `env`: more
    VAR=value for it. When it exits, the shell prints its exit status and stty's terminal modes."""
    options = ()  # the tmux client's

    def __init__(self, lan, host, name, command, width=100, height=24, env=()):
        self.name = name
        self.height = height
        self.socket = os.path.join(lan.dir, "tmux.sock")
        argv = " ".join(lan.ns_prefix(host) + command)
        variables = " ".join(["TERM=xterm-256color", *env, f"LANCHAT_CONTROL_TRACE={lan.trace}"])
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                  f"env {variables} {argv}; echo EXITED $?; stty -a | tr ';' '\\n' | grep -E 'icanon|echo' | head -3; sleep 60")

    def tmux(self, *args):
        return subprocess.run(["tmux", *self.options, "-S", self.socket, *args], check=True, capture_output=True, text=True, timeout=10).stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", self.name, *keys)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def lines(self):
        """The pane's rows, trailing spaces removed (the last two: the status line and the input line)."""
        lines = self.screen().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line.rstrip() for line in (lines + [""] * self.height)[:self.height]]

    def wait(self, predicate, what, timeout=30):
        try:
            return wait_for(lambda: predicate(self.lines()), timeout=timeout, what=what)
        except AssertionError as error:
            raise AssertionError(f"{error}\nthe screen then:\n{self.screen()}") from None

    def close(self):
        # This session only (another may share the server; the server ends with its last session).
        subprocess.run(["tmux", "-S", self.socket, "kill-session", "-t", self.name], capture_output=True, timeout=10)


def test_messages_arrive_above_a_half_typed_line(lan):
    lan.up(3)
    lan.start_daemon("h1", name="alice")
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    lan.start_daemon("h3", name="carol", extra=["--auto-accept", "all"])
    wait_for(lambda: {"bob", "carol"} <= {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    ui = Tmux(lan, "h1", "alice", [os.path.join(BIN, "lanchat")])
    try:
        ui.wait(lambda lines: "alice" in lines[-2] and "[lab] 1/1" in lines[-2] and lines[-1] == "[lab]", "the status and input lines")
        ui.keys("-l", "half a sente")
        for i in range(3):
            lan.lanchat("h2", "send", "--room", "lab", f"from bob {i}")
        ui.wait(lambda lines: any("bob: from bob 2" in line for line in lines[:-2]), "bob's messages above the status line")
        lines = ui.lines()
        print("--- tmux capture: a half-typed line while messages arrive\n" + ui.screen())  # shown with pytest -s
        assert lines[-1] == "[lab] half a sente", lines[-1]
        assert [line for line in lines if "from bob" in line][-3:] == [line for line in lines[:-2] if "from bob" in line]
        # The line goes on being typed and is sent whole.
        ui.keys("-l", "nce")
        ui.keys("Enter")
        wait_for(lambda: "half a sentence" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab")], what="alice's line at bob")
        ui.wait(lambda lines: lines[-1] == "[lab]", "an empty input line after sending")
        ui.wait(lambda lines: any("alice: half a sentence" in line for line in lines[:-2]), "alice's own line in the conversation")

        # An invitation while typing: asked in the input line; the typed text comes back after the answer.
        ui.keys("-l", "draft")
        lan.lanchat("h3", "invite", "alice", "--room", "ops", "--message", "incident")
        ui.wait(lambda lines: "accept invitation from carol" in lines[-1] and "[y/N]" in lines[-1], "the invitation prompt")
        print("--- tmux capture: an invitation while typing 'draft'\n" + ui.screen())
        ui.keys("-l", "y")
        ui.wait(lambda lines: lines[-1].endswith("draft") and "joined ops" in "\n".join(lines), "the draft back after accepting")
        assert "ops" in [r["room"] for r in lan.lanchat_json("h1", "rooms")]

        # A file transfer's progress in the status line (the link slowed so it lasts).
        lan.run("h1", ["tc", "qdisc", "replace", "dev", "lan0", "root", "tbf", "rate", "40mbit", "burst", "64kb", "latency", "200ms"])
        source = os.path.join(lan.dir, "big.bin")
        with open(source, "wb") as f:
            f.write(os.urandom(40 << 20))
        sender = lan.popen("h1", [os.path.join(BIN, "lanchat"), "send-file", "--to", "bob", source],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        captured = ui.wait(lambda lines: "↑ big.bin" in lines[-2] and "%" in lines[-2], "the transfer in the status line", timeout=30)
        assert captured
        print("--- tmux capture: a transfer's progress in the status line\n" + ui.screen())
        sender.wait(timeout=120)
        ui.wait(lambda lines: "↑ big.bin" not in lines[-2] and any("big.bin" in l and "complete" in l for l in lines), "the transfer ended")

        # Ctrl-C leaves and gives the terminal back (canonical mode and echo on).
        ui.keys("C-c")
        ui.wait(lambda lines: any(line.startswith("EXITED 0") for line in lines), "lanchat to exit")
        ui.wait(lambda lines: any("icanon" in line for line in lines), "stty's report after lanchat exited")
        after = ui.screen()
        assert " icanon" in after and " echo" in after and "-icanon" not in after, after
    finally:
        ui.close()


def test_line_mode_stays_for_dumb_terminals_and_pipes(lan):
    lan.up(1)
    lan.start_daemon("h1", name="alice")
    piped = lan.run("h1", [os.path.join(BIN, "lanchat")], input="/rooms\n/quit\n")
    assert "you are in no room" in piped.stdout and "\x1b[" not in piped.stdout


def test_resize_sigterm_and_a_stopping_daemon_leave_the_terminal_sane(lan):
    lan.up(1)
    alice = lan.start_daemon("h1", name="alice")
    ui = Tmux(lan, "h1", "resize", [os.path.join(BIN, "lanchat")])
    try:
        ui.wait(lambda lines: "alice" in lines[-2] and lines[-1] == "[-]", "the status and input lines")
        # A smaller window: the status and input lines move to its bottom.
        ui.tmux("resize-window", "-t", "resize", "-x", "70", "-y", "16")
        ui.wait(lambda lines: len(ui.screen().split("\n")) >= 16 and "alice" in ui.screen().split("\n")[14], "the status line on row 15 of 16")
        ui.keys("-l", "typed")
        # SIGTERM: the terminal comes back.
        lan.run("h1", ["pkill", "-TERM", "-x", "lanchat"])
        ui.wait(lambda lines: any(line.startswith("EXITED") for line in lines), "lanchat to exit on SIGTERM")
        # (The shell prints stty's report a moment after EXITED: wait for it, not only for EXITED.)
        ui.wait(lambda lines: any("icanon" in line for line in lines), "stty's report after lanchat exited")
        assert " icanon" in ui.screen() and "-icanon" not in ui.screen()
    finally:
        ui.close()
    ui = Tmux(lan, "h1", "stopping", [os.path.join(BIN, "lanchat")])
    try:
        ui.wait(lambda lines: "alice" in lines[-2], "the status line")
        alice.stop()
        ui.wait(lambda lines: any(line.startswith("EXITED 1") for line in lines), "lanchat to exit when the daemon stops")
        ui.wait(lambda lines: any("icanon" in line for line in lines), "stty's report after lanchat exited")
        screen = ui.screen()
        assert "lanchatd closed the connection" in screen and " icanon" in screen and "-icanon" not in screen, screen
    finally:
        ui.close()


def test_the_terminal_ui_goes_on_after_an_idle_period_longer_than_the_control_timeout(lan):
    # The UI keeps a watch (never idle) and one connection for its calls, which the daemon closes when
    # idle: the next call connects again by itself.
    lan.up(2)
    config = os.path.join(lan.dir, "idle.conf")
    with open(config, "w") as f:
        f.write("control-idle-timeout = 2\n")
    lan.start_daemon("h1", name="alice", extra=["--config", config])
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    wait_for(lambda: "bob" in {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    ui = Tmux(lan, "h1", "idle", [os.path.join(BIN, "lanchat")])
    try:
        ui.wait(lambda lines: "[lab] 1/1" in lines[-2] and lines[-1] == "[lab]", "the status and input lines")
        time.sleep(5)
        ui.keys("-l", "said after an idle while")
        ui.keys("Enter")
        wait_for(lambda: "said after an idle while" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab")],
                 what="alice's line at bob")
        time.sleep(5)
        ui.keys("-l", "/members")
        ui.keys("Enter")
        ui.wait(lambda lines: any(line.startswith("bob (") and " connected" in line for line in lines[:-2]), "the members after another idle while")
        # Events still arrive on the watch.
        lan.lanchat("h2", "send", "--room", "lab", "still here")
        ui.wait(lambda lines: any("bob: still here" in line for line in lines[:-2]), "bob's message")
        screen = ui.screen()
        assert "error" not in screen and "EXITED" not in screen, screen
    finally:
        ui.close()


def test_typing_shows_in_the_others_status_line_and_not_with_no_typing(lan):
    """Issue 13, item 7: with `--no-typing` alice's keystrokes tell nobody; without it, bob's terminal UI
    shows "alice is typing…" while she types (no Enter), and not 5 s later."""
    lan.up(2)
    lan.start_daemon("h1", name="alice")
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    wait_for(lambda: "bob" in {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    watch = lan.popen("h2", [os.path.join(BIN, "lanchat"), "watch", "--json"], stdout=subprocess.PIPE, text=True)
    quiet = Tmux(lan, "h1", "quiet", [os.path.join(BIN, "lanchat"), "--no-typing"])
    try:
        quiet.wait(lambda lines: "[lab] 1/1" in lines[-2] and lines[-1] == "[lab]", "the --no-typing UI's status and input lines")
        quiet.keys("-l", "secret draft")
        quiet.wait(lambda lines: lines[-1].endswith("secret draft"), "the half-typed line")
        with pytest.raises(AssertionError):
            read_line(watch.stdout, 4, "a typing event (there must be none)", match=lambda l: '"typing"' in l)
        quiet.keys("Enter")  # the keys did reach it: the line is sent
        wait_for(lambda: "secret draft" in [m["text"] for m in lan.lanchat_json("h2", "history", "--room", "lab")], what="the line at bob")
    finally:
        quiet.close()
        watch.kill()
    alice = Tmux(lan, "h1", "alice", [os.path.join(BIN, "lanchat")])
    bob = Tmux(lan, "h2", "bob", [os.path.join(BIN, "lanchat")])
    try:
        alice.wait(lambda lines: "[lab] 1/1" in lines[-2] and lines[-1] == "[lab]", "alice's status and input lines")
        bob.wait(lambda lines: "[lab] 1/1" in lines[-2], "bob's status line")
        alice.keys("-l", "hel")
        bob.wait(lambda lines: "alice is typing" in lines[-2], "alice typing in bob's status line", timeout=10)
        bob.wait(lambda lines: "typing" not in lines[-2], "the typing notice gone after 5 s", timeout=15)
    finally:
        alice.close()
        bob.close()
