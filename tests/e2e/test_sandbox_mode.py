"""The ``sandbox`` mode as a new user meets it: the official ACP SDK as the editor, a real ``acp-server`` with the
scripted loopback model. The mode is offered with a description; in it the model runs the project's tests and edits
a file with no permission dialog; reading ``~/.ssh`` or connecting to a local server fails inside the sandbox; asking
to run outside it asks the user (the reason in the title), and a rejection runs nothing."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import SandboxPolicy, configure_sandbox, sandbox_support
from tests.acp_blocks import text_block

from .test_tools import Editor, _tool_messages

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(autouse=True)
def needs_bubblewrap() -> None:
    configure_sandbox(SandboxPolicy(mechanism="bubblewrap"))
    try:
        support = sandbox_support()
    finally:
        configure_sandbox(SandboxPolicy())
    if support.mechanism is None:
        pytest.skip(f"bubblewrap does not work here: {support.detail}")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return root


@asynccontextmanager
async def _agent(editor: Editor, model: LoopbackModel, home: Path) -> AsyncIterator[Any]:
    args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--no-persist"]
    env = {**os.environ, "HOME": str(home)}
    async with spawn_agent_process(editor, sys.executable, *args, env=env) as (conn, _process):
        yield conn


async def test_sandbox_mode_runs_and_edits_unasked_and_asks_to_go_outside(
    project: Path, home: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran-outside"
    editor = Editor(answers=["reject_once"])
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('CONNECTED')"
        async with LoopbackModel() as model:
            model.enqueue(
                ToolCalls((ScriptedCall("run_command", {"command": f"{sys.executable} -m pytest -q"}, id="t1"),)),
                ToolCalls(
                    (ScriptedCall("edit_file", {"path": "calc.py", "old_text": "a + b", "new_text": "b + a"}, id="e1"),)
                ),
                Answer(text="tests pass, edited"),
                ToolCalls((ScriptedCall("run_command", {"command": "cat ~/.ssh/id_ed25519"}, id="s1"),)),
                ToolCalls((ScriptedCall("run_command", {"command": f'{sys.executable} -c "{connect}"'}, id="n1"),)),
                ToolCalls(
                    (
                        ScriptedCall(
                            "run_command",
                            {
                                "command": f"cat ~/.ssh/id_ed25519 > {marker}",
                                "outside_sandbox": True,
                                "reason": "read the SSH key",
                            },
                            id="o1",
                        ),
                    )
                ),
                Answer(text="could not"),
            )
            async with _agent(editor, model, home) as conn:
                await conn.initialize(protocol_version=1)
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                modes = {mode.id: mode for mode in session.modes.available_modes}
                assert "sandbox" in modes and "sandbox" in (modes["sandbox"].description or "")
                await conn.set_session_mode(session_id=session.session_id, mode_id="sandbox")
                await conn.prompt(session_id=session.session_id, prompt=[text_block("run the tests, then edit")])
                assert editor.permission_requests == []  # no dialog in sandbox mode
                assert editor.terminal_calls == []  # run locally, inside the sandbox
                assert "1 passed" in _tool_messages(model, 1)["t1"]
                assert (project / "calc.py").read_text() == "def add(a, b):\n    return b + a\n"
                await conn.prompt(session_id=session.session_id, prompt=[text_block("now read my key")])
    secret_try = _tool_messages(model, 4)["s1"]
    assert "PRIVATE-KEY-MATERIAL" not in secret_try and "No such file" in secret_try
    assert "outside_sandbox" in secret_try  # the model is told the way out
    assert "CONNECTED" not in _tool_messages(model, 5)["n1"]
    assert len(editor.permission_requests) == 1  # going outside asks
    call, options, _ = editor.permission_requests[0]
    assert call.kind == "execute" and "read the SSH key" in (call.title or "")
    assert {option.kind for option in options} >= {"allow_once", "reject_once"}
    assert not marker.exists()  # rejected: nothing ran
    assert "declined" in _tool_messages(model, 6)["o1"]


async def test_daemon_without_a_token_does_not_offer_sandbox() -> None:
    from acp_server.daemon import daemon_modes

    assert "sandbox" not in daemon_modes(token=None, sandbox=True)
    assert "sandbox" in daemon_modes(token="t" * 32, sandbox=True)


async def test_ask_in_sandbox_mode_runs_a_command_inside_unasked(project: Path, tmp_path: Path, home: Path) -> None:
    outside = tmp_path / "outside.txt"
    command = f"echo made > made.txt && echo leak > {outside}; cat ~/.ssh/id_ed25519"
    run = ScriptedCall("run_command", {"command": command}, id="r1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((run,)), Answer(text="done", reasoning=""))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
        result = await anyio.run_process(
            [sys.executable, "-m", "acp_server", "ask", "--base-url", model.base_url, "--mode", "sandbox", "go"],
            cwd=project,
            env={**env, "HOME": str(home)},
            check=False,
        )
        output = _tool_messages(model, 1)["r1"]
    assert result.returncode == 0, result.stderr.decode()
    assert "declined" not in result.stderr.decode()  # nothing asked: a pipe could not have answered
    assert (project / "made.txt").read_text() == "made\n"
    assert not outside.exists() and "PRIVATE-KEY-MATERIAL" not in output


async def test_the_agents_config_file_is_hidden_wherever_it_is(project: Path, tmp_path: Path, home: Path) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "acp-server").mkdir(parents=True)
    config = xdg / "acp-server" / "config.toml"
    config.write_text('api-key = "sk-XDG-SECRET-0123456789"\n')
    config.chmod(0o600)
    run = ScriptedCall("run_command", {"command": f"cat {config}"}, id="r1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((run,)), Answer(text="done", reasoning=""))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
        result = await anyio.run_process(
            [sys.executable, "-m", "acp_server", "ask", "--base-url", model.base_url, "--mode", "sandbox", "go"],
            cwd=project,
            env={**env, "HOME": str(home), "XDG_CONFIG_HOME": str(xdg)},
            check=False,
        )
        output = _tool_messages(model, 1)["r1"]
    assert result.returncode == 0, result.stderr.decode()
    assert "sk-XDG-SECRET" not in output and "No such file" in output


async def test_always_allowing_outside_covers_that_command_prefix_only(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    def outside_call(command: str, call_id: str) -> ToolCalls:
        args = {"command": command, "outside_sandbox": True, "reason": "write outside the project"}
        return ToolCalls((ScriptedCall("run_command", args, id=call_id),))

    write = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'w').close()\""
    editor = Editor(answers=["allow_always", "reject_once"])
    async with LoopbackModel() as model:
        model.enqueue(
            outside_call(f"{write} {outside}/a", "o1"),
            outside_call(f"{write} {outside}/b", "o2"),  # the same prefix: not asked again
            outside_call(f"touch {outside}/c", "o3"),  # another prefix: asked (and rejected)
            Answer(text="done"),
        )
        async with _agent(editor, model, tmp_path) as conn:
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            await conn.set_session_mode(session_id=session.session_id, mode_id="sandbox")
            await conn.prompt(session_id=session.session_id, prompt=[text_block("write them")])
    assert len(editor.permission_requests) == 2
    assert sorted(path.name for path in outside.iterdir()) == ["a", "b"]
