"""The agent's event loop: uvloop where it is installed (a dependency on Linux and macOS), asyncio's own elsewhere."""

from __future__ import annotations

import sys

import anyio
import pytest

from acp_server.cli._main import event_loop_options

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
async def test_a_real_agent_process_runs_on_uvloop() -> None:
    pytest.importorskip("uvloop")
    async with spawn_agent("--offline") as agent:
        await agent.initialize()  # the loop runs: what the process maps now is what it serves on
        maps = await anyio.Path(f"/proc/{agent.process.pid}/maps").read_text()
    assert "/uvloop/loop." in maps  # uvloop's loop extension; nothing else in the agent imports uvloop


def test_without_uvloop_the_agent_runs_on_asyncio_s_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as where it is not installed: the import fails
    assert event_loop_options() == {}


def test_with_uvloop_anyio_is_asked_for_it() -> None:
    pytest.importorskip("uvloop")
    assert event_loop_options() == {"use_uvloop": True}
