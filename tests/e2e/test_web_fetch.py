"""``web_fetch`` through a real agent process and a real HTTP server on loopback: HTML as Markdown, a redirect
followed, a 50 MB body cut at the bound, a redirect to an address not allowed refused before any connection, a
binary body refused with its type, a ``prompt`` answered in a tool-less side request, and the permission asked
once per host in the default mode."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PAGE = b"""<!doctype html><html><head><title>T</title><style>p{color:red}</style></head>
<body><h1>Release notes</h1><p>The <b>answer</b> is <a href="/x">42</a>.</p><script>alert(1)</script></body></html>"""


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, content_type: str, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        port = self.server.server_port  # type: ignore[attr-defined]
        if self.path == "/page":
            self._send(200, "text/html; charset=utf-8", PAGE)
        elif self.path == "/redirect":
            self._send(302, "text/plain", b"", Location="/page")
        elif self.path == "/elsewhere":  # another loopback address, not in the allowed network
            self._send(302, "text/plain", b"", Location=f"http://127.0.0.2:{port}/page")
        elif self.path == "/image":
            self._send(200, "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64))
        elif self.path == "/big":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(50 * 1024 * 1024))
            self.end_headers()
            line = b"x" * 1023 + b"\n"
            try:
                for _ in range(50 * 1024):
                    self.wfile.write(line)
            except OSError:  # the agent stopped reading at its bound
                pass
        else:
            self._send(404, "text/plain", b"no")


@pytest.fixture
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _tool_outputs(model: LoopbackModel) -> list[str]:
    return [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]


async def _fetch(tmp_path: Path, calls: list[dict[str, Any]], *args: str) -> tuple[LoopbackModel, list[Any]]:
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls(tuple(ScriptedCall("web_fetch", c) for c in calls)), Answer(text="done"))
        flags = ["--allow-bypass-permissions", "--default-mode", "bypass-permissions", *args]
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m", *flags) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "fetch"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            reply, seen = await agent.until_response(msg_id, timeout=60)
        assert reply["result"]["stopReason"] == "end_turn", reply
        return model, seen


async def test_html_becomes_markdown_and_redirects_are_followed(tmp_path: Path, site: str) -> None:
    model, seen = await _fetch(
        tmp_path, [{"url": f"{site}/page"}, {"url": f"{site}/redirect"}], "--web-fetch-allow", "127.0.0.1"
    )
    page, redirected = _tool_outputs(model)
    assert f"URL: {site}/page" in page
    assert "# Release notes" in page and "**answer**" in page and "[42](/x)" in page
    assert "alert" not in page and "color:red" not in page
    assert redirected.startswith(f"URL: {site}/page\n")  # the final URL
    kinds = {u["params"]["update"].get("kind") for u in seen if u.get("method") == "session/update"}
    assert "fetch" in kinds


async def test_a_huge_body_is_cut_and_the_output_capped(tmp_path: Path, site: str) -> None:
    model, _ = await _fetch(tmp_path, [{"url": f"{site}/big"}], "--web-fetch-allow", "127.0.0.1/32")
    [out] = _tool_outputs(model)
    assert "Note: the body was cut at" in out
    assert len(out.encode()) <= 64 * 1024 + 512


async def test_private_addresses_are_refused_also_after_a_redirect(tmp_path: Path, site: str) -> None:
    calls = [{"url": f"{site}/elsewhere"}, {"url": f"{site}/page"}]
    model, _ = await _fetch(tmp_path, calls, "--web-fetch-allow", "127.0.0.1")
    after_redirect, _allowed = _tool_outputs(model)
    assert after_redirect.startswith("Error:") and "127.0.0.2" in after_redirect
    assert "--web-fetch-allow" in after_redirect
    model, _ = await _fetch(tmp_path, [{"url": f"{site}/page"}])  # nothing allowed: loopback itself refused
    [refused] = _tool_outputs(model)
    assert refused.startswith("Error:") and "loopback" in refused


async def test_binary_is_refused_with_its_type(tmp_path: Path, site: str) -> None:
    model, _ = await _fetch(tmp_path, [{"url": f"{site}/image"}], "--web-fetch-allow", "private")
    [out] = _tool_outputs(model)
    assert out.startswith("Error:") and "image/png" in out


async def test_a_prompt_is_answered_over_the_page_in_a_side_request(tmp_path: Path, site: str) -> None:
    async with LoopbackModel() as model:
        call = ScriptedCall("web_fetch", {"url": f"{site}/page", "prompt": "What is the answer?"})
        model.enqueue(ToolCalls((call,)), Answer(text="The page says 42."), Answer(text="done"))
        flags = ["--allow-bypass-permissions", "--default-mode", "bypass-permissions", "--web-fetch-allow", "private"]
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m", *flags) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "fetch"}]
            reply = await agent.request("session/prompt", {"sessionId": session_id, "prompt": prompt}, timeout=60)
        assert reply["result"]["stopReason"] == "end_turn", reply
        side = model.requests[1]
        assert side.tool_names == []  # tool-less
        assert "Release notes" in side.messages[-1]["content"] and "What is the answer?" in side.messages[-1]["content"]
        [out] = _tool_outputs(model)
        assert "The page says 42." in out and "Release notes" not in out  # the parent pays only for the answer


async def test_default_mode_asks_once_per_host_with_always(tmp_path: Path, site: str) -> None:
    async with LoopbackModel() as model:
        urls = (f"{site}/page", f"{site}/redirect")
        calls = tuple(ScriptedCall("web_fetch", {"url": url}) for url in urls)
        model.enqueue(ToolCalls(calls), Answer(text="done"))
        flags = ["--web-fetch-allow", "127.0.0.1"]
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m", *flags) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "fetch"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            asked = 0
            while True:
                message = await agent.receive(timeout=60)
                if message.get("method") == "session/request_permission":
                    asked += 1
                    outcome = {"outcome": "selected", "optionId": "allow_always"}
                    await agent.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
                elif message.get("id") == msg_id:
                    break
        assert message["result"]["stopReason"] == "end_turn", message
        assert asked == 1
        assert all(not out.startswith("Error") for out in _tool_outputs(model))
