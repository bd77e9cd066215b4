"""The browser UI (issue 30), in a real browser: Debian's chromium, headless, driven by selenium, running
inside h1's namespace against `lanchatd --web 8080` there.

The page on h1 lists h2 with the short code; h2's invitation shows and is accepted in the page; a
message typed in the page reaches h2's history and h2's answer appears without a reload; a PNG sent from
h2 shows inline; a file chosen in the page arrives at h2 with the same SHA-256; h2's raised hand shows;
h2's hostile name and message (`<img src=x onerror=...>`) are shown as text, and no element is made of
them. Also: the topic (shown as text, and set from the page), typing, search, presence, a decline with a
reason, an invitation and an administrator made from the page, a room's shared file fetched and one
shared from the page, the WebSocket's JSON checked against the control API's schema, every control
named, nothing wider than 360 px. Requests without the token, with a foreign Host or a foreign Origin
are refused (plain HTTP from h1). A second test runs the daemon as the system service does (a socket
group): the page's files are handed over as descriptors. Screenshots are saved in the test's temporary directory (printed); with LANCHAT_UPDATE_SCREENSHOT=1
the desktop one is also copied to docs/web-ui.png (the README shows it)."""
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import zlib

import pytest

from conftest import _validator
from testlan import BIN, ROOT, wait_for

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401
    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER and HAVE_SELENIUM),
    reason="needs chromium, chromium-driver and selenium (scripts/setup.sh test installs them)")

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"
WEB_PORT = 8080
DRIVER_PORT = 9515


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def png(path, width=160, height=96):
    """A small valid PNG (red to blue stripes), made here."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    rows = b"".join(b"\x00" + b"".join(bytes((255 - x * 255 // width, 64, x * 255 // width)) for x in range(width)) for _ in range(height))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """chromedriver and chromium inside `host`'s namespaces; the test reaches chromedriver through a
    Unix socket in the LAN's directory (socat on each side), since the host's loopback is its own."""

    def __init__(self, lan, host, workdir):
        from selenium import webdriver
        self.lan = lan
        sock = os.path.join(workdir, "chromedriver.sock")
        log = open(os.path.join(workdir, "chromedriver.log"), "wb")
        lan.popen(host, [CHROMEDRIVER, f"--port={DRIVER_PORT}"], stdout=log, stderr=log)
        lan.popen(host, ["socat", f"UNIX-LISTEN:{sock},fork", f"TCP:127.0.0.1:{DRIVER_PORT}"],
                  stdout=subprocess.DEVNULL, stderr=log)
        port = free_port()
        outside = subprocess.Popen(["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork", f"UNIX-CONNECT:{sock}"],
                                   stdout=subprocess.DEVNULL, stderr=log)
        lan.processes.append(outside)
        wait_for(lambda: os.path.exists(sock), timeout=15, what="chromedriver's socket bridge")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    f"--user-data-dir={os.path.join(workdir, 'profile')}", "--window-size=1280,900"):
            options.add_argument(arg)

        def start():
            try:
                return webdriver.Remote(command_executor=f"http://127.0.0.1:{port}", options=options)
            except Exception as error:  # chromedriver not listening yet
                return error if "Connection refused" not in str(error) and "Max retries" not in str(error) else None
        driver = wait_for(start, timeout=60, interval=0.5, what="chromium through chromedriver")
        if isinstance(driver, Exception):
            raise driver
        self.driver = driver
        # Paths go to chromium as they are: it runs on the same host view of the LAN's directory.
        from selenium.webdriver.remote.file_detector import UselessFileDetector
        self.driver.file_detector = UselessFileDetector()
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(30)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def text(self, element_id):
        return self.js("const e = document.getElementById(arguments[0]); return e ? e.textContent : null;", element_id)

    def quit(self):
        try:
            self.driver.quit()
        except Exception:
            pass


# Run in the page: a WebSocket of its own, every answer and event for 2 s.
SOCKET_PROBE = r"""
const done = arguments[arguments.length - 1];
const token = sessionStorage.getItem('lanchat.token');
const socket = new WebSocket(`ws://${location.host}/ws?token=${encodeURIComponent(token)}`);
const got = [];
socket.onopen = () => {
  socket.send(JSON.stringify({ id: 1, method: 'watch' }));
  ['status', 'peers', 'rooms', 'invitations', 'transfers', 'presence'].forEach((method, index) =>
    socket.send(JSON.stringify({ id: index + 2, method })));
  socket.send(JSON.stringify({ id: 8, method: 'history', params: { room: 'lab', limit: '50' } }));
  socket.send(JSON.stringify({ id: 9, method: 'send', params: { room: 'lab', text: 'via the socket' } }));
  socket.send(JSON.stringify({ id: 10, method: 'no-such-method' }));
  socket.send('not json');
};
socket.onmessage = (message) => got.push(message.data);
setTimeout(() => { socket.close(); done(got); }, 2000);
"""

# One control call on the Unix socket; prints the answer line.
CONTROL_CALL = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline())
"""

TYPING = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"id": 1, "method": "typing", "params": {"room": "lab"}}).encode() + b"\n")
assert json.loads(s.makefile().readline())["ok"]
"""

HTTP_PROBE = r"""
import json, socket, sys
port, token, image = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def request(target, headers, method="GET", body=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
        if b"\r\n\r\n" in data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if b" 101 " in head.split(b"\r\n")[0] or (length and len(rest) >= length[0]):
                break
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return {"status": status, "headers": headers, "body": rest[:300].decode(errors="replace")}
host = ("Host", f"127.0.0.1:{port}")
ws = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
q = lambda path: image.replace("/", "%2F")
out = {
    "page": request("/", [host]),
    "ws_no_token": request("/ws", [host] + ws),
    "ws_bad_token": request("/ws?token=" + "0" * 64, [host] + ws),
    "ws_ok": request(f"/ws?token={token}", [host, ("Origin", f"http://127.0.0.1:{port}")] + ws),
    "ws_foreign_origin": request(f"/ws?token={token}", [host, ("Origin", "http://evil.example")] + ws),
    "upload_no_token": request("/upload?name=x", [host, ("Content-Length", "3")], "POST", b"abc"),
    "image_no_token": request(f"/file?path={q(image)}", [host]),
    "image_ok": request(f"/file?path={q(image)}&token={token}", [host]),
    "image_foreign_host": request(f"/file?path={q(image)}&token={token}", [("Host", f"evil.example:{port}")]),
    "image_rebound_host": request(f"/file?path={q(image)}", [("Host", f"attacker.example:{port}"), ("X-Lanchat-Token", token)]),
    "image_foreign_origin": request(f"/file?path={q(image)}", [host, ("Origin", "http://evil.example"), ("X-Lanchat-Token", token)]),
    "outside_downloads": request(f"/file?path=%2Fetc%2Fpasswd&token={token}", [host]),
    "huge_header": request("/", [host, ("X-Big", "a" * 20000)]),
}
print(json.dumps(out))
"""


def test_the_page_chats_answers_invitations_and_files_and_shows_peer_text_as_text(lan, tmp_path):
    lan.up(2)
    downloads_h2 = os.path.join(lan.dir, "h2-downloads")
    lan.start_daemon("h1", name="alice", extra=["--web", str(WEB_PORT)])
    lan.start_daemon("h2", name=HOSTILE, extra=["--download-dir", downloads_h2, "--auto-accept", "all"])
    alice_id = lan.lanchat_json("h1", "status")["id"]
    bob_id = lan.lanchat_json("h2", "status")["id"]

    url = lan.lanchat("h1", "web").stdout.strip()
    access = lan.lanchat_json("h1", "web")
    token = access["token"]
    assert url == f"http://127.0.0.1:{WEB_PORT}/#token={token}" == access["url"], (url, access)
    assert len(token) == 64 and all(c in "0123456789abcdef" for c in token)
    # --open hands the URL to xdg-open (here a stand-in that writes down what it was given).
    fake = os.path.join(lan.dir, "fake-bin")
    os.makedirs(fake)
    with open(os.path.join(fake, "xdg-open"), "w") as f:
        f.write(f"#!/bin/sh\necho \"$@\" > {lan.dir}/opened\n")
    os.chmod(os.path.join(fake, "xdg-open"), 0o755)
    opened = lan.run("h1", ["env", f"PATH={fake}:{os.environ['PATH']}", f"XDG_RUNTIME_DIR={lan.dir}", os.path.join(BIN, "lanchat"), "web", "--open"])
    # xdg-open is given a page in a private file that sends the browser on: the token is on no command line.
    given = open(os.path.join(lan.dir, "opened")).read().strip()
    assert opened.stdout.strip() == url and given == f"file://{lan.dir}/lanchat/open-web.html" and token not in given, given
    redirect = given[len("file://"):]
    assert oct(os.stat(redirect).st_mode & 0o777) == "0o600" and oct(os.stat(os.path.dirname(redirect)).st_mode & 0o777) == "0o700"
    assert f'content="0;url={url}"' in open(redirect).read()
    # The token file has the control socket's permissions (owner only here: no socket group).
    mode = lan.run("h1", ["stat", "-c", "%a", "/run/lanchat/lanchatd.sock.web"]).stdout.strip()
    assert mode == "600", mode
    # Without --web, `lanchat web` says how to turn it on.
    off = lan.lanchat("h2", "web", check=False)
    assert off.returncode == 1 and "without the browser UI" in off.stderr and "--web" in off.stderr, (off.stdout, off.stderr)

    wait_for(lambda: any(p.get("id") == bob_id and p["addresses"] for p in lan.peers("h1")), timeout=30, what="h2 discovered on h1")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nweb UI screenshots: {shots}")
    browser = Browser(lan, "h1", lan.dir)
    try:
        driver = browser.driver
        driver.get(url)
        wait_for(lambda: browser.js("return document.body.dataset.connected") == "true", timeout=20, what="the page connected")
        # The token left the address bar (kept for reloads in this tab only).
        assert "token" not in driver.current_url, driver.current_url
        browser.js("window.__sameLoad = 'yes';")

        # h2 listed with the short code (the page computes it; the daemon's own is in the invitation).
        peer_row = lambda: browser.js(
            "const li = [...document.querySelectorAll('#peers li')].find(e => e.dataset.peerId === arguments[0]);"
            "return li ? {name: li.querySelector('.name').textContent, code: (li.querySelector('.code') || {}).textContent} : null;", bob_id)
        row = wait_for(lambda: (r := peer_row()) and r.get("code") and r, timeout=20, what="h2 in the page's peers with a code")
        assert row["name"] == HOSTILE, row

        # h2 invites h1 (with a hostile message): the page shows it, and the person accepts there.
        lan.lanchat("h2", "invite", alice_id[:12], "--room", "lab", "--message", HOSTILE)
        invitation = wait_for(lambda: lan.lanchat_json("h1", "invitations"), timeout=20, what="the invitation on h1")[0]
        assert row["code"] == invitation["short_code"], (row, invitation)
        wait_for(lambda: browser.js("return document.querySelectorAll('#invitations li').length") == 1, timeout=20,
                 what="the invitation in the page")
        shown = browser.text("invitations")
        assert HOSTILE in shown and invitation["short_code"] in shown, shown
        driver.save_screenshot(str(shots / "invitation.png"))
        browser.js("[...document.querySelectorAll('#invitations button')].find(b => b.textContent === 'Accept').click();")
        wait_for(lambda: browser.text("room-title") == "Room lab", timeout=20, what="the room open in the page")
        wait_for(lambda: [m["name"] for m in lan.lanchat_json("h2", "members", "lab")["members"]] == ["alice"], timeout=20,
                 what="alice a member at h2")

        # A message typed in the page reaches h2's history.
        from selenium.webdriver.common.keys import Keys
        box = driver.find_element("id", "text")
        box.send_keys("hello from the browser", Keys.ENTER)
        wait_for(lambda: any(m["text"] == "hello from the browser" and m["sender"] == "alice"
                             for m in lan.lanchat_json("h2", "history", "--room", "lab")), timeout=20,
                 what="the page's message in h2's history")
        assert "hello from the browser" in lan.lanchat("h2", "history", "--room", "lab").stdout

        # h2's answer and its hostile message appear without a reload, as text.
        lan.lanchat("h2", "send", "--room", "lab", "answer from h2")
        lan.lanchat("h2", "send", "--room", "lab", HOSTILE)
        texts = lambda: browser.js("return [...document.querySelectorAll('#messages .text')].map(e => e.textContent)")
        wait_for(lambda: "answer from h2" in texts() and HOSTILE in texts(), timeout=20, what="h2's messages in the page")
        assert browser.js("return window.__sameLoad") == "yes", "the page was reloaded"
        assert browser.js("return document.querySelectorAll('img').length") == 0, "peer text made an element"
        assert browser.js("return document.title") == "lanchat"
        visible = browser.js("return document.getElementById('messages').innerText")
        assert HOSTILE in visible, visible
        assert HOSTILE in browser.js("return document.getElementById('members').innerText")

        # A PNG from h2 shows inline (served from h1's downloads, type from its bytes).
        picture = os.path.join(lan.dir, "stripes.png")
        png(picture)
        lan.lanchat("h2", "send-file", "--room", "lab", picture, timeout=60)
        image = wait_for(lambda: browser.js(
            "const i = document.querySelector('#messages img.thumb');"
            "return i && i.complete && i.naturalWidth ? {w: i.naturalWidth, alt: i.alt, src: i.getAttribute('src')} : null;"),
            timeout=30, what="the PNG shown inline")
        assert image["w"] == 160 and image["alt"].startswith("stripes.png"), image
        received = [t for t in lan.lanchat_json("h1", "transfers") if t["direction"] == "incoming" and t["state"] == "complete"]
        assert len(received) == 1 and sha(received[0]["path"]) == sha(picture)

        # A file chosen in the page arrives at h2, the same bytes.
        upload = os.path.join(lan.dir, "from the page.bin")
        with open(upload, "wb") as f:
            f.write(os.urandom(300_000))
        driver.find_element("id", "file").send_keys(upload)
        target = os.path.join(downloads_h2, "from the page.bin")
        wait_for(lambda: os.path.exists(target) and sha(target) == sha(upload), timeout=40, what="the page's file at h2")
        assert browser.text("error") == "", browser.text("error")

        # h2's raised hand shows.
        lan.lanchat("h2", "hand", "up", "--room", "lab")
        wait_for(lambda: "hand raised" in (browser.js(
            "const li = [...document.querySelectorAll('#members li')].find(e => e.dataset.memberId === arguments[0]);"
            "return li ? li.textContent : '';", bob_id) or ""), timeout=20, what="h2's hand in the page")

        # The room's topic (metadata set at h2) shows, as text.
        lan.lanchat("h2", "room", "set", "lab", "topic", "release <b>planning</b>")
        wait_for(lambda: "release <b>planning</b>" in (browser.text("room-meta") or ""), timeout=15, what="the topic in the page")
        assert browser.js("return document.querySelectorAll('#room-meta b').length") == 0

        # ...and a topic set in the page reaches h2.
        browser.js("document.getElementById('topic').value = 'set from the browser';"
                   "document.getElementById('topic-form').requestSubmit();")
        wait_for(lambda: lan.lanchat("h2", "room", "get", "lab", "topic").stdout.strip() == "set from the browser", timeout=15,
                 what="the page's topic at h2")

        # h2 types: the page says so.
        lan.run("h2", ["python3", "-c", TYPING, "/run/lanchat/lanchatd.sock"])
        wait_for(lambda: "is typing" in browser.text("typing"), timeout=10, what="h2 typing, in the page")

        # Search through the room's history (the `history --grep` index), then back.
        browser.js("document.getElementById('search').value = 'answer';"
                   "document.getElementById('search-form').requestSubmit();")
        wait_for(lambda: texts() == ["answer from h2"], timeout=10, what="the search's one match")
        browser.js("document.getElementById('search-clear').click();")
        wait_for(lambda: "hello from the browser" in texts(), timeout=10, what="the whole conversation again")
        assert browser.js("return document.querySelectorAll('#messages img.thumb').length") == 1, "the image left the conversation"

        # Presence from the page reaches h2.
        browser.js("document.getElementById('availability').value = 'busy';"
                   "document.getElementById('status-text').value = 'in a meeting';"
                   "document.getElementById('presence-form').requestSubmit();")
        wait_for(lambda: [(m["availability"], m.get("status_text")) for m in lan.lanchat_json("h2", "members", "lab")["members"]]
                 == [("busy", "in a meeting")], timeout=15, what="alice busy at h2")

        # An invitation declined in the page, with a reason: the inviter hears it.
        inviter = lan.popen("h2", [os.path.join(BIN, "lanchat"), "invite", alice_id[:12], "--room", "chess", "--wait", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: browser.js("return document.querySelectorAll('#invitations li').length") == 1, timeout=20,
                 what="the second invitation in the page")
        browser.js("const li = document.querySelector('#invitations li');"
                   "li.querySelector('input').value = 'not now';"
                   "[...li.querySelectorAll('button')].find(b => b.textContent === 'Decline').click();")
        out, err = inviter.communicate(timeout=30)
        answer = json.loads(out)
        assert answer["outcome"] == "declined" and answer.get("reason") == "not now", (out, err)

        # An invitation sent from the page (h2 accepts by itself): the new room is listed.
        browser.js("document.getElementById('invite-peer').value = arguments[0];"
                   "document.getElementById('invite-room').value = 'second';"
                   "document.getElementById('invite-form').requestSubmit();", bob_id)
        wait_for(lambda: "second" in browser.js("return [...document.querySelectorAll('#rooms button')].map(b => b.textContent)"),
                 timeout=20, what="the room made from the page")
        wait_for(lambda: "second" in [r["room"] for r in lan.lanchat_json("h2", "rooms")], timeout=10, what="h2 in the second room")

        # In the room the page made, alice administers: she makes h2 an administrator too, then goes back to lab.
        browser.js("[...document.querySelectorAll('#rooms button')].find(b => b.textContent === 'second').click();")
        wait_for(lambda: browser.text("room-title") == "Room second" and browser.js(
            "return [...document.querySelectorAll('#members button')].some(b => b.textContent === 'Make admin')"), timeout=20,
            what="the administrator's buttons in the room the page made")
        browser.js("[...document.querySelectorAll('#members button')].find(b => b.textContent === 'Make admin').click();")
        wait_for(lambda: [m.get("admin") for m in lan.lanchat_json("h1", "members", "second")["members"]] == [True], timeout=15,
                 what="h2 an administrator of second")
        browser.js("[...document.querySelectorAll('#rooms button')].find(b => b.textContent === 'lab').click();")
        wait_for(lambda: browser.text("room-title") == "Room lab" and "answer from h2" in texts(), timeout=10, what="back in lab")

        # A picture shared in the room at h2: fetched and shown from the page.
        shared = os.path.join(lan.dir, "shared.png")
        png(shared, width=120, height=80)
        lan.lanchat("h2", "share", "lab", shared, timeout=60)
        wait_for(lambda: browser.js("return [...document.querySelectorAll('#messages button')].some(b => b.textContent === 'Fetch and show')"),
                 timeout=20, what="the shared file in the conversation")
        browser.js("[...document.querySelectorAll('#messages button')].find(b => b.textContent === 'Fetch and show').click();")
        wait_for(lambda: browser.js("return [...document.querySelectorAll('#messages img.thumb')].some(i => i.complete && i.naturalWidth === 120)"),
                 timeout=30, what="the shared picture inline")

        # A file shared from the page: h2 lists it among the room's files.
        kept = os.path.join(lan.dir, "notes for later.txt")
        with open(kept, "w") as f:
            f.write("kept in the room\n")
        browser.js("document.getElementById('file-to').value = 'share';")
        driver.find_element("id", "file").send_keys(kept)
        wait_for(lambda: [f["name"] for f in lan.lanchat_json("h2", "files", "lab") if f["name"] == "notes for later.txt"], timeout=30,
                 what="the page's shared file at h2")

        assert browser.js("return document.title") == "lanchat"
        assert browser.js("return [...document.querySelectorAll('img')].every(i => i.classList.contains('thumb'))")
        assert browser.text("error") == "", browser.text("error")
        # The WebSocket speaks the control API's JSON: every answer and event the page can get, checked
        # against docs/control-api.schema.json like the CLI's; errors are the API's own.
        raw = driver.execute_async_script(SOCKET_PROBE)
        lines = [json.loads(line) for line in raw]
        validator = _validator()
        for line in lines:
            errors = list(validator.iter_errors(line))
            assert not errors, (line, errors[0].message)
        answers = {line["id"]: line for line in lines if line.get("id") is not None}
        assert set(range(1, 11)) <= set(answers), sorted(answers)
        assert all(answers[i]["ok"] for i in range(1, 10)), [answers[i] for i in range(1, 10) if not answers[i]["ok"]]
        assert answers[10]["error"]["code"] == "unknown_method", answers[10]
        assert any(not line.get("ok", True) and line["error"]["code"] == "bad_request" and line.get("id") is None for line in lines), lines
        assert any(line.get("event", {}).get("type") == "message" and line["event"]["message"]["text"] == "via the socket" for line in lines)
        wait_for(lambda: "via the socket" in texts(), timeout=10, what="the socket's message in the page too")

        # Every control has a name a screen reader reads (a label, its text, or aria-label).
        unnamed = browser.js(
            "return [...document.querySelectorAll('button, input, select')].filter(e => !("
            "(e.labels && e.labels.length) || e.getAttribute('aria-label') || (e.tagName === 'BUTTON' && e.textContent.trim())))"
            ".map(e => e.outerHTML.slice(0, 80));")
        assert unnamed == [], unnamed

        driver.save_screenshot(str(shots / "web-ui.png"))
        if os.environ.get("LANCHAT_UPDATE_SCREENSHOT") == "1":
            shutil.copy(shots / "web-ui.png", os.path.join(ROOT, "docs", "web-ui.png"))
        # A phone's width: nothing wider than the screen.
        driver.set_window_size(360, 800)
        wait_for(lambda: browser.js("return document.documentElement.clientWidth") <= 360, timeout=10, what="the narrow window")
        too_wide = browser.js(
            "const w = document.documentElement.clientWidth;"
            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w + 0.5)"
            ".map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));")
        assert too_wide == [] and browser.js("return document.documentElement.scrollWidth <= document.documentElement.clientWidth"), \
            f"wider than 360 px: {too_wide}"
        driver.save_screenshot(str(shots / "web-ui-360.png"))
    finally:
        browser.quit()

    # Plain HTTP from h1: what is refused, and the headers.
    out = json.loads(lan.run("h1", ["python3", "-c", HTTP_PROBE, str(WEB_PORT), token, received[0]["path"]]).stdout)
    page = out["page"]
    assert page["status"] == 200 and "default-src 'self'" in page["headers"]["content-security-policy"], page
    assert page["headers"]["x-content-type-options"] == "nosniff" and page["headers"]["referrer-policy"] == "no-referrer", page
    for name, answer in out.items():
        assert not any(h.startswith("access-control-") for h in answer["headers"]), (name, answer)
    for name in ("ws_no_token", "ws_bad_token", "upload_no_token", "image_no_token"):
        assert out[name]["status"] == 403 and "token" in out[name]["body"], (name, out[name])
    for name in ("image_foreign_host", "image_rebound_host"):
        assert out[name]["status"] == 403 and "Host" in out[name]["body"], (name, out[name])
    for name in ("ws_foreign_origin", "image_foreign_origin"):
        assert out[name]["status"] == 403 and "cross-origin" in out[name]["body"], (name, out[name])
    assert out["ws_ok"]["status"] == 101, out["ws_ok"]
    assert out["image_ok"]["status"] == 200 and out["image_ok"]["headers"]["content-type"] == "image/png", out["image_ok"]
    assert out["outside_downloads"]["status"] == 403, out["outside_downloads"]
    assert out["huge_header"]["status"] in (0, 400, 431), out["huge_header"]


def test_a_daemon_that_serves_a_group_sends_the_pages_files_through_handed_over_descriptors(lan, tmp_path):
    """As the system service runs (`--socket-group`): the token file is readable by the group, and the
    daemon sends only files handed over as descriptors; the page's uploads are handed over that way."""
    lan.up(2)
    downloads_h2 = os.path.join(lan.dir, "h2-downloads")
    lan.start_daemon("h1", name="alice", extra=["--web", str(WEB_PORT), "--socket-group", "root"])
    lan.start_daemon("h2", name="bob", extra=["--download-dir", downloads_h2, "--auto-accept", "all"])
    mode = lan.run("h1", ["stat", "-c", "%a %G", "/run/lanchat/lanchatd.sock.web"]).stdout.strip()
    assert mode == "640 root", mode
    wait_for(lambda: any(p["name"] == "bob" and p["addresses"] for p in lan.peers("h1")), timeout=30, what="bob discovered on h1")
    assert lan.lanchat_json("h1", "invite", "bob", "--room", "lab", "--wait")["outcome"] == "accepted"
    # A path the daemon would open with its own rights is refused (the page must hand its files over).
    request = json.dumps({"id": 1, "method": "send-file", "params": {"peer": "bob", "path": "/etc/hostname"}})
    answer = json.loads(lan.run("h1", ["python3", "-c", CONTROL_CALL, "/run/lanchat/lanchatd.sock", request]).stdout)
    assert answer["ok"] is False and answer["error"]["code"] == "bad_file", answer

    browser = Browser(lan, "h1", lan.dir)
    try:
        browser.driver.get(lan.lanchat("h1", "web").stdout.strip())
        wait_for(lambda: browser.text("room-title") == "Room lab" and browser.js(
            "return [...document.querySelectorAll('#members li')].some(li => li.textContent.includes('connected'))"),
            timeout=20, what="the room with bob connected, in the page")
        upload = os.path.join(lan.dir, "handed over.bin")
        with open(upload, "wb") as f:
            f.write(os.urandom(100_000))
        browser.driver.find_element("id", "file").send_keys(upload)
        target = os.path.join(downloads_h2, "handed over.bin")
        wait_for(lambda: os.path.exists(target) and sha(target) == sha(upload), timeout=40, what="the page's file at bob")
        assert browser.text("error") == "", browser.text("error")
    finally:
        browser.quit()
