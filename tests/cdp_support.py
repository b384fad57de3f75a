"""Drive headless Chromium (Debian's package) over the DevTools protocol on a pipe: click, type, select, download.

``--remote-debugging-pipe`` makes Chromium read commands on its fd 3 and answer on its fd 4,
each message JSON ended by a NUL byte: no port, no websocket library. Clicks and typing are
real input events (Input.dispatchMouseEvent, Input.insertText) at the element's place on the
page; a <select> is set as Playwright's selectOption does (value, then input and change events).
"""

import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path

from tests.chromium_support import CHROMIUM


class CDPError(RuntimeError):
    """Chromium answered a command with an error, or a page script threw."""


class Browser:
    """One headless Chromium with a profile of its own; ``with Browser(tmp) as b: page = b.open(url)``."""

    def __init__(self, profile: Path, downloads: Path | None = None):
        profile.mkdir(parents=True, exist_ok=True)
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Above 4, so that putting them on 3 and 4 never closes one of them.
        to_chrome_r, from_chrome_w = (self._above_four(fd) for fd in (to_chrome_r, from_chrome_w))
        # bash (dash takes one-digit fds only) puts our pipe ends on fds 3 and 4, where --remote-debugging-pipe looks for them.
        script = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
        self._log = open(profile / "chromium.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", script, CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--autoplay-policy=no-user-gesture-required", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            start_new_session=True,
        )  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict] = []
        if downloads is not None:
            self.send(
                "Browser.setDownloadBehavior",
                {"behavior": "allow", "downloadPath": str(downloads), "eventsEnabled": True},
            )

    @staticmethod
    def _above_four(fd: int) -> int:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise CDPError(f"Chromium closed its pipe (exit {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        """Send one command and return its result; events that arrive meanwhile are kept in ``events``."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, match=lambda params: True, timeout: float = 60) -> dict:
        """The params of the first event ``method`` (already seen or still to come) that ``match`` accepts."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and match(event.get("params", {})):
                    self.events.remove(event)
                    return event["params"]
            seen = len(self.events)
            self.events.append(self._message(deadline))

    def open(self, url: str) -> "Page":
        """A new tab at ``url``, after its load event."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", lambda p: True)
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (CDPError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)  # the session we started (start_new_session): Chromium and its helpers
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            os.close(fd)
        self._log.close()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    """One tab: evaluate, click, type, select."""

    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def evaluate(self, expression: str):
        """The JSON value of a page expression (a promise is awaited)."""
        result = self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            self.session,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"{expression[:80]}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def _centre(self, selector: str) -> tuple[float, float]:
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise CDPError(f"no element matches {selector}")
        return box[0], box[1]

    def click(self, selector: str) -> None:
        """A left click at the element's centre, as a mouse makes it."""
        x, y = self._centre(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
                self.session,
            )

    def type(self, selector: str, text: str) -> None:
        """Focus the field by a click, select what it holds, and type ``text`` over it."""
        self.click(selector)
        self.evaluate(f"document.querySelector({json.dumps(selector)}).select()")
        self.browser.send("Input.insertText", {"text": text}, self.session)

    def choose(self, selector: str, value: str) -> None:
        """Pick an option of a <select>: its value set, then input and change fired as a user's choice fires them."""
        self.evaluate(
            f"(() => {{ const s = document.querySelector({json.dumps(selector)}); s.focus(); s.value = {json.dumps(value)};"
            " s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true}));"
            " return s.value; })()"
        )

    def attribute(self, selector: str, name: str):
        return self.evaluate(f"document.querySelector({json.dumps(selector)}).getAttribute({json.dumps(name)})")

    def wait_attribute(self, selector: str, name: str, want, timeout: float = 30):
        """Poll until the attribute equals ``want`` (or ``want(value)`` is true); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.attribute(selector, name)
            if (want(value) if callable(want) else value == want) or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and CSP refusals seen so far."""
        out = []
        for event in self.browser.events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                out.append(str(params.get("exceptionDetails", {}).get("text")))
            elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
                out.append(str(params.get("args")))
            elif event.get("method") == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(str(params["entry"].get("text")))
        return out
