"""Hostile input over real pipes: each malformed line gets its exact error, and the process keeps answering."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import pytest

from acp_server.provider.offline import HangAfterHeaders, LoopbackModel

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio

CAP = 1 << 20  # --max-message-bytes for this suite

SID = "<sid>"  # replaced by a real session id

UNREACHED_ENDPOINT = ("--base-url", "http://127.0.0.1:9/v1")
"""An endpoint, so sessions open (no prompt here reaches a model)."""


def _req(method: str, params: Any = None, msg_id: Any = 7) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def _prompt(prompt: Any, session: Any = SID) -> bytes:
    return _req("session/prompt", {"sessionId": session, "prompt": prompt})


def _cursor(updated_us: int) -> str:
    """A ``session/list`` cursor in the server's own format, with a chosen timestamp."""
    return base64.urlsafe_b64encode(json.dumps(["v1", updated_us, "x"]).encode()).decode().rstrip("=")


_PROMPT_X = {"sessionId": SID, "prompt": [{"type": "text", "text": "x"}]}
_HUGE_DEADLINE = {"acpServer": {"promptDeadlineMs": 10**400}}

# (name, raw line, expected code or None for "no reply", expected id)
CASES: list[tuple[str, bytes, int | None, Any]] = [
    ("not json", b"hello", -32700, None),
    ("truncated object", b'{"jsonrpc":"2.0","id":1,', -32700, None),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', -32700, None),
    ("binary garbage", bytes(range(0, 9)) + b"\x80\x81", -32700, None),
    ("nesting bomb", b"[" * 200_000, -32700, None),
    ("trailing garbage", b'{"jsonrpc":"2.0","id":1,"method":"initialize"} x', -32700, None),
    ("empty array (batch)", b"[]", -32600, None),
    ("array batch", b'[{"jsonrpc":"2.0","id":1,"method":"initialize"}]', -32600, None),
    ("number", b"42", -32600, None),
    ("string", b'"hi"', -32600, None),
    ("null", b"null", -32600, None),
    ("boolean", b"true", -32600, None),
    ("empty object", b"{}", -32600, None),
    ("missing jsonrpc", b'{"id":11,"method":"initialize","params":{"protocolVersion":1}}', -32600, 11),
    ("wrong jsonrpc", b'{"jsonrpc":"1.0","id":12,"method":"initialize"}', -32600, 12),
    ("object id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}', -32600, None),
    ("float id", b'{"jsonrpc":"2.0","id":1.5,"method":"initialize"}', -32600, None),
    ("bool id", b'{"jsonrpc":"2.0","id":true,"method":"initialize"}', -32600, None),
    ("array id", b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}', -32600, None),
    ("null id request", b'{"jsonrpc":"2.0","id":null,"method":"initialize"}', -32600, None),
    ("method not a string", b'{"jsonrpc":"2.0","id":13,"method":5}', -32600, 13),
    ("params a string", b'{"jsonrpc":"2.0","id":14,"method":"initialize","params":"x"}', -32600, 14),
    # A response is never answered, even malformed: its id is one of ours, an error with it would read as an answer
    # to the client's request of the same id.
    ("result and error", b'{"jsonrpc":"2.0","id":15,"result":1,"error":{"code":1,"message":"m"}}', None, None),
    ("response without result", b'{"jsonrpc":"2.0","id":16}', None, None),
    ("unknown method", _req("no/such", {}, 17), -32601, 17),
    ("unknown extension method", _req("_vendor/thing", {}, 18), -32601, 18),
    ("unknown method, string id", _req("no/such", {}, "s-19"), -32601, "s-19"),
    ("initialize without version", _req("initialize", {}, 20), -32602, 20),
    ("initialize negative version", _req("initialize", {"protocolVersion": -1}, 21), -32602, 21),
    ("initialize huge version", _req("initialize", {"protocolVersion": 70000}, 22), -32602, 22),
    ("initialize array params", _req("initialize", [1], 23), -32602, 23),
    ("initialize no params", _req("initialize", None, 24), -32602, 24),
    ("session/new without cwd", _req("session/new", {"mcpServers": []}, 25), -32602, 25),
    ("session/new relative cwd", _req("session/new", {"cwd": "rel/dir", "mcpServers": []}, 26), -32602, 26),
    ("session/new cwd not a string", _req("session/new", {"cwd": 5, "mcpServers": []}, 27), -32602, 27),
    ("session/new no params", _req("session/new", None, 28), -32602, 28),
    ("prompt unknown session", _prompt([{"type": "text", "text": "x"}], "nope"), -32002, 7),
    ("prompt not a list", _prompt("hello"), -32602, 7),
    ("prompt unknown block type", _prompt([{"type": "video", "url": "x"}]), -32602, 7),
    ("prompt text without text", _prompt([{"type": "text"}]), -32602, 7),
    ("prompt session id int", _prompt([{"type": "text", "text": "x"}], 5), -32602, 7),
    ("prompt empty", _prompt([]), -32602, 7),
    ("prompt audio (not advertised)", _prompt([{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]), -32602, 7),
    ("prompt missing sessionId", _req("session/prompt", {"prompt": []}), -32602, 7),
    ("fork unknown session", _req("session/fork", {"sessionId": "nope", "cwd": "/tmp", "mcpServers": []}), -32002, 7),
    ("unknown notification", b'{"jsonrpc":"2.0","method":"_vendor/ping","params":{}}', None, None),
    ("cancel with bad params", b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":5}}', None, None),
    ("cancel unknown session", b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}', None, None),
    (
        "cancel_request unknown id",
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":999}}',
        None,
        None,
    ),
    ("response to nothing", b'{"jsonrpc":"2.0","id":77,"result":{}}', None, None),
    # Lone UTF-16 surrogates: valid JSON, but UTF-8 cannot carry them. Refused in params; escaped when echoed.
    ("lone surrogate in a method", b'{"jsonrpc":"2.0","id":40,"method":"\\udfff/x"}', -32601, 40),
    ("lone surrogate in a session id", _prompt([{"type": "text", "text": "x"}], "\ud800"), -32602, 7),
    ("lone surrogate in prompt text", _prompt([{"type": "text", "text": "a\udc00b"}]), -32602, 7),
    ("lone surrogate in a cwd", _req("session/new", {"cwd": "/tmp/\ud800", "mcpServers": []}, 41), -32602, 41),
    ("lone surrogate in a key", _req("session/list", {"\ud800": 1}, 42), -32602, 42),
    ("initialize version a string", _req("initialize", {"protocolVersion": "1"}, 43), -32602, 43),
    ("initialize version a float", _req("initialize", {"protocolVersion": 1.5}, 44), -32602, 44),
    ("initialize version null", _req("initialize", {"protocolVersion": None}, 45), -32602, 45),
    ("cancel_request sent as a request", _req("$/cancel_request", {"requestId": 1}, 46), -32600, 46),
    ("session/cancel sent as a request", _req("session/cancel", {"sessionId": SID}, 47), -32600, 47),
    ("prompt sent as a notification", b'{"jsonrpc":"2.0","method":"session/prompt","params":{}}', None, None),
    ("deadline beyond any clock", _req("session/prompt", {**_PROMPT_X, "_meta": _HUGE_DEADLINE}), -32602, 7),
    ("list cursor out of range", _req("session/list", {"cursor": _cursor(10**22)}, 48), -32602, 48),
    ("list cursor negative", _req("session/list", {"cursor": _cursor(-1)}, 49), -32602, 49),
    (
        "oversized line",
        b'{"jsonrpc":"2.0","id":30,"method":"x","params":{"p":"' + b"A" * (CAP + 10) + b'"}}',
        -32600,
        None,
    ),
]


async def test_hostile_lines_get_exact_errors_and_the_process_survives() -> None:
    assert len(CASES) >= 30
    async with spawn_agent("--max-message-bytes", str(CAP), *UNREACHED_ENDPOINT) as agent:
        assert "result" in await agent.initialize()
        session_id = await agent.new_session()
        failures: list[str] = []
        for name, line, code, reply_id in CASES:
            await agent.send_raw(line.replace(SID.encode(), session_id.encode()) + b"\n")
            ping = await agent.request_nowait("initialize", {"protocolVersion": 1})
            reply = await agent.receive()
            if code is None:
                if reply.get("id") != ping or "result" not in reply:
                    failures.append(f"{name}: expected no reply, got {reply}")
                continue
            error = reply.get("error") or {}
            if error.get("code") != code or reply.get("id") != reply_id or "result" in reply:
                failures.append(f"{name}: expected {code} id={reply_id!r}, got {reply}")
                continue
            data = error.get("data") or {}
            if not isinstance(data.get("errorKind"), str) or "traceback" in json.dumps(data):
                failures.append(f"{name}: error data lacks errorKind or leaks a traceback: {data}")
            if code == -32002 and data.get("errorKind") != "session_not_found":
                failures.append(f"{name}: wrong errorKind {data}")
            ping_reply = await agent.receive()
            if ping_reply.get("id") != ping or "result" not in ping_reply:
                failures.append(f"{name}: process stopped answering: {ping_reply}")
        assert not failures, "\n".join(failures)
        await agent.close_stdin()
        assert await agent.process.wait() == 0
    assert b"Traceback" not in agent.stderr
    for raw in agent.stdout_lines:
        assert json.loads(raw)["jsonrpc"] == "2.0"


async def test_a_lone_surrogate_is_refused_at_the_door_and_every_request_is_answered_once() -> None:
    """Valid JSON that UTF-8 cannot carry: an id is echoed escaped, params are refused, nothing is stored."""
    async with spawn_agent("--no-persist", *UNREACHED_ENDPOINT) as agent:
        assert "result" in await agent.initialize()
        await agent.send_raw(b'{"jsonrpc":"2.0","id":"\\ud800","method":"session/list"}\n')
        reply = await agent.receive()
        assert reply["id"] == "\ud800" and reply["result"] == {"sessions": []}
        assert b'"id":"\\ud800"' in agent.stdout_lines[-1]  # escaped, so the line is valid UTF-8
        refused = await agent.request("session/new", {"cwd": "/tmp/\ud800", "mcpServers": []})
        assert refused["error"]["code"] == -32602
        assert refused["error"]["data"]["errors"] == [
            {"field": "cwd", "message": "contains a lone UTF-16 surrogate (UTF-8 cannot carry it)"}
        ]
        session_id = await agent.new_session("/tmp")
        listed = await agent.request("session/list", {})  # still answers: nothing unencodable was kept
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session_id]
        await agent.close_stdin()
        assert await agent.process.wait() == 0
    assert b"Traceback" not in agent.stderr


async def test_two_requests_with_one_id_in_flight_are_each_answered_once() -> None:
    async with LoopbackModel() as model, spawn_agent("--base-url", model.base_url, "--no-persist") as agent:
        model.enqueue(HangAfterHeaders())
        await agent.initialize()
        session_id = await agent.new_session()
        blocked = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hangs"}]}
        await agent.send({"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": blocked})
        await model.wait_for_requests(1)
        await agent.send({"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {}})
        await agent.close_stdin()  # EOF while the first is in flight: it is answered too
        replies = []
        with anyio.fail_after(20):
            while len(replies) < 2:
                message = await agent.receive()
                if "method" not in message:
                    replies.append(message)
        assert await agent.process.wait() == 0
    duplicate = next(r for r in replies if "error" in r and r["error"]["code"] == -32600)
    assert "already in flight" in duplicate["error"]["message"]
    assert [r["id"] for r in replies] == [9, 9]
    assert replies[1] == {"jsonrpc": "2.0", "id": 9, "result": {"stopReason": "cancelled"}}
