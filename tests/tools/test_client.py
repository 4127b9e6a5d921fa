"""The file tools through the client when it offers the capability (the editor's buffers, the editor's writes),
the disk when it does not, and the client's errors as failed calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.domain import DiffContent
from acp_server.errors import RemoteError
from acp_server.tools import ToolCallError
from acp_server.tools._files import MAX_CLIENT_READ_LINES

from ._support import FakeClient, call, prepare

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text("on disk 1\non disk 2\n")
    return tmp_path


async def test_read_file_reads_the_editors_buffer_when_it_can(project: Path) -> None:
    client = FakeClient(read=True)
    path = str(project / "app.py")
    client.buffers[path] = "unsaved 1\nunsaved 2\nunsaved 3\n"
    result = await call(project, "read_file", client, path="app.py")
    assert client.calls == [("read_text_file", (path, None, MAX_CLIENT_READ_LINES))]  # never more than can be shown
    assert result.output == "     1\tunsaved 1\n     2\tunsaved 2\n     3\tunsaved 3\n"
    assert result.raw_output == {"startLine": 1, "lines": 3, "totalLines": 3, "truncated": False}


async def test_read_file_passes_offset_and_limit_to_the_client(project: Path) -> None:
    client = FakeClient(read=True)
    path = str(project / "app.py")
    client.buffers[path] = "".join(f"b{n}\n" for n in range(1, 11))
    result = await call(project, "read_file", client, path="app.py", offset=3, limit=2)
    assert client.calls == [("read_text_file", (path, 3, 2))]
    assert result.output == "     3\tb3\n     4\tb4\n[lines 3–4; the file may go on: continue with offset=5]"
    assert result.raw_output["totalLines"] is None  # type: ignore[index]
    last = await call(project, "read_file", client, path="app.py", offset=9, limit=5)
    assert last.output.endswith("[lines 9–10 of 10]")  # fewer than asked: the end of the file


async def test_without_the_capability_the_disk_is_read(project: Path) -> None:
    client = FakeClient(read=False, write=True)
    result = await call(project, "read_file", client, path="app.py")
    assert result.output == "     1\ton disk 1\n     2\ton disk 2\n" and client.calls == []


async def test_a_client_with_the_permission_part_only_leaves_every_tool_local(project: Path) -> None:
    client = FakeClient()  # no reader, writer or terminal: the daemon's shape
    wrote = await call(project, "write_file", client, path="new.txt", content="fresh\n")
    edited = await call(project, "edit_file", client, path="app.py", old_text="on disk 1", new_text="edited 1")
    read = await call(project, "read_file", client, path="new.txt")
    ran = await call(project, "run_command", client, command="cat app.py")
    assert not any(result.failed for result in (wrote, edited, read, ran))
    assert (project / "new.txt").read_text() == "fresh\n" and read.output == "     1\tfresh\n"
    assert ran.output == "Exit code: 0\nedited 1\non disk 2\n"
    assert client.calls == []


async def test_a_binary_file_is_refused_before_the_client_is_asked(project: Path) -> None:
    (project / "logo.png").write_bytes(b"\x89PNG\x00\x00")
    client = FakeClient(read=True)
    result = await call(project, "read_file", client, path="logo.png")
    assert result.failed and result.output.startswith("Error: binary file logo.png not shown")
    assert client.calls == []


async def test_a_client_read_error_fails_the_call_with_its_message(project: Path) -> None:
    client = FakeClient(read=True)
    client.fail["read_text_file"] = RemoteError("Resource not found", code=-32002)
    result = await call(project, "read_file", client, path="app.py")
    assert result.failed and result.output == "Error: the editor could not read app.py: Resource not found"
    with pytest.raises(ToolCallError, match=r"the editor could not read app\.py: Resource not found"):
        await prepare(project, "edit_file", client, path="app.py", old_text="disk 1", new_text="x")


async def test_write_file_goes_through_the_client(project: Path) -> None:
    client = FakeClient(read=True, write=True)
    path = str(project / "app.py")
    client.buffers[path] = "buffer\n"
    prepared = await prepare(project, "write_file", client, path="app.py", content="new\n")
    assert prepared.preview == (DiffContent(path, "buffer\n", "new\n"),)  # the diff is against the buffer
    result = await prepared.run(_noop)
    assert not result.failed
    assert client.names == ["read_text_file", "read_text_file", "write_text_file"]  # preview, re-check, write
    assert client.written == {path: "new\n"}
    assert (project / "app.py").read_text() == "on disk 1\non disk 2\n"  # the editor writes, not us


async def _noop(content: object) -> None:
    pass


async def test_a_new_file_through_the_client_gets_its_directories(project: Path) -> None:
    client = FakeClient(read=True, write=True)
    result = await call(project, "write_file", client, path="pkg/mod.py", content="x = 1\n")
    assert client.calls == [("write_text_file", (str(project / "pkg" / "mod.py"), "x = 1\n"))]
    assert result.output == "Created pkg/mod.py (1 line)"
    assert (project / "pkg").is_dir()


async def test_edit_file_reads_and_writes_through_the_client(project: Path) -> None:
    client = FakeClient(read=True, write=True)
    path = str(project / "app.py")
    client.buffers[path] = "alpha\nbeta\n"
    prepared = await prepare(project, "edit_file", client, path="app.py", old_text="beta", new_text="gamma")
    assert prepared.preview == (DiffContent(path, "alpha\nbeta\n", "alpha\ngamma\n"),)
    result = await prepared.run(_noop)
    assert result.output == "Edited app.py: replaced 1 occurrence (from line 2)"
    assert client.written == {path: "alpha\ngamma\n"}


async def test_edit_file_fails_when_the_buffer_changed_after_the_preview(project: Path) -> None:
    client = FakeClient(read=True, write=True)
    path = str(project / "app.py")
    client.buffers[path] = "alpha\nbeta\n"
    prepared = await prepare(project, "edit_file", client, path="app.py", old_text="beta", new_text="gamma")
    client.buffers[path] = "alpha\nbeta\nedited meanwhile\n"
    result = await prepared.run(_noop)
    assert result.failed and "changed after this change was proposed" in result.output
    assert client.written == {}


async def test_a_client_write_error_fails_the_call(project: Path) -> None:
    client = FakeClient(write=True)
    client.fail["write_text_file"] = RemoteError("read-only buffer")
    result = await call(project, "edit_file", client, path="app.py", old_text="disk 2", new_text="two")
    assert result.failed and result.output == "Error: the editor could not write app.py: read-only buffer"
    assert (project / "app.py").read_text() == "on disk 1\non disk 2\n"


async def test_writing_without_the_capability_writes_the_disk(project: Path) -> None:
    client = FakeClient(read=True, write=False)
    await call(project, "edit_file", client, path="app.py", old_text="disk 2", new_text="two")
    assert (project / "app.py").read_text() == "on disk 1\non two\n"
    assert client.names == ["read_text_file", "read_text_file"]
