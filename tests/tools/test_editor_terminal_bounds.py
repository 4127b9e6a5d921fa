"""run_command through an editor that does not answer: every ``terminal/*`` request is bounded, so the call ends
``failed`` within its ``timeout_ms`` plus a small grace (kill 2 s, output 3 s, release 2 s), whichever request is
the one left unanswered. Virtual time (trio's MockClock): the bounds are measured exactly, nothing waits for real."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from acp_server.tools import TerminalExit, TerminalOutput, ToolResult

from ._support import FakeClient, call

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


class Unanswered(FakeClient):
    """An editor with a terminal that leaves the requests named in ``silent`` unanswered for ever."""

    def __init__(self, *silent: str) -> None:
        super().__init__(terminal=True, exit=None)
        self.silent = set(silent)

    async def _maybe_silent(self, name: str) -> None:
        if name in self.silent:
            await anyio.sleep_forever()

    async def create_terminal(self, command: str, cwd: str, output_byte_limit: int) -> str:
        self._record("create_terminal", command, cwd, output_byte_limit)
        await self._maybe_silent("create_terminal")
        return "term-1"

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit:
        self._record("wait_for_terminal_exit", terminal_id)
        await self._maybe_silent("wait_for_terminal_exit")
        return TerminalExit(0, None)

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        self._record("terminal_output", terminal_id)
        await self._maybe_silent("terminal_output")
        return TerminalOutput("out\n", False, TerminalExit(0, None))

    async def kill_terminal(self, terminal_id: str) -> None:
        self._record("kill_terminal", terminal_id)
        await self._maybe_silent("kill_terminal")

    async def release_terminal(self, terminal_id: str) -> None:
        self._record("release_terminal", terminal_id)
        await self._maybe_silent("release_terminal")


GUARD_S = 600  # virtual: a regression fails here instead of hanging


async def timed(tmp_path: Path, client: Unanswered, timeout_ms: int = 2000) -> tuple[float, ToolResult]:
    start = anyio.current_time()
    with anyio.fail_after(GUARD_S):
        result = await call(tmp_path, "run_command", client, command="make test", timeout_ms=timeout_ms)
    return anyio.current_time() - start, result


async def test_an_unanswered_terminal_create_fails_the_call_at_the_commands_timeout(tmp_path: Path) -> None:
    client = Unanswered("create_terminal")
    elapsed, result = await timed(tmp_path, client)
    assert elapsed == pytest.approx(2.0)
    assert result.failed
    assert result.output == (
        "Error: the editor did not answer terminal/create within the command's timeout (2000 ms); the command may "
        "not have run"
    )
    assert client.names == ["create_terminal"]  # no terminal id: nothing to kill or release


async def test_an_editor_that_answers_nothing_after_create_costs_the_timeout_plus_seven_seconds(
    tmp_path: Path,
) -> None:
    client = Unanswered("wait_for_terminal_exit", "kill_terminal", "terminal_output", "release_terminal")
    elapsed, result = await timed(tmp_path, client)
    assert elapsed == pytest.approx(2.0 + 2.0 + 3.0 + 2.0)
    assert result.failed
    assert result.output == (
        "Timed out after 2000 ms: the command was killed\n[the editor did not send the output within 3 s]"
    )
    assert client.names == [
        "create_terminal",
        "wait_for_terminal_exit",
        "kill_terminal",
        "terminal_output",
        "release_terminal",  # best effort, even though nothing was answered
    ]


async def test_a_create_answered_just_in_time_leaves_the_wait_the_rest_of_the_timeout(tmp_path: Path) -> None:
    class SlowCreate(Unanswered):
        async def create_terminal(self, command: str, cwd: str, output_byte_limit: int) -> str:
            self._record("create_terminal", command, cwd, output_byte_limit)
            await anyio.sleep(1.5)
            return "term-1"

    client = SlowCreate("wait_for_terminal_exit")
    elapsed, result = await timed(tmp_path, client)
    # create and wait share the 2 s: the wait is cut at 2 s from the start, then kill, output, release answer.
    assert elapsed == pytest.approx(2.0)
    assert result.failed and result.output.startswith("Timed out after 2000 ms")
