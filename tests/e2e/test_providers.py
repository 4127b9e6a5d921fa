"""ACP's unstable ``providers/*`` through a real agent process, every answer valid against the unstable schema of
``@agentclientprotocol/sdk@2.4.0`` (vendored in ``tests/schemas``): ``initialize`` advertises ``providers: {}``;
``providers/set`` routes the next model requests to the editor's base URL with its headers (an agent with no
endpoint then opens sessions), never with the configured key, and writes nothing to disk; ``providers/disable``
brings back the agent's own endpoint; ``providers/list`` says which is in use; anything else is refused precisely
(-32602 naming the field), nothing changed; the headers appear in no answer and no log line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._agent import AgentProcess, spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SCHEMA = json.loads((Path(__file__).parents[1] / "acp_schema_2_4_0" / "schema.unstable.json").read_text())
NEW = {"cwd": "/tmp", "mcpServers": []}
TOKEN = "Bearer editor-secret-123456"
CONFIG_KEY = "sk-config-secret-654321"


def valid(definition: str, value: Any) -> Any:
    """``value`` checked against the unstable schema's ``$defs[definition]``; returned for chaining."""
    Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]}).validate(value)
    return value


def _config(tmp_path: Path, text: str | None) -> dict[str, str]:
    (tmp_path / "acp-server").mkdir(parents=True)
    if text is not None:
        (tmp_path / "acp-server" / "config.toml").write_text(text)
        (tmp_path / "acp-server" / "config.toml").chmod(0o600)
    return {"XDG_CONFIG_HOME": str(tmp_path)}


async def _listed(agent: AgentProcess) -> dict[str, Any] | None:
    reply = await agent.request("providers/list", {})
    [provider] = valid("ListProvidersResponse", reply["result"])["providers"]
    assert provider["providerId"] == "main" and provider["supported"] == ["openai"] and provider["required"] is False
    current: dict[str, Any] | None = provider["current"]
    return current


async def _prompt(agent: AgentProcess) -> str:
    session_id = await agent.new_session()
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
    reply, _ = await agent.until_response(await agent.request_nowait("session/prompt", prompt))
    return str(reply["result"]["stopReason"])


async def test_initialize_advertises_the_providers_capability() -> None:
    async with spawn_agent("--no-persist", "--offline") as agent:
        result = (await agent.initialize())["result"]
    assert result["agentCapabilities"]["providers"] == {}
    valid("InitializeResponse", result)


async def test_an_editor_endpoint_lets_an_unconfigured_agent_work_until_disabled(tmp_path: Path) -> None:
    env = _config(tmp_path / "config", None)
    async with LoopbackModel() as model, spawn_agent("--no-persist", env=env) as agent:
        model.enqueue(Answer(text="through the editor's endpoint"))
        await agent.initialize()
        assert await _listed(agent) is None  # no endpoint: the provider is disabled
        assert (await agent.request("session/new", NEW))["error"]["code"] == -32000
        params = {
            "providerId": "main",
            "apiType": "openai",
            "baseUrl": model.base_url,
            "headers": {"Authorization": TOKEN, "X-Route": "team-a"},
        }
        valid("SetProviderRequest", params)
        valid("SetProviderResponse", (await agent.request("providers/set", params))["result"])
        assert await _listed(agent) == {"apiType": "openai", "baseUrl": model.base_url}
        assert await _prompt(agent) == "end_turn"
        chat = [r for r in model.requests if r.path.endswith("/chat/completions")][-1]
        assert chat.headers["authorization"] == TOKEN and chat.headers["x-route"] == "team-a"

        reply = await agent.request("providers/disable", {"providerId": "main"})
        valid("DisableProviderResponse", reply["result"])
        assert await _listed(agent) is None
        assert (await agent.request("session/new", NEW))["error"]["code"] == -32000
    assert list((tmp_path / "config" / "acp-server").iterdir()) == []  # nothing written
    assert b"editor-secret" not in agent.stderr and not any(b"editor-secret" in line for line in agent.stdout_lines)


async def test_the_configured_key_never_goes_to_the_editors_endpoint_and_disable_restores_it(tmp_path: Path) -> None:
    async with LoopbackModel() as own, LoopbackModel() as editors:
        env = _config(tmp_path, f'base-url = "{own.base_url}"\napi-key = "{CONFIG_KEY}"\nmodel = "m"\n')
        own.enqueue(Answer(text="own"))
        editors.enqueue(Answer(text="editor's"))
        async with spawn_agent("--no-persist", env=env) as agent:
            await agent.initialize()
            assert await _listed(agent) == {"apiType": "openai", "baseUrl": own.base_url}
            params = {"providerId": "main", "apiType": "openai", "baseUrl": editors.base_url}
            assert (await agent.request("providers/set", params))["result"] == {}
            assert await _prompt(agent) == "end_turn"
            await agent.request("providers/disable", {"providerId": "main"})
            assert await _listed(agent) == {"apiType": "openai", "baseUrl": own.base_url}
            assert await _prompt(agent) == "end_turn"
        to_editor = [r for r in editors.requests if r.path.endswith("/chat/completions")]
        to_own = [r for r in own.requests if r.path.endswith("/chat/completions")]
    assert len(to_editor) == 1 and len(to_own) == 1
    assert all(CONFIG_KEY not in json.dumps(r.headers) for r in editors.requests)
    assert to_own[0].headers["authorization"] == f"Bearer {CONFIG_KEY}" and to_editor[0].body["model"] == "m"


REFUSED = [
    ({"apiType": "anthropic"}, "apiType", "OpenAI API only"),
    ({"apiType": "_gateway"}, "apiType", "OpenAI API only"),  # the schema allows any name: refused as unsupported
    ({"providerId": "openai"}, "providerId", "unknown provider 'openai'"),
    ({"baseUrl": "ftp://host/v1"}, "baseUrl", "http"),
    ({"baseUrl": "localhost:8080"}, "baseUrl", "http"),
    ({"baseUrl": None}, "baseUrl", "required"),
    ({"headers": {"Bad Name": "x"}}, "headers", "'Bad Name' is not a valid header name"),
    ({"headers": {"X-Ok": "line\r\nInjected: 1"}}, "headers", "control character"),
    ({"headers": {f"X-{i}": "v" for i in range(65)}}, "headers", "at most 64"),
    ({"headers": ["Authorization"]}, "headers", "object of strings"),
]


async def test_what_cannot_be_used_is_refused_precisely_and_nothing_changes() -> None:
    async with spawn_agent("--no-persist", "--base-url", "http://127.0.0.1:9/v1") as agent:
        await agent.initialize()
        for change, field, text in REFUSED:
            params = {"providerId": "main", "apiType": "openai", "baseUrl": "http://127.0.0.1:1/v1", **change}
            params = {k: v for k, v in params.items() if v is not None}
            error = (await agent.request("providers/set", params))["error"]
            assert error["code"] == -32602, (change, error)
            assert error["data"]["errors"][0]["field"] == field and text in error["message"], (change, error)
            assert "line\r\n" not in json.dumps(error)  # a header's value is never echoed
        error = (await agent.request("providers/disable", {"providerId": "x"}))["error"]
        assert error["code"] == -32602 and "unknown provider 'x'" in error["message"]
        assert (await agent.request("providers/disable", {}))["error"]["code"] == -32602
        assert await _listed(agent) == {"apiType": "openai", "baseUrl": "http://127.0.0.1:9/v1"}


async def test_a_turn_running_during_set_ends_on_its_endpoint_and_the_next_goes_to_the_new_one(tmp_path: Path) -> None:
    async with LoopbackModel() as own, LoopbackModel() as editors:
        own.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "x"}),)), Answer(text="done on own")
        )
        editors.enqueue(Answer(text="editor's"))
        env = _config(tmp_path / "config", f'base-url = "{own.base_url}"\nmodel = "m"\n')
        async with spawn_agent("--no-persist", env=env) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "write"}]}
            prompt_id = await agent.request_nowait("session/prompt", prompt)
            while (asked := await agent.receive()).get("method") != "session/request_permission":
                pass  # the turn waits for the permission: its first request is over, its second to come
            params = {"providerId": "main", "apiType": "openai", "baseUrl": editors.base_url}
            assert (await agent.request("providers/set", params))["result"] == {}
            allow = next(o for o in asked["params"]["options"] if o["kind"] == "allow_once")
            await agent.send(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}},
                }
            )
            reply, _ = await agent.until_response(prompt_id)
            assert reply["result"]["stopReason"] == "end_turn", reply
            assert await _prompt(agent) == "end_turn"
        chats = {
            name: [r for r in m.requests if r.path.endswith("/chat/completions")]
            for name, m in [("own", own), ("editors", editors)]
        }
    assert len(chats["own"]) == 2 and len(chats["editors"]) == 1  # the running turn's second request went to its own
    assert (tmp_path / "a.txt").read_text() == "x"
