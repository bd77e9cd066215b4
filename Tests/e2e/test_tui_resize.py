"""The terminal UI after a resize of its window (issue 32): the conversation is drawn again wrapped to the
new width and bottom-aligned, a message wider than the window keeps all its rows (also when it is not the
last), and no empty rows are left between the conversation and the status line. Driven in tmux."""
import os
import re
import shutil
import time
import unicodedata

import pytest

from test_tui import Tmux
from testlan import BIN, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh test installs it)")

LONG = "this message is longer than forty columns and must wrap in full, every word of it"
WIDE = "wide " + "漢字" * 15  # 35 characters, 65 columns: one wide character falls on a row's last column
LAST = "the last one"


class Window(Tmux):
    """lanchat in a tmux window of its own, inside a host's namespaces, in UTF-8 (tmux -u, LANG=C.UTF-8),
    resized at will."""
    options = ("-u",)

    def __init__(self, lan, host, name, command, width, height):
        super().__init__(lan, host, name, command, width, height, env=("LANG=C.UTF-8",))

    def resize(self, width, height):
        self.tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))
        self.height = height


def columns(text):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap(line, width):
    """A line cut into rows as a terminal (and ConversationLayout) cuts it, trailing spaces removed as
    capture-pane removes them."""
    rows, row, used = [], "", 0
    for c in line:
        w = columns(c)
        if used + w > width and used > 0:
            rows.append(row)
            row, used = "", 0
        row += c
        used += w
    rows.append(row)
    return [r.rstrip() for r in rows]


def check_conversation(lines, width, messages):
    """The assertions of issue 32 on a captured pane `width` columns wide; returns a description of what
    is wrong, or None."""
    conversation = lines[:-2]
    if "alice" not in lines[-2] or "[lab]" not in lines[-2]:
        return f"the status line is not on the row above the input line: {lines[-2]!r}"
    # The last message on the row just above the status line.
    if not re.fullmatch(r"\d\d:\d\d:\d\d bob: " + re.escape(LAST), conversation[-1]):
        return f"the row above the status line is {conversation[-1]!r}, not bob's last message"
    # Bottom-aligned: once the conversation starts, no empty row until the status line.
    first = next((i for i, line in enumerate(conversation) if line), len(conversation))
    gaps = [i + 1 for i in range(first, len(conversation)) if not conversation[i]]
    if gaps:
        return f"empty rows {gaps} between the conversation and the status line"
    # Every message wrapped in full at the new width, each on rows of its own, in order.
    index = 0
    for text in messages:
        start = next((i for i in range(index, len(conversation)) if f" bob: {text[:8]}" in conversation[i]), None)
        if start is None:
            return f"bob's message {text[:20]!r}... is not on the screen after row {index + 1}"
        expected = wrap(conversation[start][:9] + "bob: " + text, width)
        shown = conversation[start:start + len(expected)]
        if shown != expected:
            return f"bob's message {text[:20]!r}... is shown on rows {start + 1}-{start + len(expected)} as {shown!r}, expected {expected!r}"
        if any(columns(row) > width for row in conversation):
            return "a row is wider than the window"
        index = start + len(expected)
    return None


def test_a_resized_window_shows_the_conversation_wrapped_to_the_new_width_and_bottom_aligned(lan):
    lan.up(2)
    lan.start_daemon("h1", name="alice")
    lan.start_daemon("h2", name="bob", extra=["--auto-accept", "all"])
    wait_for(lambda: "bob" in {p["name"] for p in lan.peers("h1") if p["addresses"]}, timeout=20, what="discovery")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    ui = Window(lan, "h1", "resized", [os.path.join(BIN, "lanchat")], 100, 30)
    try:
        ui.wait(lambda lines: "[lab] 1/1" in lines[-2] and lines[-1] == "[lab]", "the status and input lines")
        messages = ["first short one", LONG, "a short one in between", WIDE, LAST]
        for text in messages:
            lan.lanchat("h2", "send", "--room", "lab", text)
        ui.wait(lambda lines: LAST in lines[-3], "bob's last message above the status line")
        print("--- tmux capture: 100x30 before the resize\n" + ui.screen())  # shown with pytest -s
        assert check_conversation(ui.lines(), 100, messages) is None, ui.screen()

        for width, height in [(40, 20), (61, 10), (100, 30)]:
            ui.resize(width, height)
            ui.wait(lambda lines: "[lab] 1/1" in lines[-2] and lines[-1] == "[lab]", f"the status line on row {height - 1} of {height}")
            time.sleep(1)  # (the redraw after SIGWINCH, then nothing more)
            screen = ui.screen()
            print(f"--- tmux capture: resized to {width}x{height}\n" + screen)
            problem = check_conversation(ui.lines(), width, messages if height > 10 else messages[-2:])
            assert problem is None, f"after resizing to {width}x{height}: {problem}\nthe screen:\n{screen}"

        # Ctrl-L draws it all again the same way.
        before = ui.screen()
        ui.tmux("send-keys", "-t", "resized", "C-l")
        time.sleep(1)
        assert ui.screen() == before
    finally:
        ui.close()
