"""``acp-server serve`` as a process: which modes it offers (``--token``, ``--allow-bypass-permissions``), and a
permission round trip over HTTP against it."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import sandbox_support

from ._support import EventReader
from .test_process import clean_env, serve

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOKEN = "process-token-0123456789"
SANDBOX = ["sandbox"] if sandbox_support().mechanism else []
"""The sandbox mode is offered with a token where the sandbox works here."""


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--default-mode", "default"], {}, "--default-mode default needs --token"),
        ([], {"ACP_SERVER_DEFAULT_MODE": "accept-edits"}, "--default-mode accept-edits needs --token"),
        (["--allow-bypass-permissions"], {}, "--allow-bypass-permissions needs --token"),
    ],
)
async def test_a_tokenless_serve_refuses_to_offer_more_than_read_only(
    args: list[str], env: dict[str, str], message: str
) -> None:
    async with serve("--offline", "--port", "0", "--no-persist", *args, env=clean_env(**env)) as served:
        with anyio.fail_after(15):
            code = await served.process.wait()
        stderr = await served.drain_stderr()
    assert code == 2
    assert message in stderr and "offers only the read-only mode" in stderr


async def modes_of(url: str, token: str | None = None) -> tuple[str, list[str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
        modes = (await client.get("/capabilities")).json()["modes"]
    return modes["defaultModeId"], [mode["id"] for mode in modes["availableModes"]]


async def test_the_modes_follow_the_token_and_the_bypass_flag() -> None:
    async with serve("--offline", "--port", "0", "--no-persist", "--default-mode", "read-only") as served:
        assert await modes_of(await served.read_url()) == ("read-only", ["read-only"])
    env = clean_env(ACP_SERVER_TOKEN=TOKEN)
    async with serve("--offline", "--port", "0", "--no-persist", env=env) as served:
        expected = ["default", "accept-edits", "read-only", *SANDBOX]
        assert await modes_of(await served.read_url(), TOKEN) == ("default", expected)
    async with serve("--offline", "--port", "0", "--no-persist", "--no-sandbox", env=env) as served:
        assert await modes_of(await served.read_url(), TOKEN) == ("default", ["default", "accept-edits", "read-only"])
    async with serve("--offline", "--port", "0", "--no-persist", "--allow-bypass-permissions", env=env) as served:
        default, modes = await modes_of(await served.read_url(), TOKEN)
        assert (default, modes[-1]) == ("default", "bypass-permissions")


async def test_a_permission_round_trip_against_the_process(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "NOTES.md", "content": "hello\n"}, id="w1"),)),
            Answer(text="written"),
        )
        env = clean_env(ACP_SERVER_TOKEN=TOKEN)
        args = ("--base-url", model.base_url, "--model", "m", "--port", "0", "--no-persist")
        async with serve(*args, env=env) as served:
            url = await served.read_url()
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
                created = await client.post("/session", json={"cwd": str(tmp_path)})
                assert created.json()["modeId"] == "default"
                session_id = created.json()["sessionId"]
                async with client.stream("GET", f"/session/{session_id}/events") as stream:
                    events = EventReader(stream)
                    body = {"prompt": [{"type": "text", "text": "write NOTES.md"}]}
                    assert (await client.post(f"/session/{session_id}/prompt", json=body)).status_code == 202
                    request = (await events.until(lambda e: e.event == "permission_request", 10))[-1].data
                    assert not (tmp_path / "NOTES.md").exists()
                    path = f"/session/{session_id}/permission/{request['requestId']}"
                    assert (await client.post(path, json={"optionId": "allow_once"})).status_code == 204
                    done = await events.until(lambda e: e.event == "turn_complete", 10)
            assert done[-1].data["stopReason"] == "end_turn"
            assert (tmp_path / "NOTES.md").read_text() == "hello\n"
            served.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):
                assert await served.process.wait() == 0
        assert request["toolCall"]["kind"] == "edit"


@asynccontextmanager
async def rest_client(*args: str) -> AsyncIterator[httpx2.AsyncClient]:
    """A client of a ``serve`` process started with ``args`` and the token; the process ends with it."""
    async with serve(*args, env=clean_env(ACP_SERVER_TOKEN=TOKEN)) as served:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(base_url=await served.read_url(), headers=headers, timeout=10) as client:
            yield client


async def test_a_new_sessions_mode_survives_a_restart_with_another_default(tmp_path: Path) -> None:
    state = ("--offline", "--port", "0", "--state-dir", str(tmp_path / "state"))
    async with rest_client(*state) as client:  # default "default"
        created = (await client.post("/session", json={"cwd": str(tmp_path)})).json()  # no modeId
    assert created["modeId"] == "default"
    session_id = created["sessionId"]
    async with rest_client(*state, "--default-mode", "bypass-permissions", "--allow-bypass-permissions") as client:
        resumed = await client.post(f"/session/{session_id}/resume", json={})
        fresh = (await client.post("/session", json={"cwd": str(tmp_path)})).json()
    assert resumed.json()["modeId"] == "default"
    assert fresh["modeId"] == "bypass-permissions"  # that daemon's default, for a session it creates


@pytest.mark.skipif(not SANDBOX, reason="the sandbox does not work here (bubblewrap or Landlock)")
async def test_the_daemon_runs_a_command_in_the_sandbox_unasked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    command = f"echo in > in.txt; echo out > {tmp_path}/out.txt"
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("run_command", {"command": command}, id="r1"),)), Answer(text="ran"))
        args = (
            "--base-url",
            model.base_url,
            "--model",
            "m",
            "--port",
            "0",
            "--no-persist",
            "--default-mode",
            "sandbox",
        )
        async with rest_client(*args) as client:
            created = await client.post("/session", json={"cwd": str(project)})
            assert created.json()["modeId"] == "sandbox"
            session_id = created.json()["sessionId"]
            async with client.stream("GET", f"/session/{session_id}/events") as stream:
                events = EventReader(stream)
                body = {"prompt": [{"type": "text", "text": "run it"}]}
                assert (await client.post(f"/session/{session_id}/prompt", json=body)).status_code == 202
                seen = await events.until(lambda e: e.event == "turn_complete", 20)
    assert not [e for e in seen if e.event == "permission_request"]  # nothing asked
    assert (project / "in.txt").read_text() == "in\n"
    assert not (tmp_path / "out.txt").exists()
