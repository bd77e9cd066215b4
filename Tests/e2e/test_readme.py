"""The README's first conversation (issue 32), run as written on a demo LAN.

The commands come from README.md itself: the ```console block after the `first-conversation` comment,
where each "$ " line is a command and the lines after it are what it printed when the README was
written. The test starts a demo LAN as `scripts/run.sh --demo` does (three hosts; lanchatd with default
paths on each, started through scripts/demo.sh; h2 and h3 with --auto-accept all, h1 asking), in the
test's own directory and with the debug build (LANCHAT_DEMO_DIR and LANCHAT_DEMO_BIN, read by
scripts/demo.sh), and waits, as run.sh does, until h1 lists the two others. Then it runs each command
line as it is written, with bash, from the project's root, on a terminal (script(1): a person pasting it
sees a terminal), where `sudo` runs its arguments as they are: the README says that as root one leaves
`sudo` out, and the tests run as root. It checks:
- every command exits 0;
- each output has the README's shape: the same lines once every word with a digit in it and every peer
  id is masked (ids, times, addresses, sizes, rates, hashes), in any order (which member a file
  reaches first varies);
- the outcomes: both invitations accepted, both messages in h2's history, h3 connected in h2's view of
  lab (a mesh), and h2's copy of the file with the SHA-256 of h1's."""
import os
import re
import subprocess

from testlan import BIN, ROOT, wait_for

README = os.path.join(ROOT, "README.md")
MARKER = "<!-- first-conversation:"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def readme_conversation():
    """[(command, [lines the README shows it printing])] from the README's first-conversation block."""
    text = open(README, encoding="utf-8").read()
    assert text.count(MARKER) == 1, f"README.md must have exactly one {MARKER!r} comment"
    block = re.search(r"```console\n(.*?)```", text[text.index(MARKER):], re.S)
    assert block, "no ```console block after the first-conversation comment"
    steps = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before the first command: {line!r}"
            steps[-1][1].append(line)
    return steps


def screen(raw):
    """What a terminal shows of `raw`: each line as its last carriage return left it, without escapes."""
    lines = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        segments = [ANSI.sub("", segment) for segment in line.split("\r")]
        shown = [segment for segment in segments if segment.strip()]
        lines.append(shown[-1] if shown else "")
    return [line for line in lines if line.strip()]


def shape(line):
    """A line with what differs from run to run masked: any word with a digit, and peer ids (12 base32
    characters, which may happen to have no digit)."""
    return " ".join("#" if re.search(r"\d", word) or re.fullmatch(r"\(?[a-z2-7]{12}\)?", word) else word
                    for word in line.split())


def test_the_readme_first_conversation_runs_as_written(lan):
    steps = readme_conversation()
    commands = [command for command, _ in steps]
    assert len(commands) >= 8, commands
    # Nothing else than commands on the demo's hosts: never run.sh without --demo, never this machine.
    for command in commands:
        assert command.startswith("sudo scripts/demo.sh h"), f"not a command on a demo host: {command}"

    demo = lan.dir
    env = dict(os.environ, LANCHAT_DEMO_DIR=demo, LANCHAT_DEMO_BIN=BIN, TERM="xterm", AVAHI_COMPAT_NOWARN="1")
    # The demo LAN, as `scripts/run.sh --demo` makes it (TESTLAN_DIR is the demo directory's lan/).
    lan.up(3)
    for host in ("h1", "h2", "h3"):
        os.makedirs(os.path.join(demo, host), exist_ok=True)
        log = open(os.path.join(demo, host, "lanchatd.log"), "ab")
        accept = "never" if host == "h1" else "all"
        lan.processes.append(subprocess.Popen(
            [os.path.join(ROOT, "scripts", "demo.sh"), host, "lanchatd", "--auto-accept", accept],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def demo_run(*argv):
        return subprocess.run([os.path.join(ROOT, "scripts", "demo.sh"), *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=30)

    try:
        wait_for(lambda: demo_run("h1", "lanchat", "peers", "--json").stdout.count('"name"') == 2, timeout=30,
                 what="h1 listing h2 and h3 (as run.sh --demo waits for)")

        outputs = []
        for number, (command, shown) in enumerate(steps, 1):
            script = os.path.join(demo, f"step-{number}.sh")
            with open(script, "w") as f:
                f.write('sudo() { "$@"; }\n' + command + "\n")
            try:
                done = subprocess.run(["script", "-q", "-e", "-c", f"bash {script}", "/dev/null"], cwd=ROOT, env=env,
                                      stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"timed out after 120 s: {command}") from None
            seen = screen(done.stdout.decode(errors="replace"))
            assert done.returncode == 0, f"{command}\nexited {done.returncode}:\n" + "\n".join(seen)
            assert sorted(map(shape, seen)) == sorted(shape(line) for line in shown if line.strip()), (
                f"{command}\nprinted:\n" + "\n".join(seen) + "\nthe README shows:\n" + "\n".join(shown))
            outputs.append((command, seen))

        def output(pattern):
            found = [seen for command, seen in outputs if re.search(pattern, command)]
            assert len(found) == 1, f"one command matching {pattern!r}: {commands}"
            return found[0]

        assert re.fullmatch(r"root@h2 \(\w+\) accepted lab \(.* ms\)", output(r"h1 lanchat invite root@h2")[0].strip())
        assert re.fullmatch(r"root@h3 \(\w+\) accepted lab \(.* ms\)", output(r"h1 lanchat invite root@h3")[0].strip())
        history = output(r"h2 lanchat history")
        assert any(line.endswith("[lab] root@h1: hello everyone") for line in history), history
        assert any(line.endswith("[lab] root@h3: hi from h3") for line in history), history
        members = {line.split()[0]: line.split() for line in output(r"h2 lanchat members lab")[1:]}
        assert members["root@h3"][2] == "connected" and members["root@h1"][-1] == "admin", members
        sent = output(r"h1 sha256sum photo.bin")[0].split()
        received = output(r"h2 sha256sum /var/lib/lanchat/downloads/photo.bin")[0].split()
        assert re.fullmatch(r"[0-9a-f]{64}", sent[0]) and received == [sent[0], "/var/lib/lanchat/downloads/photo.bin"], (sent, received)
    except AssertionError:
        for host in ("h1", "h2", "h3"):
            with open(os.path.join(demo, host, "lanchatd.log"), errors="replace") as f:
                print(f"\n--- lanchatd log on {host}:\n{f.read()[-4000:]}")
        raise
