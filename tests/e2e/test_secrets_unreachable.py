"""No secret of the agent reaches the model through a command: a command the model runs reads ``/proc/$PPID`` and
``/proc/<agent pid>`` (``environ``, ``cmdline``), run locally and in an editor terminal (the official ACP SDK as the
editor, running it as its own subprocess), over stdio and through ``acp-server serve``; what it printed, which the
model gets, holds neither the key, the token nor the store password given in the environment or on the command line."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from acp import spawn_agent_process

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_blocks import text_block

from ._agent import announced_url
from ._hardening import BYPASS, Editor, capabilities

pytestmark = pytest.mark.anyio

ENV_KEY = "sk-env-key-0123456789abcdef"
FLAG_KEY = "sk-flag-key-0123456789abcdef"
ENV_TOKEN = "env-token-0123456789abcdef"
FLAG_TOKEN = "flag-token-0123456789abcdef"
STORE_PASSWORD = "store-pw-0123456789abcdef"
ENV_STORE = f"postgresql://acp:{STORE_PASSWORD}@127.0.0.1:9/acp"  # --no-persist wins: it is never connected to
SECRETS = (ENV_KEY, FLAG_KEY, ENV_TOKEN, FLAG_TOKEN, STORE_PASSWORD)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    return {**env, **extra}


def _reads(agent_pid: int) -> str:
    """A command that prints the agent's (and its own parent's) environment and command line."""
    paths = " ".join(f"/proc/{who}/{what}" for who in ("$PPID", agent_pid) for what in ("environ", "cmdline"))
    reads = f"for f in {paths}; do echo \"== $f\"; tr '\\0' '\\n' < $f 2>&1; echo; done"
    opens = f"for f in mem fd/0; do echo \"== open $f\"; (exec 3< /proc/{agent_pid}/$f) 2>&1 && echo opened; done"
    return f"{reads}; {opens}"


def _check(output: str, agent_pid: int, *, local: bool) -> None:
    for secret in SECRETS:
        assert secret not in output, f"a secret reached the model:\n{output}"
    _, _, agent = output.partition(f"== /proc/{agent_pid}/environ\n")
    environ, _, cmdline = agent.partition(f"== /proc/{agent_pid}/cmdline\n")
    assert "acp_server" in cmdline  # the reads did happen: a command line is readable by anyone
    assert "PATH=" in environ or "Permission denied" in environ  # root reads the rest; a user is refused
    if local:  # the agent's memory and descriptors: refused to its commands, even as root
        _, _, opens = output.partition("== open mem\n")
        assert opens.count("Permission denied") == 2 and "opened" not in opens, opens


def _tool_output(model: LoopbackModel) -> str:
    return "".join(m["content"] for m in model.requests[1].messages if m.get("role") == "tool")


@pytest.mark.parametrize("terminal", [False, True], ids=["local", "editor-terminal"])
async def test_stdio_commands_cannot_read_the_agents_secrets(tmp_path: Path, terminal: bool) -> None:
    async with LoopbackModel() as model:
        args = ["-m", "acp_server", "--base-url", model.base_url, "--api-key", FLAG_KEY, "--model", "m"]
        env = _clean_env(OPENAI_API_KEY=ENV_KEY, ACP_SERVER_TOKEN=ENV_TOKEN, ACP_SERVER_STORE=ENV_STORE)
        editor = Editor()
        async with spawn_agent_process(editor, sys.executable, *args, "--no-persist", *BYPASS, env=env) as (
            conn,
            process,
        ):
            await conn.initialize(protocol_version=1, client_capabilities=capabilities(terminal=terminal))
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            model.enqueue(
                ToolCalls((ScriptedCall("run_command", {"command": _reads(process.pid)}, id="c1"),)),
                Answer(text="done", reasoning=""),
            )
            with anyio.fail_after(30):
                await conn.prompt(session_id=session.session_id, prompt=[text_block("read /proc")])
            agent_pid = process.pid
    assert bool(editor.terminals) == terminal  # the command ran where the test meant it to
    _check(_tool_output(model), agent_pid, local=not terminal)


async def test_daemon_commands_cannot_read_the_agents_secrets(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        command = [sys.executable, "-m", "acp_server", "serve", "--port", "0", "--no-persist", *BYPASS]
        command += ["--base-url", model.base_url, "--model", "m", "--api-key", FLAG_KEY, "--token", FLAG_TOKEN]
        env = _clean_env(OPENAI_API_KEY=ENV_KEY, ACP_SERVER_TOKEN=ENV_TOKEN, ACP_SERVER_STORE=ENV_STORE)
        process = await anyio.open_process(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        async with process:
            try:
                url = await announced_url(process)
                model.enqueue(
                    ToolCalls((ScriptedCall("run_command", {"command": _reads(process.pid)}, id="c1"),)),
                    Answer(text="done", reasoning=""),
                )
                headers = {"Authorization": f"Bearer {FLAG_TOKEN}"}
                async with httpx2.AsyncClient(base_url=url, timeout=30, headers=headers) as client:
                    created = await client.post("/session", json={"cwd": str(tmp_path)})
                    assert created.status_code == 201, created.text
                    session_id = created.json()["sessionId"]
                    prompt = {"prompt": [{"type": "text", "text": "read /proc"}]}
                    done = await client.post(f"/session/{session_id}/prompt?wait=true", json=prompt)
                    assert done.status_code == 200, done.text
            finally:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
    _check(_tool_output(model), process.pid, local=True)
