"""lanchatd's control API from Python: newline-delimited JSON on a Unix socket (docs/control-api.md).

One connection per call, as the `lanchat` CLI does; `watch()` keeps one open and yields events.
Every read has a deadline; errors the daemon reports raise `LanchatError` with the API's code."""
from __future__ import annotations

import json
import os
import secrets
import socket
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

__all__ = ["Client", "LanchatError", "Watch", "default_socket_path"]

Json = Dict[str, Any]

#: Longest answer line accepted (a long history can be large).
MAX_LINE = 64 * 1024 * 1024
_ENDED = ("complete", "refused", "failed", "cancelled")


class LanchatError(Exception):
    """A failure: `code` is the control API's stable error code (or `connection`, `timeout`,
    `bad_response` for failures on this side), `message` says what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def default_socket_path(explicit: Optional[str] = None, environ: Mapping[str, str] = os.environ) -> str:
    """The daemon's socket, found as the CLI finds it."""
    if explicit:
        return explicit
    if environ.get("LANCHAT_SOCKET"):
        return environ["LANCHAT_SOCKET"]
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        candidate = os.path.join(runtime, "lanchat", "lanchatd.sock")
        if os.path.exists(candidate):
            return candidate
    return "/run/lanchat/lanchatd.sock"


class _Connection:
    """One control connection: requests out, lines in, each read within `timeout` seconds."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.buffer = b""
        self.next_id = 1
        try:
            self.sock.connect(path)
        except FileNotFoundError:
            self.sock.close()
            raise LanchatError("connection", f"lanchatd is not running: no socket at {path}") from None
        except PermissionError:
            self.sock.close()
            raise LanchatError("permission_denied", f"no permission to use {path} (the daemon's user or its --socket-group may)") from None
        except OSError as error:
            self.sock.close()
            raise LanchatError("connection", f"cannot connect to {path}: {error}") from None

    def request(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Json:
        body: Json = {"id": self.next_id, "method": method}
        self.next_id += 1
        if params:
            body["params"] = {key: _text(value) for key, value in params.items() if value is not None}
        self.sock.sendall(json.dumps(body).encode() + b"\n")
        return self.answer()

    def answer(self) -> Json:
        line = self.read_line()
        try:
            response = json.loads(line)
        except ValueError:
            raise LanchatError("bad_response", f"the daemon sent a line that is not JSON: {line[:200]!r}") from None
        if not response.get("ok", False) and "error" in response:
            error = response["error"] or {}
            raise LanchatError(error.get("code", "error"), error.get("message", "(no message)"))
        return response

    def read_line(self) -> bytes:
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise LanchatError("timeout", "lanchatd did not answer in time") from None
            if not chunk:
                raise LanchatError("connection", "lanchatd closed the connection (it stopped?)")
            self.buffer += chunk
            if len(self.buffer) > MAX_LINE:
                raise LanchatError("bad_response", f"an answer longer than {MAX_LINE} bytes")
        line, _, self.buffer = self.buffer.partition(b"\n")
        trace = os.environ.get("LANCHAT_CONTROL_TRACE")
        if trace:  # every line read, for the end-to-end tests' schema check (docs/control-api.md)
            with open(trace, "ab") as f:
                f.write(line + b"\n")
        return line

    def close(self) -> None:
        self.sock.close()


def _text(value: Any) -> str:
    """Control parameters are strings: booleans as true/false, lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class Client:
    """A lanchatd on this machine. `timeout`: seconds any single answer may take."""

    def __init__(self, socket_path: Optional[str] = None, timeout: float = 30.0) -> None:
        self.socket_path = default_socket_path(socket_path)
        self.timeout = timeout

    def call(self, method: str, timeout: Optional[float] = None, **params: Any) -> Json:
        """One request; the whole answer (`ok`, and the method's field)."""
        connection = _Connection(self.socket_path, timeout if timeout is not None else self.timeout)
        try:
            return connection.request(method, params)
        finally:
            connection.close()

    # The daemon and the network
    def status(self) -> Json:
        return self.call("status")["status"]

    def peers(self) -> List[Json]:
        return self.call("peers")["peers"]

    def connect(self, address: str, confirm: Optional[str] = None) -> Json:
        """Who answers at HOST[:PORT]; with `confirm` (the id you checked), keep it as a static peer."""
        return self.call("connect", address=address, confirm=confirm)["connect"]

    # Invitations and rooms
    def invite(self, peer: str, room: Optional[str] = None, message: Optional[str] = None,
               timeout: Optional[float] = None, wait: bool = False) -> Json:
        """Invites `peer` (name, instance or id prefix) into `room`; with `wait`, answers once the peer has
        (`outcome`: accepted, declined, expired, ...), so the read may take the invitation's timeout."""
        params: Dict[str, Any] = {"peer": peer, "room": room, "message": message}
        if timeout is not None:
            params["timeout"] = timeout
        if wait:
            params["wait"] = True
        connection = _Connection(self.socket_path, ((timeout or 60) + self.timeout) if wait else self.timeout)
        try:
            return connection.request("invite", params)["invite"]
        finally:
            connection.close()

    def invitations(self) -> List[Json]:
        return self.call("invitations")["invitations"]

    def accept(self, invitation: str) -> Json:
        return self.call("accept", id=invitation)["invitation"]

    def decline(self, invitation: str, reason: Optional[str] = None) -> Json:
        return self.call("decline", id=invitation, reason=reason)["invitation"]

    def rooms(self) -> List[Json]:
        return self.call("rooms")["rooms"]

    def members(self, room: Optional[str] = None) -> Json:
        return self.call("members", room=room)["room"]

    def leave(self, room: str) -> None:
        self.call("leave", room=room)

    # Messages
    def send(self, text: str, room: Optional[str] = None, to: Optional[Sequence[str]] = None, reliable: bool = True) -> Json:
        return self.call("send", text=text, room=room, to=list(to) if to else None, reliable=None if reliable else False)["sent"]

    def history(self, room: Optional[str] = None, limit: Optional[int] = None) -> List[Json]:
        return self.call("history", room=room, limit=limit)["history"]

    # Files
    def transfers(self) -> List[Json]:
        return self.call("transfers")["transfers"]

    def cancel(self, transfer: str) -> Json:
        return self.call("cancel", id=transfer)["transfer"]

    def send_file(self, path: str, peer: str, progress: Optional[Callable[[Json], None]] = None,
                  timeout: float = 3600.0) -> Json:
        """Sends a file and waits for its end; `progress` is called with each transfer update. Returns the
        last update (`state`: complete, refused, failed or cancelled). The file is opened here and its
        descriptor handed to the daemon (as `lanchat send-file` does), so a daemon running as another
        user sends files it could not open itself."""
        path = os.path.abspath(path)
        params: Dict[str, Any] = {"peer": peer, "path": path}
        watcher = _Connection(self.socket_path, self.timeout)
        try:
            watcher.request("watch")
            token = self._hand_over(path)
            if token:
                params["file_token"] = token
            entry = self.call("send-file", timeout=max(self.timeout, 600), **params)["transfer"]
            if progress:
                progress(entry)
            deadline = time.monotonic() + timeout
            while entry["state"] not in _ENDED:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LanchatError("timeout", f"the transfer of {path} did not end within {timeout} s")
                watcher.sock.settimeout(left)
                event = watcher.answer().get("event") or {}
                update = event.get("transfer")
                if update and update.get("id") == entry["id"]:
                    entry = update
                    if progress:
                        progress(entry)
            return entry
        finally:
            watcher.close()

    def _hand_over(self, path: str) -> Optional[str]:
        """Passes an open descriptor of `path` on `<socket>.files`; the token naming it, or None if this
        daemon takes no descriptors (then it opens the path itself)."""
        files = self.socket_path + ".files"
        if not os.path.exists(files):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if not os.path.isfile(path):
                raise LanchatError("bad_file", f"{path} is not a regular file")
            token = secrets.token_hex(16)
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as passer:
                passer.settimeout(self.timeout)
                passer.connect(files)
                socket.send_fds(passer, [token.encode()], [fd])
                answer = passer.recv(512).decode(errors="replace")
            if answer != "ok":
                raise LanchatError("bad_file", f"the daemon did not take the file: {answer}")
            return token
        finally:
            os.close(fd)

    # Events
    def watch(self, timeout: Optional[float] = None) -> "Watch":
        """Events from now on (found, lost, invitation, message, transfer, ...), each a dict with `type`
        and `time`, as an iterator; subscribed when this returns. `timeout`: raise LanchatError('timeout')
        when no event comes for that long (default: wait for ever). `close()` (or a `with` block) stops."""
        return Watch(self.socket_path, self.timeout, timeout)


class Watch:
    """An open `watch`: iterate for events."""

    def __init__(self, path: str, answer_timeout: float, event_timeout: Optional[float]) -> None:
        self.connection = _Connection(path, answer_timeout)
        try:
            self.connection.request("watch")
        except BaseException:
            self.connection.close()
            raise
        self.connection.sock.settimeout(event_timeout)

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> Json:
        while True:
            event = self.connection.answer().get("event")
            if event is not None:
                return event

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
