"""The tools stay bounded on adversarial input: no pattern stalls the event loop or runs unbounded, no argument
makes memory blow up before the permission, no string that is not valid Unicode crashes a call, no editor read
or terminal waits without a bound.

Each dangerous input is sized so that, should the protection regress, the test still ends (and fails): the regressed
code runs to completion and the result or the order of events shows it, or it would run for hours and is cut by a
generous ``anyio.fail_after``. No assertion measures how fast this machine is.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
import regex

import acp_server.tools._command as command_module
import acp_server.tools._files as files_module
import acp_server.tools._search as search_module
import acp_server.tools._textfile as textfile_module
import acp_server.tools.builtin.list_directory as list_module
from acp_server.domain import ToolContent
from acp_server.tools import TOOL_NAMES, PreparedCall, TerminalOutput, ToolCallError, prepare_call
from acp_server.tools._globs import Glob
from acp_server.tools._regex_size import unrolled_size

from ._support import FakeClient, call, prepare

pytestmark = pytest.mark.anyio

# exponential for every backtracking engine, ``re`` and ``regex`` alike: ~1 s on 23 "a" and a "b"
CATASTROPHIC = "(a|a)+$"
CATASTROPHIC_LINE = "a" * 23 + "b\n"


async def _noop(content: tuple[ToolContent, ...]) -> None:
    pass


async def prepare_raw(cwd: Path | str, name: str, arguments: str) -> PreparedCall:
    return await prepare_call(name, arguments, cwd=str(cwd), client=None, offered=TOOL_NAMES)


class WatchedPattern:
    """A compiled pattern whose ``search`` says (in the thread it runs in) when it starts and when it returns."""

    def __init__(self, pattern: Any, started: threading.Event, ended: threading.Event) -> None:
        self._pattern, self._started, self._ended = pattern, started, ended

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self._started.set()
        try:
            return self._pattern.search(*args, **kwargs)
        finally:
            self._ended.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)


# --- grep: a slow regular expression ------------------------------------------------------------------------


async def test_a_catastrophic_grep_neither_stalls_the_loop_nor_delays_the_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the abandoned thread ends soon after the test (raising=False: the test also runs, and fails, without the budget)
    monkeypatch.setattr(search_module, "GREP_TIME_BUDGET_S", 1.0, raising=False)
    (tmp_path / "x.txt").write_text(CATASTROPHIC_LINE)
    matching, matched = threading.Event(), threading.Event()
    compile_ = regex.compile
    monkeypatch.setattr(regex, "compile", lambda *a, **k: WatchedPattern(compile_(*a, **k), matching, matched))
    prepared = await prepare(tmp_path, "grep", pattern=CATASTROPHIC)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(prepared.run, _noop)
        await anyio.to_thread.run_sync(matching.wait)
        for _ in range(50):  # the loop turns while the pattern matches (``re`` holds the GIL: it stood still ~1 s)
            await anyio.sleep(0.001)
        tasks.cancel_scope.cancel()  # and the cancel does not wait for the match
    assert not matched.is_set()  # event order, not a stopwatch: all of the above happened while it was matching


async def test_a_grep_over_its_time_budget_returns_what_it_found_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "GREP_TIME_BUDGET_S", 0.1, raising=False)
    (tmp_path / "1.txt").write_text("aa\n")
    (tmp_path / "2.txt").write_text(CATASTROPHIC_LINE)
    (tmp_path / "3.txt").write_text("aaa\n")  # never reached: the budget is spent
    with anyio.fail_after(2):
        result = await call(tmp_path, "grep", pattern=CATASTROPHIC)
    assert not result.failed
    assert result.output == (
        "1.txt:1:aa\n"
        "[grep stopped after 0.1 s of matching, in 2.txt: the regular expression is too slow there (it backtracks: "
        "nested repetition like (a+)+, or several .* on long lines); the matches above are incomplete: simplify "
        "the pattern, or narrow path or include]"
    )
    assert result.raw_output == {"matches": 1, "files": 1, "truncated": True, "timedOut": True}


async def test_grep_matches_a_very_long_line_in_its_first_64_kib_only(tmp_path: Path) -> None:
    (tmp_path / "bundle.min.js").write_text("x" * (64 * 1024) + "needle\nneedle on line 2\n")
    result = await call(tmp_path, "grep", pattern="needle")
    assert result.output == (
        "bundle.min.js:2:needle on line 2\n[1 line longer than 64 KiB was searched in the first 64 KiB only]"
    )


async def test_grep_refuses_a_pattern_that_would_be_slow_to_compile(tmp_path: Path) -> None:
    with anyio.fail_after(2), pytest.raises(ToolCallError) as caught:  # ``regex`` takes ~0.4 s on this one
        await prepare(tmp_path, "grep", pattern="(?:a{1000}){1000}")
    assert str(caught.value) == (
        "pattern repeats too much: its counted repetitions ({n}) make it about 1002000 items once compiled, "
        "more than 100000; use smaller counts, or + and * instead"
    )
    with pytest.raises(ToolCallError, match=r"^pattern is 8193 characters long, more than 8192"):
        await prepare(tmp_path, "grep", pattern="x" * 8193)
    await prepare(tmp_path, "grep", pattern=r"\d{1,3}(\.\d{1,3}){3}")  # ordinary counts are fine


@pytest.mark.parametrize(
    ("pattern", "size"),
    [
        ("abc", 3),
        ("a{5}", 5),
        ("(?:ab){3}", 12),  # the group's 4 items (flags counted), 3 times
        ("(?:a{10}){10}", 120),
        ("a{0,1000}", 1),  # what may repeat costs nothing: only the minimum is unrolled
        (r"\p{L}{3}", 3),
        ("[a{9}]{2}", 2),  # braces inside a class are characters
        ("x{99999999999999999999}", 10**12),
    ],
)
def test_unrolled_size(pattern: str, size: int) -> None:
    assert unrolled_size(pattern) == size


# --- glob and .gitignore patterns ---------------------------------------------------------------------------

# a backtracking regex for this glob takes ~1 s on a 110-character name (5 s at 150, 21 s at 200): on these names
# (and 5000 characters below) hours, so a regression fails at the guard's deadline, not by a stopwatch's margin
BACKTRACKING_GLOB = "*a*a*a*a*ab"
LONG_NAME = "a" * 250
HANG_GUARD_S = 30


def test_glob_matching_does_not_backtrack() -> None:
    assert not Glob(BACKTRACKING_GLOB).match(LONG_NAME)
    assert not Glob(BACKTRACKING_GLOB).match("a" * 5000)
    assert not Glob("**/a/" * 6 + "x").match("/".join(["a"] * 60))  # several "**": ~1 s for a backtracking regex
    assert not Glob("**/a/" * 50 + "x").match("/".join(["a"] * 400))  # (hours)
    assert Glob(BACKTRACKING_GLOB).match("a" * 5000 + "b")


async def test_a_backtracking_glob_is_quick(tmp_path: Path) -> None:
    (tmp_path / LONG_NAME).write_text("")
    (tmp_path / (LONG_NAME + "b")).write_text("")
    with anyio.fail_after(HANG_GUARD_S):
        result = await call(tmp_path, "glob", pattern=BACKTRACKING_GLOB)
    assert result.output == LONG_NAME + "b"


async def test_a_backtracking_gitignore_rule_does_not_freeze_list_directory(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(BACKTRACKING_GLOB + "\n")
    (tmp_path / LONG_NAME).write_text("")
    (tmp_path / (LONG_NAME + "b")).write_text("")
    with anyio.fail_after(HANG_GUARD_S):
        result = await call(tmp_path, "list_directory", path=".")
    assert result.output == f".gitignore\n{LONG_NAME}\n[1 entry hidden by .gitignore]"


# --- list_directory off the event loop ----------------------------------------------------------------------


async def test_list_directory_runs_in_a_worker_thread_and_is_cancelled_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    listed_in: list[threading.Thread] = []
    real = list_module.sorted_entries

    def slow_sorted_entries(directory: str) -> Any:
        listed_in.append(threading.current_thread())
        entered.set()
        release.wait(1)  # a huge directory; on the event loop this stalls everything for the whole second
        return real(directory)

    monkeypatch.setattr(list_module, "sorted_entries", slow_sorted_entries)
    (tmp_path / "a.txt").write_text("")
    prepared = await prepare(tmp_path, "list_directory", path=".")
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(prepared.run, _noop)
            await anyio.to_thread.run_sync(entered.wait, 1)
            assert listed_in[0] is not threading.main_thread()
            tasks.cancel_scope.cancel()  # returns while the listing is still stuck in its thread
        assert not release.is_set()
    finally:
        release.set()


# --- edit_file and write_file: the size of the result -------------------------------------------------------


async def test_edit_file_refuses_a_result_over_the_cap_before_building_it(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("e" * 2000 + "\n")
    with pytest.raises(ToolCallError) as caught:
        await prepare(tmp_path, "edit_file", path="f.txt", old_text="e", new_text="X" * 6000, replace_all=True)
    assert str(caught.value) == (
        "replacing 2000 occurrences of old_text by new_text would make f.txt 11.4 MiB (12000001 bytes); files "
        "over 10 MiB (10485760 bytes) are not written"
    )
    assert (tmp_path / "f.txt").read_text() == "e" * 2000 + "\n"


async def test_write_file_refuses_content_over_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textfile_module, "MAX_TEXT_FILE_BYTES", 1024)  # arguments are at most 1 MiB
    with pytest.raises(ToolCallError) as caught:
        await prepare(tmp_path, "write_file", path="big.txt", content="é" * 600)
    assert str(caught.value) == (
        "content would make big.txt 0.0 MiB (1200 bytes); files over 0 MiB (1024 bytes) are not written"
    )
    assert not (tmp_path / "big.txt").exists()


# --- strings that are not valid Unicode ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "parameter"),
    [
        ("read_file", '{"path": "a\\ud800b"}', "path"),
        ("list_directory", '{"path": "\\udfff"}', "path"),
        ("write_file", '{"path": "x\\ud800", "content": "hi"}', "path"),
        ("glob", '{"pattern": "\\ud800/*"}', "pattern"),
        ("grep", '{"pattern": "x", "include": "*\\ud800"}', "include"),
        ("grep", '{"pattern": "x", "path": "\\ud800"}', "path"),
        ("run_command", '{"command": "echo \\ud800"}', "command"),
    ],
)
async def test_a_lone_surrogate_is_a_tool_call_error(tmp_path: Path, tool: str, arguments: str, parameter: str) -> None:
    with pytest.raises(ToolCallError) as caught:
        await prepare_raw(tmp_path, tool, arguments)
    assert str(caught.value).startswith(f"{parameter} contains text that is not valid Unicode (a lone surrogate, ")


def test_the_workspace_refuses_a_lone_surrogate_itself(tmp_path: Path) -> None:
    from acp_server.tools import Workspace

    with pytest.raises(ToolCallError, match=r"^path contains text that is not valid Unicode \(a lone surrogate, "):
        Workspace(str(tmp_path)).resolve("a\ud800b")


# --- reads through the editor -------------------------------------------------------------------------------


async def test_a_file_over_the_cap_on_disk_is_refused_before_the_editor_is_asked(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_bytes(b"log line\n" * (10 * 1024 * 1024 // 9 + 1))
    client = FakeClient(read=True)
    result = await call(tmp_path, "read_file", client, path="big.log")
    assert result.failed and result.output.startswith("Error: big.log is 10.0 MiB; files over 10 MiB are not read")
    with pytest.raises(ToolCallError, match=r"^big\.log is 10\.0 MiB; files over 10 MiB are not read"):
        await prepare(tmp_path, "edit_file", client, path="big.log", old_text="log", new_text="LOG")
    assert client.calls == []


async def test_an_editor_buffer_over_the_cap_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("small on disk\n")
    client = FakeClient(read=True)
    client.buffers[str(tmp_path / "a.txt")] = "x" * (10 * 1024 * 1024 + 1)
    with pytest.raises(ToolCallError, match=r"^a\.txt is 10\.0 MiB; files over 10 MiB are not read"):
        await prepare(tmp_path, "edit_file", client, path="a.txt", old_text="x", new_text="y")


async def test_read_file_never_asks_the_editor_for_more_lines_than_can_be_shown(tmp_path: Path) -> None:
    lines = files_module.MAX_CLIENT_READ_LINES
    (tmp_path / "many.txt").write_text("".join(f"{n}\n" for n in range(lines + 10)))
    client = FakeClient(read=True)
    result = await call(tmp_path, "read_file", client, path="many.txt", limit=lines + 5)
    assert client.calls[0][1][1:] == (None, lines)
    assert "continue with offset=" in result.output


# --- the editor's terminal after a timeout ------------------------------------------------------------------


class SilentTerminalClient(FakeClient):
    """A terminal that never exits, and an editor that answers neither the kill nor the output request."""

    async def kill_terminal(self, terminal_id: str) -> None:
        self._record("kill_terminal", terminal_id)
        await anyio.sleep_forever()

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        self._record("terminal_output", terminal_id)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.mark.virtual_time
async def test_after_a_timeout_the_terminals_kill_and_output_are_bounded(tmp_path: Path) -> None:
    client = SilentTerminalClient(terminal=True, exit=None)
    started = anyio.current_time()
    result = await call(tmp_path, "run_command", client, command="sleep 100", timeout_ms=50)
    # virtual time: the timeout, then the kill and the output waited out to their bounds (the release is answered)
    assert anyio.current_time() - started == pytest.approx(0.05 + command_module._KILL_S + command_module._OUTPUT_S)
    assert client.names == [
        "create_terminal",
        "wait_for_terminal_exit",
        "kill_terminal",
        "terminal_output",
        "release_terminal",
    ]
    assert result.failed
    assert result.output == (
        "Timed out after 50 ms: the command was killed\n[the editor did not send the output within 3 s]"
    )
