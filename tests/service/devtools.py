"""A headless Chromium driven over the DevTools protocol (CDP), for the docs-page tests.

Chromium listens on a free loopback port (`--remote-debugging-port=0`, which it prints); the
test talks to its one page over a WebSocket: navigate, wait for the load event, evaluate a
script. Each step waits for Chromium's answer, never for a time to pass; the receive timeout
only turns a hang into a failure.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

#: a hang guard, not a speed requirement: a step that gets no answer in this long has failed
ANSWER_TIMEOUT_S = 120.0


class DevToolsError(RuntimeError):
    """Chromium answered a command with an error, or a script threw."""


class Browser:
    """One headless Chromium page; a context manager that stops Chromium on exit."""

    def __init__(self, chromium: str, profile: Path) -> None:
        cmd = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "about:blank",
        ]  # fmt: skip
        self._proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self._ids = itertools.count(1)
        try:
            self._ws = self._attach()
        except BaseException:
            self._stop()
            raise

    def _attach(self) -> ClientConnection:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            found = re.search(r"DevTools listening on ws://[^/]+:(\d+)/", line)
            if found:
                break
        else:
            raise DevToolsError(f"chromium exited with {self._proc.wait()} before listening")
        # keep reading, so that Chromium never blocks on a full stderr pipe
        threading.Thread(target=self._proc.stderr.read, daemon=True).start()
        targets = httpx.get(f"http://127.0.0.1:{found.group(1)}/json/list", timeout=30).json()
        page = next(t for t in targets if t["type"] == "page")
        ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        return ws.__enter__()  # entered, as websockets asks; left in __exit__

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events received meanwhile are dropped)."""
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv(timeout=ANSWER_TIMEOUT_S))
            if message.get("id") == ident:
                if "error" in message:
                    raise DevToolsError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def wait_for_event(self, method: str) -> dict[str, Any]:
        while True:
            message = json.loads(self._ws.recv(timeout=ANSWER_TIMEOUT_S))
            if message.get("method") == method:
                params: dict[str, Any] = message.get("params", {})
                return params

    def open(self, url: str) -> None:
        """Navigate to `url` and return once its load event fired."""
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def run(self, function: str, *args: Any) -> Any:
        """Call the JavaScript (async) `function` with JSON `args`; its awaited value back."""
        expression = f"({function})(...{json.dumps(list(args))})"
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise DevToolsError(json.dumps(result["exceptionDetails"])[:2000])
        return result["result"].get("value")

    def _stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._ws.__exit__(kind, exc, tb)
        self._stop()
