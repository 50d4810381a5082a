"""A headless Chromium driven over the DevTools protocol, with nothing but the standard library.

    with Chromium.launch() as browser:
        page = browser.new_page(1600, 1000)
        page.goto("http://127.0.0.1:5000/#/experiments/1")
        page.wait_for_text("throughput", timeout_s=30)
        Path("runs.png").write_bytes(page.screenshot())

The browser is Debian's ``chromium`` (``apt-get install chromium``), never a downloaded build. The protocol runs over
``--remote-debugging-pipe`` (file descriptors 3 and 4 of the browser, JSON messages ended by a NUL byte): no port, no
websocket client. Used by ``scripts/screenshots.py`` and the MLflow UI browser test.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM_FLAGS", "BrowserError", "Chromium", "Page", "find_chromium"]

# Headless, and quiet: no GPU, no first-run pages, no calls home (the test machines reach nothing outside).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers often have a 64 MiB /dev/shm
    "--hide-scrollbars",
)
_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser")


class BrowserError(RuntimeError):
    """The browser died, answered a command with an error, or a wait ran out."""


def find_chromium() -> str | None:
    """The path of Debian's chromium binary (``$CHROMIUM`` first), or None when there is none."""
    for candidate in (os.environ.get("CHROMIUM"), *_CANDIDATES):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


class Chromium:
    """One headless Chromium process and its DevTools pipe; a context manager that kills it on exit."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int, profile: Path):
        self._process = process
        self._out = to_browser
        self._in = os.fdopen(from_browser, "rb", buffering=0)
        self._profile = profile
        self._next_id = 0
        self._buffer = b""

    @classmethod
    def launch(cls, binary: str | None = None, extra_flags: tuple[str, ...] = ()) -> Chromium:
        """Start ``binary`` (default :func:`find_chromium`) headless with a fresh profile folder."""
        binary = binary or find_chromium()
        if binary is None:
            raise BrowserError("no chromium binary found (apt-get install chromium)")
        profile = Path(tempfile.mkdtemp(prefix="autotune-chromium-"))
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the protocol's fds are 3 (in) and 4 (out)
            os.dup2(command_read, 3)
            os.dup2(reply_write, 4)

        args = [binary, *CHROMIUM_FLAGS, *extra_flags, f"--user-data-dir={profile}", "--remote-debugging-pipe"]
        process = subprocess.Popen(
            [*args, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,  # only dup2 runs between fork and exec: no lock to deadlock on
            # Kept open through exec. Both are open here: the two pipes took the lowest free descriptors.
            pass_fds=(3, 4),
            start_new_session=True,  # its renderer and GPU processes go with it on close
        )
        os.close(command_read)
        os.close(reply_write)
        return cls(process, command_write, reply_read, profile)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one protocol command and return its result (events that arrive meanwhile are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data) :]
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return dict(reply.get("result", {}))

    def new_page(self, width: int, height: int) -> Page:
        """A new tab of ``width`` x ``height`` CSS pixels (device scale 1)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})
        session = self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
        page = Page(self, session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        page.send("Emulation.setDeviceMetricsOverride", metrics)
        return page

    def frame(self, url_prefix: str) -> Page | None:
        """An iframe whose document URL starts with ``url_prefix``, as a :class:`Page`; None while there is none.

        Sandboxed iframes (MLflow shows HTML artifacts in one, from a ``blob:`` URL) run in their own renderer:
        the protocol lists them as targets of their own, and their documents are reached only through them.
        """
        for target in self.send("Target.getTargets")["targetInfos"]:
            if target["type"] == "iframe" and target["url"].startswith(url_prefix):
                attached = self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
                return Page(self, attached["sessionId"])
        return None

    def close(self) -> None:
        """Kill the browser and remove its profile folder."""
        with contextlib.suppress(OSError):
            os.close(self._out)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, 9)
        self._process.wait(timeout=10)
        self._in.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = self._in.read(1 << 20)
            if not chunk:
                raise BrowserError(f"chromium exited (code {self._process.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))


class Page:
    """One tab: navigate, evaluate JavaScript, wait for text, click, take screenshots."""

    def __init__(self, browser: Chromium, session: str):
        self._browser = browser
        self._session = session

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A protocol command to this tab."""
        return self._browser.send(method, params, self._session)

    def goto(self, url: str) -> None:
        """Navigate to ``url`` (returns once the navigation is committed, not when the app has loaded)."""
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.send("Runtime.evaluate", params)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"JavaScript error: {details.get('exception', {}).get('description', details)}")
        return result.get("result", {}).get("value")

    def text(self) -> str:
        """The visible text of the page (``document.body.innerText``)."""
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def wait_for(self, expression: str, timeout_s: float, what: str) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value. Raises after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(BrowserError):  # a page in mid-navigation has no context to evaluate in
                if value := self.evaluate(expression):
                    return value
            if time.monotonic() > deadline:
                raise BrowserError(f"waited {timeout_s:.0f} s for {what}; the page shows:\n{self.text()[:2000]}")
            time.sleep(0.25)

    def wait_for_text(self, *needles: str, timeout_s: float = 30.0) -> str:
        """Wait until the page's visible text holds every one of ``needles``; returns that text."""
        checks = " && ".join(f"t.includes({json.dumps(needle)})" for needle in needles)
        self.wait_for(
            f"(() => {{ const t = document.body ? document.body.innerText : ''; return {checks}; }})()",
            timeout_s,
            f"the text {needles!r}",
        )
        return self.text()

    def click_text(self, text: str, selector: str = "button, a, [role=button], [role=tab], [role=menuitem]") -> bool:
        """Click the first element matching ``selector`` whose visible text is ``text``; False if there is none."""
        script = f"""(() => {{
            const hit = [...document.querySelectorAll({json.dumps(selector)})]
                .find(e => e.innerText && e.innerText.trim() === {json.dumps(text)});
            if (!hit) return false;
            hit.click();
            return true;
        }})()"""
        return bool(self.evaluate(script))

    def click(self, selector: str) -> bool:
        """Click the first element matching the CSS ``selector``; False if there is none."""
        return bool(self.evaluate(f"(e => !!e && (e.click(), true))(document.querySelector({json.dumps(selector)}))"))

    def screenshot(self, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])


@contextlib.contextmanager
def browser_page(width: int = 1600, height: int = 1000) -> Iterator[Page]:
    """A fresh headless Chromium with one tab, closed on exit."""
    with Chromium.launch() as browser:
        yield browser.new_page(width, height)
