"""``/acp`` from a real browser (headless Chromium): a page served from another origin completes a prompt with fetch()
alone — the preflight allows ``Authorization`` and the ``Acp-*`` request headers, the ``Acp-Connection-Id`` response
header is exposed, streams are read with fetch + ReadableStream — and a page from an origin not in ``--allow-origin``
cannot read a single response. Skips cleanly when no Chromium binary is installed (Debian package ``chromium``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest

from acp_server.provider.offline import Answer, LoopbackModel

from ._support import running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PAGE = (Path(__file__).parent / "js" / "acp_browser_page.html").read_bytes()
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TOKEN = "br0wser-t0ken"


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.skip(f"no Chromium binary ({', '.join(BROWSERS)}) on PATH: apt-get install chromium")


@contextmanager
def page_server(on_result: Callable[[dict[str, Any]], None]) -> Iterator[str]:
    """A second HTTP server on 127.0.0.1 (its own origin): ``GET /`` is the page, ``POST /result`` its outcome."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(204)
            self.end_headers()
            if self.path == "/result":
                on_result(json.loads(body))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class Results:
    """The outcome each page POSTs, by page origin; ``wait`` returns once every origin reported."""

    def __init__(self) -> None:
        self.by_origin: dict[str, dict[str, Any]] = {}
        self._complete = anyio.Event()
        self._token = anyio.lowlevel.current_token()
        self._expected: set[str] = set()

    def reporter(self, origin: str) -> Callable[[dict[str, Any]], None]:
        self._expected.add(origin)

        def report(result: dict[str, Any]) -> None:  # runs on the page server's thread
            anyio.from_thread.run_sync(self._record, origin, result, token=self._token)

        return report

    def _record(self, origin: str, result: dict[str, Any]) -> None:
        self.by_origin[origin] = result
        if set(self.by_origin) >= self._expected:
            self._complete.set()

    async def wait(self) -> None:
        await self._complete.wait()


@contextmanager
def headless_chromium(binary: str, url: str, profile: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Headless Chromium on one URL (it opens one tab) with a throw-away profile; ended by its pid, then its
    process group (helpers that outlived it), on exit."""
    args = [
        binary,
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespaces for the sandbox
        f"--user-data-dir={profile}",
        "--disable-gpu",
        "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-extensions",
        "--disable-sync",
        url,
    ]
    with log.open("wb") as out:
        browser = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    try:
        yield browser
    finally:
        browser.terminate()
        try:
            browser.wait(5)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait(5)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(browser.pid, signal.SIGKILL)


async def test_a_page_on_another_origin_completes_a_prompt_and_a_foreign_origin_reads_nothing(
    tmp_path: Path,
) -> None:
    binary = _browser()
    results = Results()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="hello, browser"))
        with page_server(results.reporter("allowed")) as allowed, page_server(results.reporter("foreign")) as foreign:
            async with running_daemon(model, token=TOKEN, allow_origins=(allowed,)) as served:
                query = f"/?daemon={quote(served.url)}&token={quote(TOKEN)}"
                first = f"{allowed}{query}&next={quote(foreign + query)}"  # the tab then goes to the foreign page
                log = tmp_path / "chromium.log"
                with headless_chromium(binary, first, tmp_path / "profile", log):
                    try:
                        with anyio.fail_after(15):
                            await results.wait()
                    except TimeoutError:
                        pytest.fail(f"pages reported {results.by_origin}; chromium said:\n{log.read_text()[-3000:]}")
                live = served.acp.connection_count()
    good = results.by_origin["allowed"]
    assert good["ok"] is True, good
    assert good["connectionId"] == good["bodyConnectionId"]  # the header is readable: exposed by CORS
    assert "".join(good["chunks"]) == "hello, browser"
    assert good["stopReason"] == "end_turn"
    assert good["deleteStatus"] == 202
    assert results.by_origin["foreign"] == {"ok": False, "step": "initialize", "error": "TypeError: Failed to fetch"}
    assert live == 0  # the page's DELETE ended its connection; the foreign page's initialize never reached /acp
