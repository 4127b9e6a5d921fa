"""A client's own system prompt (ACP's unstable ``systemPrompt``, advertised as ``sessionCapabilities.systemPrompt``
with ``override`` beside ``append``), end to end with a raw NDJSON client and real agent processes, the offline model
recording what it is asked: ``append`` follows the agent's whole prompt, ``override`` replaces its how-to-work text
(the environment stays), an unsupported mode or an oversized text is -32602 with nothing created, a client that sends
none gets today's prompt, and a load after a restart keeps the stored one; a fork copies it, a resume replaces it.
Capability and requests are valid against ``@agentclientprotocol/sdk@2.4.0``'s unstable schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.system_prompts import MAX_SYSTEM_PROMPT_BYTES
from acp_server.turn import DEFAULT_SYSTEM_PROMPT
from tests.acp_wire_schema import validate

from ._agent import AgentProcess, spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

APPENDED = "Always answer in French."
OVERRIDE = "You are a code reviewer. Never edit files."


def _new(cwd: Path, mode: str | None = None, text: str = "") -> dict[str, Any]:
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": []}
    if mode is not None:
        params["systemPrompt"] = {"mode": mode, "content": [{"type": "text", "text": text}]}
    return params


async def _session(agent: AgentProcess, params: dict[str, Any], method: str = "session/new") -> str:
    reply = await agent.request(method, params)
    assert "result" in reply, (reply, agent.stderr[-2000:])
    return str(reply["result"].get("sessionId", params.get("sessionId")))


async def _system_of(agent: AgentProcess, model: LoopbackModel, session_id: str) -> str:
    """The system message of the model request this session's next prompt makes."""
    model.enqueue(Answer(text="ok", reasoning=""))
    before = len(model.requests)
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
    reply = await agent.request("session/prompt", params, timeout=30)
    assert reply["result"]["stopReason"] == "end_turn", reply
    [request] = model.requests[before:]
    first = request.messages[0]
    assert first["role"] == "system"
    return str(first["content"])


async def _count(agent: AgentProcess) -> int:
    return len((await agent.request("session/list", {}))["result"]["sessions"])


async def test_append_override_refusals_and_a_load_after_a_restart(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "home" / "state")}
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with LoopbackModel() as model:
        args = ("--base-url", model.base_url, "--model", "m")
        async with spawn_agent(*args, env=env) as agent:
            init = await agent.initialize()
            validate("InitializeResponse", init["result"], unstable=True)
            assert init["result"]["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {
                "mode": {"override": {}}
            }
            plain = await _system_of(agent, model, await _session(agent, _new(cwd)))
            assert plain.startswith(DEFAULT_SYSTEM_PROMPT)  # a client that sends nothing: today's prompt

            for params in (_new(cwd, "append", APPENDED), _new(cwd, "override", OVERRIDE)):
                validate("NewSessionRequest", params, unstable=True)
            appended = await _session(agent, _new(cwd, "append", APPENDED))
            assert await _system_of(agent, model, appended) == f"{plain}\n\n{APPENDED}"
            overridden = await _session(agent, _new(cwd, "override", OVERRIDE))
            assert await _system_of(agent, model, overridden) == plain.replace(DEFAULT_SYSTEM_PROMPT, OVERRIDE, 1)

            sessions = await _count(agent)
            refused = await agent.request("session/new", _new(cwd, "replace", "x"))
            assert refused["error"]["code"] == -32602, refused
            assert refused["error"]["data"]["errors"][0]["field"] == "systemPrompt.mode"
            too_big = await agent.request("session/new", _new(cwd, "append", "x" * (MAX_SYSTEM_PROMPT_BYTES + 1)))
            assert too_big["error"]["code"] == -32602, too_big
            assert too_big["error"]["data"]["errors"][0]["field"] == "systemPrompt.content"
            image = _new(cwd, "append", "x")
            image["systemPrompt"]["content"] = [{"type": "image", "data": "AA==", "mimeType": "image/png"}]
            not_text = await agent.request("session/new", image)
            assert not_text["error"]["data"]["errors"][0]["field"] == "systemPrompt.content[0]"
            assert await _count(agent) == sessions  # nothing was created

            forked = await _session(agent, {"sessionId": appended, "cwd": str(cwd), "mcpServers": []}, "session/fork")
            assert await _system_of(agent, model, forked) == f"{plain}\n\n{APPENDED}"  # the fork copies it
            own = {**_new(cwd, "override", OVERRIDE), "sessionId": appended}
            validate("ForkSessionRequest", own, unstable=True)
            forked_own = await _session(agent, own, "session/fork")  # a fork that gives its own
            assert await _system_of(agent, model, forked_own) == plain.replace(DEFAULT_SYSTEM_PROMPT, OVERRIDE, 1)
            assert await _system_of(agent, model, appended) == f"{plain}\n\n{APPENDED}"  # the source keeps its own

        async with spawn_agent(*args, env=env) as agent:  # a restart: the prompt was stored with the session
            await agent.initialize()
            load = {"sessionId": overridden, "cwd": str(cwd), "mcpServers": []}
            validate("LoadSessionRequest", load, unstable=True)
            await _session(agent, load, "session/load")
            assert await _system_of(agent, model, overridden) == plain.replace(DEFAULT_SYSTEM_PROMPT, OVERRIDE, 1)
            resume = {**_new(cwd, "append", APPENDED), "sessionId": overridden}
            validate("ResumeSessionRequest", resume, unstable=True)
            await _session(agent, resume, "session/resume")  # another one given: it replaces the stored one
            assert await _system_of(agent, model, overridden) == f"{plain}\n\n{APPENDED}"
