"""The ACP Registry's way, end to end: the wheel run as the registry runs an agent (``uvx --from WHEEL acp-server``,
no arguments) with a fresh HOME; the registry's own auth check (its ``client.py``, vendored as
``registry_client.py``) passes; in that HOME a session answers ``auth_required``; ``acp-server setup``, typed on a
real pseudo-terminal against a local OpenAI-compatible server, writes the configuration; the same agent, started
again with no flags, answers a prompt and runs a tool.

It skips, saying why, when ``uv`` can neither be found nor installed, or the wheel cannot be built. uvx builds a
fresh environment and resolves the wheel's dependencies from the package index: its cache persists in the temporary
directory (``acp-server-tests-uv-cache``) so that only a first run downloads; every step is bounded.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import anyio
import pytest

from acp_server import __version__
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ..cli._terminal import Terminal
from . import registry_client
from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(tempfile.gettempdir())
UV_CACHE = SHARED / "acp-server-tests-uv-cache"
UV_TARGET = SHARED / "acp-server-tests-uv"
"""Where ``pip install --target`` puts uv when it is not installed (kept: a second run reuses it)."""
BOUND_S = 300
XDG_DEFAULTS = {"CONFIG": ".config", "DATA": ".local/share", "STATE": ".local/state", "CACHE": ".cache"}


def _uvx() -> str:
    """The ``uvx`` executable: on the PATH, from an installed ``uv`` package, or pip-installed into a temporary
    target (bounded); else the test skips, saying why."""
    found = shutil.which("uvx")
    if found:
        return found
    if importlib.util.find_spec("uv") is not None:
        from uv import find_uv_bin  # type: ignore[import-not-found,unused-ignore]

        sibling = Path(find_uv_bin()).with_name("uvx")
        if sibling.exists():
            return str(sibling)
    target = UV_TARGET / "bin" / "uvx"
    if not target.exists():
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(UV_TARGET), "uv"],
                capture_output=True,
                timeout=BOUND_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"uv could not be installed: pip install uv took over {BOUND_S} s")
        if done.returncode != 0 or not target.exists():
            pytest.skip(f"uv could not be installed: {done.stderr.decode(errors='replace')[-300:]}")
    return str(target)


def _wheel(out: Path) -> Path:
    """This version's wheel: ``dist/``'s when present (CI builds it first), else built now into ``out``."""
    built = sorted((ROOT / "dist").glob(f"acp_server-{__version__}-*.whl"))
    if built:
        return built[-1]
    if importlib.util.find_spec("build.__main__") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)]
    else:  # the dev extra brings build; pip's own builder makes the same wheel
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=BOUND_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"the wheel could not be built in {BOUND_S} s")
    wheels = sorted(out.glob(f"acp_server-{__version__}-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(f"the wheel could not be built: {done.stderr.decode(errors='replace')[-300:]}")
    return wheels[-1]


def _fresh_env(home: Path) -> dict[str, str]:
    """A user who never ran acp-server: a new HOME, its XDG directories where they are by default (the test
    runner's are replaced), no model settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ACP_SERVER_", "XDG_", "PYTHONPATH", "VIRTUAL_ENV"))
    }
    env.update({"HOME": str(home), "TERM": "dumb", "UV_CACHE_DIR": str(UV_CACHE)})
    env.update({f"XDG_{kind}_HOME": str(home / place) for kind, place in XDG_DEFAULTS.items()})
    return env


def _warm(command: list[str], env: dict[str, str], cwd: Path) -> None:
    """The first uvx run (it resolves and installs the wheel's dependencies): bounded, here, not inside the
    registry check's own 60 s handshake timeout."""
    try:
        done = subprocess.run(
            [*command, "--version"], env=env, cwd=cwd, capture_output=True, timeout=BOUND_S, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"uvx could not install the wheel's dependencies in {BOUND_S} s")
    if done.returncode != 0:
        pytest.skip(f"uvx could not install the wheel: {done.stderr.decode(errors='replace')[-400:]}")
    assert done.stdout.decode().strip().endswith(__version__), done.stdout


def _registry_check(command: list[str], cwd: Path, env: dict[str, str]) -> registry_client.AuthCheckResult:
    """``run_auth_check`` as the registry calls it, with the variables this test sets."""
    return registry_client.run_auth_check(command, cwd, {k: v for k, v in env.items() if os.environ.get(k) != v})


# The vendored check ends the agent without closing its pipes: their ResourceWarning is the registry's file's.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
async def test_the_registry_way_from_the_auth_check_to_a_tool_call(tmp_path: Path) -> None:
    uvx = await anyio.to_thread.run_sync(_uvx)
    wheel = await anyio.to_thread.run_sync(_wheel, tmp_path / "dist")
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / "notes.txt").write_text("the registry's way works\n")
    env = _fresh_env(home)
    command = [uvx, "--from", str(wheel), "acp-server"]  # what the entry's "uvx": {"package": ...} becomes
    await anyio.to_thread.run_sync(_warm, command, env, project)

    # 1. The registry's own check, as its verify_agents.py calls it: HOME overridden, the default 60 s timeout.
    check = await anyio.to_thread.run_sync(_registry_check, command, project, env)
    assert check.success, check.error
    assert [(m.id, m.type) for m in check.auth_methods] == [("setup", "terminal")]

    async with LoopbackModel() as model:
        model.listed_models = [{"id": "coder", "max_model_len": 32768}]
        # 2. No endpoint in this HOME: a session is refused auth_required, naming setup.
        async with spawn_agent(command=command, env=env, cwd=str(project)) as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=60)
            error = (await agent.request("session/new", {"cwd": str(project), "mcpServers": []}))["error"]
            assert error["code"] == -32000 and error["data"]["authMethods"] == ["setup"], error

        # 3. setup on a real terminal: the URL typed, the one model listed taken with Enter, the tool round trip.
        model.enqueue(ToolCalls((ScriptedCall("ping", {"text": "pong"}),)), Answer(text="pong received"))
        with Terminal(command=command, env=env) as terminal:
            await terminal.expect("or type a URL")
            terminal.type(model.base_url + "\n")
            await terminal.expect("Choose 1-1")
            terminal.type("\n")
            code = await terminal.finish()
        out = terminal.seen.decode(errors="replace")
        assert code == 0, out
        assert "✓ the model calls tools and answers their results" in out
        config = home / ".config" / "acp-server" / "config.toml"
        assert tomllib.loads(config.read_text()) == {"base-url": model.base_url, "model": "coder"}

        # 4. The same agent, no flags: a prompt answered after a tool ran.
        model.enqueue(
            ToolCalls((ScriptedCall("read_file", {"path": "notes.txt"}),)), Answer(text="it says the way works")
        )
        async with spawn_agent(command=command, env=env, cwd=str(project)) as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=60)
            session_id = await agent.new_session(str(project))
            reply, seen = await agent.until_response(
                await agent.request_nowait(
                    "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "read notes"}]}
                ),
                timeout=60,
            )
        assert reply["result"]["stopReason"] == "end_turn", (reply, agent.stderr[-2000:])
        updates = [m["params"]["update"] for m in seen if m.get("method") == "session/update"]
        finished = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
        assert finished, updates
        tool_result = model.requests[-1].body["messages"][-1]
        assert tool_result["role"] == "tool" and "the registry's way works" in str(tool_result["content"])
        assert model.requests[-1].body["model"] == "coder"
