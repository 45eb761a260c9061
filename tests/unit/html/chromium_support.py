"""Open a local HTML file in headless Chromium over the DevTools protocol (``--remote-debugging-pipe``:
no port, no third-party client) and report what a person would care about: console errors, page
exceptions, every request that left the file (anything but ``data:`` URIs and the file itself),
and a screenshot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


@dataclass
class PageVisit:
    errors: list[str] = field(default_factory=list)     # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)   # URLs requested other than data: and the page
    screenshot: bytes = b""
    height: int = 0
    text: str = ""                                      # document.body.innerText
    images: int = 0                                     # <img> elements that decoded (naturalWidth > 0)
    tables: int = 0


class _Pipe:
    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int):
        self.proc, self.w, self.r = proc, to_browser, from_browser
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30.0) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        want = self.next_id
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self._read(deadline)
            if m is None:
                break
            if m.get("id") == want:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)
        raise TimeoutError(f"no answer to {method} within {timeout} s")

    def wait_event(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for m in self.events[seen:]:
                if m.get("method") == method:
                    return m
            seen = len(self.events)
            m = self._read(deadline)
            if m is not None:
                self.events.append(m)
        raise TimeoutError(f"no {method} within {timeout} s")

    def _read(self, deadline: float) -> dict | None:
        import select

        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)


def visit(html: Path, *, width: int = 1280, max_height: int | None = None, settle_s: float = 0.5) -> PageVisit:
    """Load ``html`` (a file) in a fresh headless Chromium; a full-page screenshot, cut at ``max_height``."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium)")
    html = Path(html).resolve()
    url = html.as_uri()
    profile = tempfile.mkdtemp(prefix="tb-chromium-")
    to_r, to_w = os.pipe()      # we write, Chromium reads on fd 3
    from_r, from_w = os.pipe()  # Chromium writes on fd 4, we read

    def child_fds() -> None:  # the pipe ends may be fds 3 or 4 already: move them out of the way first
        a, b = os.dup(to_r), os.dup(from_w)
        os.dup2(a, 3)
        os.dup2(b, 4)
        os.set_inheritable(3, True)
        os.set_inheritable(4, True)

    args = [exe, "--headless=new", "--remote-debugging-pipe", f"--user-data-dir={profile}", "--no-first-run",
            "--no-default-browser-check", "--disable-gpu", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
            "--hide-scrollbars", f"--window-size={width},900"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    # fds 3 and 4 are made in the child after the fork (dup2 leaves them inheritable); close_fds would
    # close them again, so the child keeps the parent's other fds instead (all close-on-exec in Python)
    with open(os.environ.get("TB_CHROMIUM_LOG", os.devnull), "wb") as log:  # Chromium's own messages
        proc = subprocess.Popen(args, close_fds=False, preexec_fn=child_fds, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log)
    os.close(to_r)
    os.close(from_w)
    pipe = _Pipe(proc, to_w, from_r)
    out = PageVisit()
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        start = len(pipe.events)
        pipe.send("Page.navigate", {"url": url}, session=session)
        pipe.wait_event("Page.loadEventFired", timeout=60)
        time.sleep(settle_s)
        probe = ("JSON.stringify({text: document.body.innerText, tables: document.querySelectorAll('table').length,"
                 "images: [...document.images].filter(i => i.complete && i.naturalWidth > 0).length,"
                 "height: document.documentElement.scrollHeight})")
        got = json.loads(pipe.send("Runtime.evaluate", {"expression": probe, "returnByValue": True},
                                   session=session)["result"]["value"])
        out.text, out.tables, out.images, out.height = got["text"], got["tables"], got["images"], got["height"]
        height = min(out.height, max_height) if max_height else out.height
        pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        shot = pipe.send("Page.captureScreenshot", {"format": "png", "clip": {"x": 0, "y": 0, "width": width,
                                                                               "height": height, "scale": 1}},
                         session=session, timeout=60)
        out.screenshot = base64.b64decode(shot["data"])
        for ev in pipe.events[start:]:
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                        for a in p.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                out.errors.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
            elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.errors.append("log: " + str(p["entry"].get("text")))
            elif method == "Network.loadingFailed":
                out.errors.append("failed load: " + str(p.get("errorText")))
            elif method == "Network.requestWillBeSent":
                req = p.get("request", {}).get("url", "")
                if not req.startswith("data:") and req != url:
                    out.requests.append(req)
        try:
            pipe.send("Browser.close", timeout=10)
        except (TimeoutError, RuntimeError, OSError):
            pass
    finally:
        os.close(to_w)
        os.close(from_r)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return out
