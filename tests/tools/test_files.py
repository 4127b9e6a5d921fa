"""The file tools on real files: read_file (numbered lines, ranges, caps, binary refusal), list_directory,
write_file (atomic, mode kept) and edit_file (the exactly-once rule, the diff preview, the re-check at run time)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from acp_server.domain import DiffContent, TextContent, ToolLocation
from acp_server.tools import OUTPUT_LIMIT_BYTES, TOOL_NAMES, PreparedCall, ToolCallError, prepare_call

from ._support import call, prepare

pytestmark = pytest.mark.anyio


def numbered(*lines: tuple[int, str]) -> str:
    return "".join(f"{number:6}\t{text}\n" for number, text in lines)


# --- read_file ----------------------------------------------------------------------------------------------


async def test_read_file_numbers_lines_and_announces_the_file(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import os\nprint('hi')\n")
    prepared = await prepare(tmp_path, "read_file", path="app.py")
    assert (prepared.title, prepared.kind, prepared.needs_permission) == ("Read app.py", "read", False)
    assert prepared.locations == (ToolLocation(str(tmp_path / "app.py"), None),)
    assert prepared.preview == ()
    result = await prepared.run(_noop)
    assert result.output == numbered((1, "import os"), (2, "print('hi')"))
    assert not result.failed
    assert result.content == (TextContent("2 lines"),)
    assert result.raw_output == {"startLine": 1, "lines": 2, "totalLines": 2, "truncated": False}


async def _noop(content: object) -> None:
    pass


async def test_read_file_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 51)))
    prepared = await prepare(tmp_path, "read_file", path="f.txt", offset=10, limit=21)
    assert prepared.title == "Read f.txt (lines 10–30)"
    absurd = await prepare(tmp_path, "read_file", path="f.txt", limit=1_000_000_000_000_000)
    assert absurd.title == "Read f.txt"  # as the call reads it: to the output cap, not to line 10^15
    assert (
        await prepare(tmp_path, "read_file", path="f.txt", offset=5, limit=10**15)
    ).title == "Read f.txt (from line 5)"
    assert prepared.locations[0].line == 10
    result = await prepared.run(_noop)
    assert result.output.startswith(numbered((10, "line 10")))
    assert numbered((30, "line 30")) in result.output and "line 31" not in result.output
    assert result.output.endswith("[lines 10–30 of 50; continue with offset=31]")
    assert (await prepare(tmp_path, "read_file", path="f.txt", offset=45)).title == "Read f.txt (from line 45)"
    tail = await call(tmp_path, "read_file", path="f.txt", offset=45)
    assert tail.output.endswith(numbered((50, "line 50")) + "[lines 45–50 of 50]")
    past = await call(tmp_path, "read_file", path="f.txt", offset=99)
    assert past.output == "(offset 99 is past the end of f.txt, which has 50 lines)" and not past.failed


async def test_read_file_of_an_empty_file_and_one_without_final_newline(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    (tmp_path / "crlf").write_bytes(b"a\r\nb")
    assert (await call(tmp_path, "read_file", path="empty")).output == "(the file is empty)"
    assert (await call(tmp_path, "read_file", path="crlf")).output == numbered((1, "a"), (2, "b"))


async def test_a_1_mb_file_is_truncated_with_a_note_on_how_to_read_on(tmp_path: Path) -> None:
    line = "é ünïcode text to make the line longer"
    (tmp_path / "big.txt").write_text("".join(f"{n:07} {line}\n" for n in range(20_000)))
    result = await call(tmp_path, "read_file", path="big.txt")
    assert len(result.output.encode()) <= OUTPUT_LIMIT_BYTES
    last = result.raw_output["lines"]  # type: ignore[index]
    assert 1000 < last < 20_000
    assert result.output.endswith(
        f"[output capped at 64 KiB: lines 1–{last} of 20000 shown; continue with offset={last + 1}]"
    )
    assert result.raw_output["truncated"] is True  # type: ignore[index]
    following = await call(tmp_path, "read_file", path="big.txt", offset=last + 1, limit=2)
    assert following.output.startswith(f"{last + 1:6}\t{last:07} é")


async def test_a_line_longer_than_the_cap_is_cut_on_a_character_boundary(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("é" * 100_000 + "\nsecond\n")
    result = await call(tmp_path, "read_file", path="min.js")
    assert len(result.output.encode()) <= OUTPUT_LIMIT_BYTES
    assert result.output.startswith("     1\té")
    assert "\ufffd" not in result.output
    assert result.output.endswith("[line 1 is longer than the 64 KiB output cap and was cut; continue with offset=2]")


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"PNG\x00\x01\x02", "it contains NUL bytes"), ("café".encode("latin-1"), "it is not UTF-8 text")],
)
async def test_binary_files_are_refused_for_read_and_edit(tmp_path: Path, data: bytes, why: str) -> None:
    (tmp_path / "img.bin").write_bytes(data)
    read = await call(tmp_path, "read_file", path="img.bin")
    assert read.failed
    message = f"binary file img.bin not shown ({why}); only text files can be read or edited"
    assert (read.output, read.content) == (f"Error: {message}", (TextContent(message),))
    with pytest.raises(ToolCallError, match=r"binary file img\.bin not shown"):
        await prepare(tmp_path, "edit_file", path="img.bin", old_text="caf", new_text="x")


async def test_a_file_over_10_mib_is_not_read(tmp_path: Path) -> None:
    with (tmp_path / "huge.log").open("wb") as file:
        file.truncate(10 * 1024 * 1024 + 1)
    result = await call(tmp_path, "read_file", path="huge.log")
    assert result.failed
    assert result.output.startswith("Error: huge.log is 10.0 MiB; files over 10 MiB are not read")


async def test_a_file_that_vanished_before_the_run_fails_the_call(tmp_path: Path) -> None:
    (tmp_path / "gone.txt").write_text("x\n")
    prepared = await prepare(tmp_path, "read_file", path="gone.txt")
    (tmp_path / "gone.txt").unlink()
    result = await prepared.run(_noop)
    assert result.failed and result.output == "Error: gone.txt does not exist (any more)"


# --- list_directory -----------------------------------------------------------------------------------------


async def test_list_directory_sorts_marks_directories_and_links(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "b.txt").write_text("")
    (tmp_path / "a.txt").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / "link").symlink_to("a.txt")
    prepared = await prepare(tmp_path, "list_directory", path=".")
    assert (prepared.title, prepared.kind, prepared.locations) == ("List .", "read", (ToolLocation(str(tmp_path)),))
    result = await prepared.run(_noop)
    assert result.output == "a.txt\nb.txt\nlink -> a.txt\nsrc/"
    assert result.raw_output == {"entries": 4, "hidden": 0}
    assert (await call(tmp_path, "list_directory", path="src")).output == "(src is empty)"


async def test_list_directory_caps_its_entries(tmp_path: Path) -> None:
    for n in range(1005):
        (tmp_path / f"f{n:04}").touch()
    result = await call(tmp_path, "list_directory", path=".")
    assert result.output.count("\n") == 1000
    assert result.output.endswith("[1000 of 1005 entries shown; use glob to find specific ones]")


# --- write_file ---------------------------------------------------------------------------------------------


async def test_write_file_creates_parents_and_previews_a_new_file(tmp_path: Path) -> None:
    prepared = await prepare(tmp_path, "write_file", path="pkg/sub/new.py", content="a = 1\nb = 2\n")
    target = str(tmp_path / "pkg" / "sub" / "new.py")
    assert (prepared.title, prepared.kind, prepared.needs_permission) == ("Write pkg/sub/new.py", "edit", True)
    assert prepared.preview == (DiffContent(target, None, "a = 1\nb = 2\n"),)
    assert not (tmp_path / "pkg").exists()  # nothing is written before run
    result = await prepared.run(_noop)
    assert result.output == "Created pkg/sub/new.py (2 lines)"
    assert result.content == prepared.preview
    assert result.raw_output == {"path": target, "created": True, "lines": 2}
    assert (tmp_path / "pkg" / "sub" / "new.py").read_text() == "a = 1\nb = 2\n"


async def test_write_file_is_atomic_and_keeps_the_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("old\n")
    script.chmod(0o751)
    inode = script.stat().st_ino
    prepared = await prepare(tmp_path, "write_file", path="run.sh", content="new\n")
    assert prepared.preview == (DiffContent(str(script), "old\n", "new\n"),)
    result = await prepared.run(_noop)
    assert result.output == "Wrote run.sh (1 line)"
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert script.stat().st_ino != inode  # replaced in one step, not rewritten in place
    assert sorted(os.listdir(tmp_path)) == ["run.sh"]  # no temporary file left


async def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        await call(tmp_path, "write_file", path="n.txt", content="x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "n.txt").stat().st_mode) == 0o640


async def test_write_file_through_an_inside_symlink_writes_its_target(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "alias.txt").symlink_to("real.txt")
    await call(tmp_path, "write_file", path="alias.txt", content="new")
    assert (tmp_path / "alias.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"


async def test_write_file_fails_when_the_file_changed_after_the_preview(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("v1")
    prepared = await prepare(tmp_path, "write_file", path="a.txt", content="mine")
    (tmp_path / "a.txt").write_text("v2 by someone else")
    result = await prepared.run(_noop)
    assert result.failed
    assert result.output.startswith("Error: a.txt changed after this change was proposed, so it was not applied")
    assert (tmp_path / "a.txt").read_text() == "v2 by someone else"


async def test_write_file_refuses_lone_surrogates(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError) as caught:  # before the diff is shown: it could not be sent as valid JSON
        await prepare_raw(tmp_path, "write_file", '{"path": "s.txt", "content": "a\\ud800b"}')
    assert str(caught.value) == (
        "content contains text that is not valid Unicode (a lone surrogate, \\ud800, at character 1); "
        "send plain UTF-8 text"
    )
    assert not (tmp_path / "s.txt").exists()


async def prepare_raw(cwd: Path, name: str, arguments: str) -> PreparedCall:
    return await prepare_call(name, arguments, cwd=str(cwd), client=None, offered=TOOL_NAMES)


async def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("old")
    prepared = await prepare(tmp_path, "write_file", path="a.txt", content="new")

    def cross_device(source: str, destination: str, **dir_fds: int) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", cross_device)
    result = await prepared.run(_noop)
    monkeypatch.undo()
    assert result.failed and result.output == "Error: cannot write a.txt: Invalid cross-device link"
    assert os.listdir(tmp_path) == ["a.txt"] and (tmp_path / "a.txt").read_text() == "old"


# --- edit_file ----------------------------------------------------------------------------------------------


async def test_edit_file_replaces_exactly_one_occurrence(tmp_path: Path) -> None:
    source = tmp_path / "app.py"
    source.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    prepared = await prepare(tmp_path, "edit_file", path="app.py", old_text="return 2", new_text="return 3")
    assert (prepared.title, prepared.kind, prepared.needs_permission) == ("Edit app.py", "edit", True)
    assert prepared.locations == (ToolLocation(str(source), 5),)
    new = "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert prepared.preview == (DiffContent(str(source), source.read_text(), new),)
    assert "return 2" in source.read_text()  # not before run
    result = await prepared.run(_noop)
    assert result.output == "Edited app.py: replaced 1 occurrence (from line 5)"
    assert source.read_text() == new
    assert result.raw_output == {"path": str(source), "replacements": 1, "line": 5}


async def test_edit_file_refuses_ambiguous_missing_empty_and_no_op_edits(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\nx = 1\nx = 1\n")

    async def refused(**arguments: Any) -> str:
        with pytest.raises(ToolCallError) as caught:
            await prepare(tmp_path, "edit_file", path="app.py", **arguments)
        return str(caught.value)

    assert await refused(old_text="x = 1", new_text="x = 2") == (
        "old_text occurs 3 times in app.py; give more context to make it unique, or set replace_all"
    )
    assert (await refused(old_text="y = 1", new_text="y = 2")).startswith("old_text was not found in app.py; read")
    assert "leave them (and the tab) out" in await refused(old_text="     1\tx = 1", new_text="x = 2")
    assert (await refused(old_text="", new_text="x")).startswith("old_text is empty")
    assert await refused(old_text="x = 1", new_text="x = 1") == (
        "old_text and new_text are the same: the edit would change nothing"
    )
    assert (tmp_path / "app.py").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_file_replace_all(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\nx = 1\n")
    result = await call(tmp_path, "edit_file", path="app.py", old_text="x = 1", new_text="y", replace_all=True)
    assert result.output == "Edited app.py: replaced 2 occurrences (from line 1)"
    assert (tmp_path / "app.py").read_text() == "y\ny\n"


async def test_edit_file_keeps_crlf_line_ends(tmp_path: Path) -> None:
    (tmp_path / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(tmp_path, "edit_file", path="win.txt", old_text="one\ntwo", new_text="1\n2")
    assert (tmp_path / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_file_fails_when_the_file_changed_after_the_preview(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("a = 1\n")
    prepared = await prepare(tmp_path, "edit_file", path="app.py", old_text="a = 1", new_text="a = 2")
    (tmp_path / "app.py").write_text("a = 1\nb = 1\n")
    result = await prepared.run(_noop)
    assert result.failed and result.output.startswith("Error: app.py changed after this change was proposed")
    assert (tmp_path / "app.py").read_text() == "a = 1\nb = 1\n"


async def test_edit_file_keeps_the_mode(tmp_path: Path) -> None:
    (tmp_path / "tool").write_text("#!/bin/sh\necho a\n")
    (tmp_path / "tool").chmod(0o755)
    await call(tmp_path, "edit_file", path="tool", old_text="echo a", new_text="echo b")
    assert stat.S_IMODE((tmp_path / "tool").stat().st_mode) == 0o755
