"""An MCP server's ``elicitation/create`` through a real ``acp-server``: the test server
(``tests/mcp_servers/elicit_server.py``, official ``mcp`` SDK) elicits from inside a tool the loopback model calls;
a raw NDJSON client is the editor and answers the ACP ``elicitation/create`` it is sent (validated against the 2.4.0
schema). Accept, decline, a client that did not advertise, oversized schema or answer, no answer in time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.mcp import MAX_ELICITATION_BYTES
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_wire_schema import validate

from ._agent import AgentProcess, spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "elicit_server.py")
FORM = {"elicitation": {"form": {}}}
BOTH = {"elicitation": {"form": {}, "url": {}}}
Reply = dict[str, Any] | None  # the editor's answer to elicitation/create (None: never answers)


async def _run(
    tmp_path: Path, caps: dict[str, Any], tool: str, reply: Reply, *flags: str, **env: str
) -> tuple[str, list[dict[str, Any]]]:
    """The tool's result text, and the elicitation/create requests the editor was sent."""
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall(f"mcp__el__{tool}", {}, id="c1"),)), Answer(text="done"))
        args = ("--base-url", model.base_url, "--model", "m", "--no-persist", "--mcp-connect-timeout-ms", "30000")
        async with spawn_agent(*args, *flags) as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
            variables = [{"name": key, "value": value} for key, value in env.items()]
            server = {"name": "el", "command": sys.executable, "args": [SERVER], "env": variables}
            new = await agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": [server]}, timeout=60)
            session_id = new["result"]["sessionId"]
            return await _prompt(agent, session_id, reply)


async def _prompt(agent: AgentProcess, session_id: str, reply: Reply) -> tuple[str, list[dict[str, Any]]]:
    prompt_id = await agent.request_nowait(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    )
    asked: list[dict[str, Any]] = []
    result = ""
    while True:
        message = await agent.receive(timeout=60)
        if message.get("method") == "elicitation/create":
            asked.append(message)
            validate("CreateElicitationRequest", message["params"])
            if reply is not None:
                validate("CreateElicitationResponse", reply)
                await agent.send({"jsonrpc": "2.0", "id": message["id"], "result": reply})
        elif message.get("method") == "session/update":
            update = message["params"]["update"]
            if update["sessionUpdate"] == "tool_call_update" and update.get("status") in ("completed", "failed"):
                result = "".join(c["content"]["text"] for c in update.get("content") or [] if c["type"] == "content")
        elif message.get("id") == prompt_id:
            assert message["result"]["stopReason"] == "end_turn", message
            return result, asked


async def test_an_accepted_form_reaches_the_server_with_its_content(tmp_path: Path) -> None:
    reply = {"action": "accept", "content": {"name": "Ada", "age": 36}}
    result, asked = await _run(tmp_path, FORM, "ask", reply)
    assert result == 'accept: {"age": 36, "name": "Ada"}'
    (request,) = asked
    params = request["params"]
    assert params["mode"] == "form" and params["message"] == "Who are you?"
    assert params["sessionId"] and params["requestedSchema"]["required"] == ["name"]


async def test_a_declined_form_is_declined_to_the_server(tmp_path: Path) -> None:
    result, asked = await _run(tmp_path, FORM, "ask", {"action": "decline"})
    assert result == "decline: null" and len(asked) == 1


async def test_a_client_that_did_not_advertise_is_never_asked(tmp_path: Path) -> None:
    result, asked = await _run(tmp_path, {}, "ask", {"action": "accept", "content": {"name": "x"}})
    assert result == "not offered; error: Elicitation not supported" and asked == []


async def test_an_oversized_schema_is_refused_without_asking(tmp_path: Path) -> None:
    result, asked = await _run(tmp_path, FORM, "ask", {"action": "decline"}, ELICIT_PAD=str(MAX_ELICITATION_BYTES))
    assert result.startswith("error: elicitation refused: the requested schema is ") and "65536-byte cap" in result
    assert asked == []


async def test_an_oversized_answer_is_refused(tmp_path: Path) -> None:
    reply = {"action": "accept", "content": {"name": "x" * MAX_ELICITATION_BYTES}}
    result, asked = await _run(tmp_path, FORM, "ask", reply)
    assert result.startswith("error: elicitation refused: the editor's answer is ") and len(asked) == 1


async def test_an_editor_that_does_not_answer_in_time_cancels(tmp_path: Path) -> None:
    result, asked = await _run(tmp_path, FORM, "ask", None, "--fs-request-timeout-ms", "500")
    assert result == "cancel: null" and len(asked) == 1


async def test_a_url_elicitation_round_trip(tmp_path: Path) -> None:
    result, asked = await _run(tmp_path, BOTH, "login", {"action": "accept"})
    assert result == "accept: null"
    params = asked[0]["params"]
    assert (params["mode"], params["url"], params["elicitationId"]) == ("url", "https://example.com/oauth?x=1", "e-1")


async def test_a_url_elicitation_is_refused_to_a_form_only_client(tmp_path: Path) -> None:
    result, asked = await _run(tmp_path, FORM, "login", {"action": "accept"})
    assert result == "error: elicitation refused: the editor does not support url mode" and asked == []
