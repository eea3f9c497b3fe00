"""Drive headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No third-party client: the protocol is JSON messages separated by NUL bytes on file
descriptors 3 (to the browser) and 4 (from it). :func:`load_page` opens a local file and
reports what the tests check: console errors and uncaught exceptions, every request the
page made, values of JavaScript expressions and a PNG screenshot of one element.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The path of an installed Chromium, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageReport:
    """What happened while a page loaded."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


class _Pipe:
    def __init__(self, browser: str, profile: str) -> None:
        to_r, to_w = os.pipe()      # we write commands, the browser reads fd 3
        from_r, from_w = os.pipe()  # the browser writes fd 4, we read

        def remap() -> None:
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--mute-audio",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                "--window-size=1400,1000", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=remap,
                                     pass_fds=(3, 4))
        os.close(to_r)
        os.close(from_w)
        self.out = os.fdopen(to_w, "wb", buffering=0)
        self.inp = os.fdopen(from_r, "rb", buffering=0)
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self.inp.read(65536)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                self.messages.put(json.loads(raw))

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.out.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        for m in self.events:
            if m.get("method") == method:
                return m
        deadline = time.monotonic() + timeout
        while True:
            m = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            self.events.append(m)
            if m.get("method") == method:
                return m

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.events.append(self.messages.get(timeout=0.05))
            except queue.Empty:
                pass

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5.0)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def load_page(browser: str, path: Path, *, expressions: dict[str, str] | None = None,
              element: str | None = None, settle: float = 1.0) -> PageReport:
    """Open ``path`` in headless Chromium and report on it.

    Args:
        browser: the Chromium executable.
        path: a local HTML file.
        expressions: name -> JavaScript expression, evaluated after the load.
        element: CSS selector of the element to screenshot.
        settle: seconds to keep listening after the load event.
    """
    report = PageReport()
    with tempfile.TemporaryDirectory(prefix="headwise-chromium-") as profile:
        pipe = _Pipe(browser, profile)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target,
                                                          "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Network", "Page"):
                pipe.send(f"{domain}.enable", session=session)
            url = path.resolve().as_uri()
            pipe.send("Page.navigate", {"url": url}, session=session)
            pipe.wait_for("Page.loadEventFired", timeout=60)
            pipe.drain(settle)
            for name, expr in (expressions or {}).items():
                res = pipe.send("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                                session=session)
                if "exceptionDetails" in res:
                    report.errors.append(f"evaluating {name}: {res['exceptionDetails']}")
                report.values[name] = res.get("result", {}).get("value")
            if element:
                rect = pipe.send("Runtime.evaluate", {
                    "expression": f"JSON.stringify(document.querySelector({json.dumps(element)})"
                                  f".getBoundingClientRect())", "returnByValue": True},
                    session=session)["result"]["value"]
                r = json.loads(rect)
                shot = pipe.send("Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True,
                    "clip": {"x": r["x"], "y": r["y"] + 0.0, "width": max(r["width"], 1),
                             "height": max(r["height"], 1), "scale": 1}}, session=session)
                report.screenshot = base64.b64decode(shot["data"])
            pipe.drain(0.2)
        finally:
            pipe.close()
    for m in pipe.events:
        method, p = m.get("method"), m.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            report.errors.append(f"exception: {d.get('exception', {}).get('description') or d}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            report.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                        for a in p.get("args", [])))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            report.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            report.requests.append(p.get("request", {}).get("url", ""))
    return report
