"""ACP authentication over real pipes: ``initialize`` always advertises the ``setup`` terminal method (valid against
the ACP schema); with no usable endpoint a session is refused ``auth_required`` (-32000) naming it, instead of the
first prompt failing; ``authenticate`` re-reads the configuration file and succeeds once it names an endpoint, the
model then answering; a base URL or ``--offline`` never asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio

PROMPT = [{"type": "text", "text": "hello"}]
NEW = {"cwd": "/tmp", "mcpServers": []}


def _config_home(tmp_path: Path) -> tuple[dict[str, str], Path]:
    (tmp_path / "acp-server").mkdir()
    return {"XDG_CONFIG_HOME": str(tmp_path)}, tmp_path / "acp-server" / "config.toml"


REGISTRY_CHECKER_CAPABILITIES = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
    "_meta": {"terminal_output": True, "terminal-auth": True},
}
"""What the ACP Registry's auth check (its ``.github/workflows/client.py``) sends, on a machine with no model."""


@pytest.mark.parametrize("capabilities", [{}, REGISTRY_CHECKER_CAPABILITIES])
async def test_initialize_advertises_the_setup_terminal_method(capabilities: dict[str, object]) -> None:
    from acp.schema import InitializeResponse, TerminalAuthMethod

    async with spawn_agent() as agent:  # no model, no key: as the registry's check runs it
        reply = await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    result = reply["result"]
    [method] = result["authMethods"]
    assert {k: method[k] for k in ("id", "type", "args")} == {"id": "setup", "type": "terminal", "args": ["setup"]}
    assert method["name"] and method["description"]
    meta = method["_meta"]["terminal-auth"]
    assert meta["args"][-1] == "setup" and meta["label"] and meta["command"]
    assert result["agentCapabilities"]["auth"] == {}
    parsed = InitializeResponse.model_validate(result)
    assert isinstance(parsed.auth_methods[0], TerminalAuthMethod)


async def test_without_an_endpoint_a_session_asks_for_setup_until_the_file_names_one(tmp_path: Path) -> None:
    env, config = _config_home(tmp_path)
    async with LoopbackModel() as model, spawn_agent("--no-persist", env=env) as agent:
        model.enqueue(Answer(text="configured and answering"))
        await agent.initialize()
        for method, params in [
            ("session/new", NEW),
            ("session/load", {**NEW, "sessionId": "s"}),
            ("session/resume", {**NEW, "sessionId": "s"}),
            ("session/fork", {**NEW, "sessionId": "s"}),
        ]:
            error = (await agent.request(method, params))["error"]
            assert error["code"] == -32000, (method, error)
            assert error["data"]["authMethods"] == ["setup"] and "setup" in error["message"]
        unknown = (await agent.request("authenticate", {"methodId": "oauth"}))["error"]
        assert unknown["code"] == -32602 and "'setup'" in unknown["message"]
        still = (await agent.request("authenticate", {"methodId": "setup"}))["error"]
        assert still["code"] == -32000 and "still no model endpoint" in still["message"]
        config.write_text("base-url = \n")
        bad = (await agent.request("authenticate", {"methodId": "setup"}))["error"]
        assert bad["code"] == -32000 and f"{config}:1" in bad["message"]
        config.write_text(f'base-url = "{model.base_url}"\nmodel = "m"\n')
        assert (await agent.request("authenticate", {"methodId": "setup"}))["result"] == {}
        session_id = await agent.new_session()
        reply, seen = await agent.until_response(
            await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
        )
        assert reply["result"]["stopReason"] == "end_turn", reply
        text = "".join(
            m["params"]["update"]["content"]["text"]
            for m in seen
            if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert text == "configured and answering"
        assert model.requests[-1].body["model"] == "m"


@pytest.mark.parametrize("args", [("--offline",), ("--base-url", "http://127.0.0.1:9/v1")])
async def test_an_offline_or_local_endpoint_never_asks(args: tuple[str, ...]) -> None:
    async with spawn_agent("--no-persist", *args) as agent:
        await agent.initialize()
        await agent.new_session()
        assert (await agent.request("authenticate", {"methodId": "setup"}))["result"] == {}


async def test_a_key_for_the_hosted_default_is_usable(tmp_path: Path) -> None:
    env, config = _config_home(tmp_path)
    config.write_text('api-key = "sk-test-0000"\n')
    config.chmod(0o600)
    async with spawn_agent("--no-persist", env=env) as agent:
        await agent.initialize()
        await agent.new_session()
