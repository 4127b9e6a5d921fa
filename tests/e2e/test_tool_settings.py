"""The tool settings of the stdio agent as a process: ``--default-mode`` / ``ACP_SERVER_DEFAULT_MODE`` pick a new
session's mode (the flag wins), bypass only with ``--allow-bypass-permissions``, ``ACP_SERVER_MAX_TURN_REQUESTS``
caps the loop like its flag, and invalid values are usage errors that start nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import READ_ONLY_TOOLS

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio


async def _new_session(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A new session's answer; the agent has an endpoint (never reached: no prompt is sent)."""
    async with spawn_agent("--no-persist", "--base-url", "http://127.0.0.1:9/v1", *args, env=env) as agent:
        await agent.initialize()
        reply = await agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def _mode_of(result: dict[str, Any]) -> tuple[str, str]:
    [option] = [o for o in result["configOptions"] if o["category"] == "mode"]
    return result["modes"]["currentModeId"], option["currentValue"]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, "default"),
        ([], {"ACP_SERVER_DEFAULT_MODE": "read-only"}, "read-only"),
        (["--default-mode", "accept-edits"], {"ACP_SERVER_DEFAULT_MODE": "read-only"}, "accept-edits"),
    ],
)
async def test_the_default_mode_comes_from_the_flag_else_the_environment(
    args: list[str], env: dict[str, str], expected: str
) -> None:
    result = await _new_session(*args, env=env)
    assert _mode_of(result) == (expected, expected)
    assert "bypass-permissions" not in [m["id"] for m in result["modes"]["availableModes"]]


async def test_bypass_is_offered_and_can_be_the_default_only_when_allowed() -> None:
    result = await _new_session("--allow-bypass-permissions", env={"ACP_SERVER_DEFAULT_MODE": "bypass-permissions"})
    assert _mode_of(result) == ("bypass-permissions", "bypass-permissions")
    assert [m["id"] for m in result["modes"]["availableModes"]][-1] == "bypass-permissions"


async def test_the_environment_caps_the_model_requests_of_a_prompt(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    read = ScriptedCall("read_file", {"path": "a.txt"})
    env = {"ACP_SERVER_MAX_TURN_REQUESTS": "2", "ACP_SERVER_DEFAULT_MODE": "read-only"}
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((read,)), ToolCalls((read,)), ToolCalls((read,)))
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m", env=env) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "loop"}]
            reply = await agent.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
        assert reply["result"]["stopReason"] == "max_turn_requests", reply
        assert len(model.requests) == 2
        assert sorted(model.requests[0].tool_names) == sorted(READ_ONLY_TOOLS - {"skill"})  # read-only, no skills


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--default-mode", "yolo"], {}, "--default-mode"),
        ([], {"ACP_SERVER_DEFAULT_MODE": "yolo"}, "ACP_SERVER_DEFAULT_MODE"),
        (["--default-mode", "bypass-permissions"], {}, "--allow-bypass-permissions"),
        ([], {"ACP_SERVER_DEFAULT_MODE": "bypass-permissions"}, "--allow-bypass-permissions"),
        (["--max-turn-requests", "0"], {}, "--max-turn-requests"),
        ([], {"ACP_SERVER_MAX_TURN_REQUESTS": "many"}, "ACP_SERVER_MAX_TURN_REQUESTS"),
        (["--fs-request-timeout-ms", "0"], {}, "--fs-request-timeout-ms"),
        ([], {"ACP_SERVER_FS_REQUEST_TIMEOUT_MS": "soon"}, "ACP_SERVER_FS_REQUEST_TIMEOUT_MS"),
    ],
)
def test_invalid_tool_settings_are_usage_errors(args: list[str], env: dict[str, str], named: str) -> None:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    result = subprocess.run(
        [sys.executable, "-m", "acp_server", "--no-persist", *args],
        input='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
        capture_output=True,
        text=True,
        env={**full_env, **env},
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert named in result.stderr
    assert result.stdout == ""  # nothing was started: no reply
