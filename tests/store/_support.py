"""Tool steps for the store tests (every kind of tool content, locations with and without a line, raw outputs), and
copies of the databases older versions made (``data/``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from acp_server.domain import DiffContent, ModelStep, TerminalContent, TextContent, ToolCallRecord, ToolLocation

READ = ToolCallRecord(
    call_id="call_1",
    name="read_file",
    arguments='{"path": "src/app.py", "offset": 3}',
    output="1\tprint('café ☕')\n",
    status="completed",
    title="Read src/app.py",
    kind="read",
    locations=(ToolLocation("/w/src/app.py", 3),),
    content=(TextContent("print('café ☕')"),),
    raw_output={"lines": 1, "truncated": False},
)
EDIT = ToolCallRecord(
    call_id="call_2",
    name="edit_file",
    arguments='{"path": "a.txt", "old_text": "x", "new_text": "y"}',
    output="Edited /w/a.txt",
    status="completed",
    title="Edit a.txt",
    kind="edit",
    locations=(ToolLocation("/w/a.txt"), ToolLocation("/w/b.txt", 1)),
    content=(DiffContent("/w/a.txt", "x\n", "y\n"), DiffContent("/w/new.txt", None, "fresh\n")),
)
RUN = ToolCallRecord(
    call_id="call_3",
    name="run_command",
    arguments='{"command": "pytest -q"}',
    output="exit code 1\n1 failed",
    status="failed",
    title="Run pytest -q",
    kind="execute",
    content=(TerminalContent("term-7"), TextContent("exit code 1")),
    raw_output=["exit", 1],
)
DECLINED = ToolCallRecord(
    call_id="call_4",
    name="write_file",
    arguments="not json",
    output="The user declined this call.",
    status="failed",
    title="write_file",
    kind="other",
)

FIRST = ModelStep("Let me look.", "The file first.", (READ,))
SECOND = ModelStep("", "Fix it, then test.", (EDIT, RUN, DECLINED))


def copy_of(fixture: Path, tmp_path: Path) -> Path:
    """A copy of an old database file as a state directory would hold it (the fixture itself is never opened)."""
    path = tmp_path / "state" / "sessions.db"
    path.parent.mkdir(mode=0o700)
    shutil.copyfile(fixture, path)
    return path
