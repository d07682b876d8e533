"""Headless Chromium driven over the DevTools protocol (``--remote-debugging-pipe``: JSON
messages ending in NUL on file descriptors 3 and 4), with networking cut off: every
request goes to a proxy on a closed port, the page's network is emulated offline, and each
request the page tries that is not ``file:``/``data:``/``blob:`` is recorded as a failure.

No Python package is needed beyond the standard library; Chromium is the Debian package
``chromium`` (.ci/run installs it).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome:", "devtools:")


def chromium_path() -> str | None:
    """The Chromium executable on PATH (Debian: ``chromium``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@dataclass
class PageLog:
    """What a page did while it was open: console errors, exceptions, network attempts."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def record(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(f"exception: {d.get('exception', {}).get('description', d.get('text'))}")
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent" and not p["request"]["url"].startswith(LOCAL_SCHEMES):
            self.requests.append(p["request"]["url"])


class Browser:
    """One headless Chromium with one tab; ``with Browser() as b: b.open(path)``."""

    def __init__(self, executable: str, width: int = 1280, height: int = 1000, timeout: float = 60):
        self.timeout, self.width, self.height = timeout, width, height
        self.profile = tempfile.mkdtemp(prefix="villani-chromium-")
        self.stderr_path = Path(self.profile) / "stderr.log"
        cmd_r, cmd_w = os.pipe()  # we write commands, Chromium reads fd 3
        out_r, out_w = os.pipe()  # Chromium writes fd 4, we read
        hi_r, hi_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (cmd_r, out_w))

        def child_fds():  # in the child before exec: fds 3 and 4 (dup2 leaves them open across exec)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                 "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update", "--allow-file-access-from-files",
                 "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                 "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={self.profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                close_fds=False, preexec_fn=child_fds)  # Python's own fds are close-on-exec
        for fd in (cmd_r, out_w, hi_r, hi_w):
            os.close(fd)
        self.wfile, self.rfile = os.fdopen(cmd_w, "wb"), os.fdopen(out_r, "rb")
        self.next_id, self.buffer, self.log = 0, b"", PageLog()
        try:
            self._attach()
        except BaseException:
            self.close()
            raise

    def _attach(self) -> None:
        """One tab, its events on, its network offline, a fixed viewport."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Network.emulateNetworkConditions", session=True, offline=True, latency=0,
                  downloadThroughput=-1, uploadThroughput=-1)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)

    def _message(self) -> dict:
        end = time.monotonic() + self.timeout
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.rfile], [], [], max(0.0, end - time.monotonic()))
            chunk = os.read(self.rfile.fileno(), 1 << 20) if ready else None
            if not chunk:
                state = f"exited ({self.proc.poll()})" if chunk == b"" else f"silent for {self.timeout} s"
                raise RuntimeError(f"chromium {state}: {self.stderr_tail()}")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def stderr_tail(self) -> str:
        """The last lines Chromium wrote to stderr (why it did not start, or crashed)."""
        try:
            return " | ".join(self.stderr_path.read_text(errors="replace").strip().splitlines()[-5:])
        except OSError:
            return ""

    def call(self, method: str, session: bool = False, **params) -> dict:
        """Send one command and return its result; events that arrive meanwhile go to the log."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.wfile.write(json.dumps(msg).encode() + b"\0")
        self.wfile.flush()
        while True:
            reply = self._message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.log.record(reply)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:60]}…: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, path: Path) -> None:
        """Navigate to a local file and wait until the document has loaded."""
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        self.wait_for("document.readyState === 'complete'")

    def wait_for(self, expression: str, timeout: float | None = None) -> None:
        """Poll ``expression`` until it is true; an AssertionError naming it after ``timeout`` s."""
        end = time.monotonic() + (timeout or self.timeout)
        while not self.evaluate(expression):
            if time.monotonic() > end:
                raise AssertionError(f"page never satisfied {expression!r}; errors: {self.log.errors}")
            time.sleep(0.2)

    def screenshot(self, out: Path) -> Path:
        """A PNG of the whole page (beyond the viewport), written to ``out``."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": max(size["width"], self.width), "height": min(size["height"], 8000),
                "scale": 1}
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True,
                         clip=clip)["data"]
        out.write_bytes(base64.b64decode(data))
        return out

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop Chromium and remove its profile."""
        try:
            self.wfile.close()
            self.rfile.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
