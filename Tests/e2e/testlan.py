"""Test support around scripts/testlan.sh: a simulated LAN with real avahi-daemons, and lanchatd on it.

Every LAN gets its own state directory, and `down()` tears it all down (also after a failing test,
through the pytest fixture)."""
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "testlan.sh")
BIN = os.environ.get("LANCHAT_BIN", os.path.join(ROOT, ".build", "debug"))


def wait_for(predicate, timeout=10.0, interval=0.1, what="condition"):
    """Polls until predicate() returns something truthy; returns it, or fails naming what it waited for."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (subprocess.CalledProcessError, json.JSONDecodeError, KeyError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


class _End:
    """What _LineReader queues last: why the stream ended."""

    def __init__(self, reason):
        self.reason = reason


class _LineReader:
    """Reads one pipe line by line on a thread of its own, into a queue of (arrival time, line), so that a
    wait for a line can have a deadline whatever the pipe's mode (text or bytes) and whatever its file
    object has buffered already. The last item is an _End."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        self.end = None
        threading.Thread(target=self._pump, args=(stream,), daemon=True, name="read_line").start()

    def _pump(self, stream):
        try:
            for line in stream:
                self.lines.put((time.monotonic(), line))
            reason = "end of file"
        except (OSError, ValueError) as error:   # ValueError: the file object was closed
            reason = f"read failed: {error!r}"
        self.lines.put((time.monotonic(), _End(reason)))


_READERS = weakref.WeakKeyDictionary()
_READERS_LOCK = threading.Lock()


def read_line(stream, timeout, what, match=None, with_time=False):
    """Waits at most `timeout` seconds for the next line from `stream` (a text or binary pipe of a
    `subprocess.Popen`) and returns it, with its newline; with `match`, for the next line for which
    match(line) is true, skipping the others. With `with_time`, returns (time.monotonic() when the line
    arrived, line). Fails (AssertionError) naming `what` when the time is up or the stream ends first.

    The first call starts a thread that reads the stream from then on: read that stream only through
    read_line afterwards."""
    with _READERS_LOCK:
        reader = _READERS.get(stream)
        if reader is None:
            reader = _READERS[stream] = _LineReader(stream)
    deadline = time.monotonic() + timeout
    while True:
        if reader.end is not None:
            raise AssertionError(f"the stream ended ({reader.end.reason}) while waiting for {what}")
        try:
            stamp, line = reader.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"timed out after {round(timeout, 2):g}s waiting for {what}") from None
        if isinstance(line, _End):
            reader.end = line
            continue
        if match is None or match(line):
            return (stamp, line) if with_time else line


def wait_process(process, timeout, what):
    """`process.wait(timeout)`, failing (AssertionError) with a message naming `what` when the time is up;
    returns the exit status."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"timed out after {round(timeout, 2):g}s waiting for {what}") from None


class Daemon:
    def __init__(self, lan, host, name, args, log_path, socket, prefix=(), start_timeout=20):
        self.lan, self.host, self.name, self.socket = lan, host, name, socket
        self.start_timeout = start_timeout
        self.log_path = log_path
        self.args = args
        self.prefix = list(prefix)
        self.process = None
        self.start()

    def start(self):
        log = open(self.log_path, "ab")
        self.process = self.lan.popen(self.host, self.prefix + [os.path.join(BIN, "lanchatd")] + self.args, stdout=log, stderr=log)
        # Ready when the control socket answers.
        wait_for(lambda: self.lan.lanchat(self.host, "status", "--json", socket=self.socket, check=False).returncode == 0
                 or self.process.poll() is not None, timeout=self.start_timeout, what=f"lanchatd on {self.host}")
        if self.process.poll() is not None:
            raise AssertionError(f"lanchatd on {self.host} exited {self.process.returncode}: {self.log()}")

    def status(self):
        return self.lan.lanchat_json(self.host, "status", socket=self.socket)

    def pid(self):
        """The daemon's pid inside its host's PID namespace."""
        return self.status()["pid"]

    def send_signal(self, sig):
        self.lan.run(self.host, ["kill", f"-{sig.name[3:]}", str(self.pid())])

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.process.poll() is None:
            self.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()


class TestLAN:
    """Each host starts with empty /run, /tmp, /var/lib, /home and /root of its own (scripts/testlan-host.sh):
    it sees only this LAN's directory (`self.dir`, where tests put the files they send), the project, and
    the directories in `keep` (for example pytest's temporary directories)."""

    def __init__(self, keep=()):
        self.dir = tempfile.mkdtemp(prefix="lanchat-e2e-")
        self.env = dict(os.environ, TESTLAN_DIR=os.path.join(self.dir, "lan"),
                        TESTLAN_KEEP=":".join([self.dir, *map(str, keep)]))
        # Every control answer and event a client on a host reads is appended here (LANCHAT_CONTROL_TRACE);
        # the test fixture checks each line against docs/control-api.schema.json.
        self.trace = os.path.join(self.dir, "control-trace.jsonl")
        self.host_env = dict(os.environ, LANCHAT_CONTROL_TRACE=self.trace)
        self.daemons = []
        self.processes = []

    def script(self, *args, check=True, capture=True, timeout=60):
        return subprocess.run([SCRIPT, *args], env=self.env, check=check, capture_output=capture, text=True, timeout=timeout)

    def up(self, count):
        self.script("up", str(count), timeout=60 + 2 * count)  # (each host starts its own avahi-daemon)
        return self

    def add_host(self, name, avahi=True, subnet=1):
        self.script("add-host", name, *([] if avahi else ["--no-avahi"]), *(["--subnet", "2"] if subnet == 2 else []))

    def router(self, name):
        """A host joining subnet 1 (198.18.0.x) and subnet 2 (198.18.1.x) that routes unicast between
        them; multicast (mDNS) does not cross."""
        self.script("router", name)

    def addr(self, host):
        return self.script("addr", host).stdout.strip()

    def ns_prefix(self, host):
        pid = self.script("pid", host).stdout.strip()
        return ["nsenter", "-t", pid, "-n", "-m", "-u", "-p", "--"]

    def run(self, host, argv, check=True, timeout=60, input=None, text=True):
        return subprocess.run(self.ns_prefix(host) + list(argv), check=check, capture_output=True, text=text,
                              timeout=timeout, input=input, env=self.host_env)

    def popen(self, host, argv, **kwargs):
        kwargs.setdefault("env", self.host_env)
        process = subprocess.Popen(self.ns_prefix(host) + list(argv), **kwargs)
        self.processes.append(process)
        return process

    def lanchat(self, host, *args, socket=None, check=True, timeout=30):
        argv = [os.path.join(BIN, "lanchat"), *args] + (["--socket", socket] if socket else [])
        return self.run(host, argv, check=check, timeout=timeout)

    def lanchat_json(self, host, *args, socket=None):
        return json.loads(self.lanchat(host, *args, "--json", socket=socket).stdout)

    def wire_client(self, host, target, port, scenario, *extra, timeout=60):
        """Runs Tests/e2e/wire_client.py (an independent client side of the wire protocol) on `host`
        against the daemon on `target`; returns the observations it prints."""
        client = os.path.join(ROOT, "Tests", "e2e", "wire_client.py")
        return json.loads(self.run(host, ["python3", client, self.addr(target), str(port), scenario, *extra], timeout=timeout).stdout)

    def start_daemon(self, host, name=None, extra=(), socket=None, tag=None, default_paths=False, prefix=(), start_timeout=20):
        """Starts lanchatd on `host`: with its state in this LAN's directory (`tag/state`), or, with
        `default_paths`, with only the flags in `extra`, as a person would start it (state, socket and
        downloads where the daemon puts them by default, inside the host's fresh directories).
        `prefix`: a command that runs the daemon (e.g. setpriv to run it as another user); `start_timeout`:
        how long its control socket may take to answer (longer under valgrind)."""
        tag = tag or host
        os.makedirs(os.path.join(self.dir, tag), exist_ok=True)
        if default_paths:
            args = list(extra)
        else:
            state = os.path.join(self.dir, tag, "state")
            os.makedirs(state, exist_ok=True)
            args = ["--state-dir", state, "--log-level", "debug", *extra]
        if name:
            args += ["--name", name]
        if socket:
            args += ["--socket", socket]
        daemon = Daemon(self, host, name, args, os.path.join(self.dir, tag, "lanchatd.log"), socket, prefix, start_timeout)
        self.daemons.append(daemon)
        return daemon

    def peers(self, host, socket=None, all=False):
        return self.lanchat_json(host, "peers", *(["--all"] if all else []), socket=socket)

    def down(self, keep=False):
        """Stops everything; removes the LAN's files unless `keep` (a failed test keeps its logs)."""
        for daemon in self.daemons:
            if daemon.process and daemon.process.poll() is None:
                try:
                    daemon.stop(timeout=5)
                except Exception:
                    daemon.process.kill()
        self.script("down", check=False)
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if keep:
            print(f"kept for inspection: {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
