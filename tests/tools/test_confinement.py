"""Confinement: every path resolves inside the project directory, or the call is refused before anything is shown
or asked (the client is never called); the model is told why."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from acp_server.tools import ToolCallError, Workspace

from ._support import FakeClient, call, prepare

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``tmp_path/project`` with a file, next to ``tmp_path/outside`` (a secret file and a directory)."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('app')\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret\n")
    return root


async def refused(project: Path, name: str, **arguments: Any) -> str:
    client = FakeClient(read=True, write=True, terminal=True)
    with pytest.raises(ToolCallError) as caught:
        await prepare(project, name, client, **arguments)
    assert client.calls == []  # refused before the client is asked anything
    return str(caught.value)


@pytest.mark.parametrize("name", ["read_file", "list_directory", "write_file", "edit_file", "grep"])
async def test_dot_dot_out_of_the_project_is_refused(project: Path, name: str) -> None:
    arguments: dict[str, Any] = {"path": "../outside/secret.txt"}
    if name == "write_file":
        arguments["content"] = "x"
    if name == "edit_file":
        arguments |= {"old_text": "the", "new_text": "a"}
    if name == "grep":
        arguments["pattern"] = "secret"
    message = await refused(project, name, **arguments)
    assert message == f"path '../outside/secret.txt' is outside the project directory {project}"
    assert (project.parent / "outside" / "secret.txt").read_text() == "the secret\n"


async def test_dot_dot_that_stays_inside_is_fine(project: Path) -> None:
    result = await call(project, "read_file", path="src/../src/./app.py")
    assert "print('app')" in result.output


async def test_an_absolute_path_outside_is_refused_and_one_inside_accepted(project: Path) -> None:
    assert await refused(project, "read_file", path="/etc/passwd") == (
        f"path '/etc/passwd' is outside the project directory {project}"
    )
    inside = await prepare(project, "read_file", path=str(project / "src" / "app.py"))
    assert inside.title == "Read src/app.py"
    assert inside.locations[0].path == str(project / "src" / "app.py")


async def test_a_symlinked_file_pointing_out_is_refused_for_read_and_write(project: Path) -> None:
    (project / "leak.txt").symlink_to(project.parent / "outside" / "secret.txt")
    for name, extra in [("read_file", {}), ("write_file", {"content": "overwritten"})]:
        message = await refused(project, name, path="leak.txt", **extra)
        assert message.startswith("path 'leak.txt' resolves to ")
        assert "through a symbolic link, outside the project directory" in message
    assert (project.parent / "outside" / "secret.txt").read_text() == "the secret\n"


async def test_a_symlinked_directory_pointing_out_is_refused(project: Path) -> None:
    (project / "docs").symlink_to(project.parent / "outside", target_is_directory=True)
    assert "through a symbolic link" in await refused(project, "read_file", path="docs/secret.txt")
    assert "through a symbolic link" in await refused(project, "list_directory", path="docs")
    assert "through a symbolic link" in await refused(project, "write_file", path="docs/new.txt", content="x")
    assert "through a symbolic link" in await refused(project, "glob", pattern="docs/*.txt")
    assert not (project.parent / "outside" / "new.txt").exists()


async def test_a_dangling_symlink_pointing_out_is_refused_for_write(project: Path) -> None:
    (project / "dangling").symlink_to(project.parent / "outside" / "created-by-the-model")
    assert "through a symbolic link" in await refused(project, "write_file", path="dangling", content="x")
    assert not (project.parent / "outside" / "created-by-the-model").exists()


async def test_symlinks_inside_the_project_are_followed(project: Path) -> None:
    (project / "alias.py").symlink_to(project / "src" / "app.py")
    prepared = await prepare(project, "read_file", path="alias.py")
    assert prepared.title == "Read src/app.py"  # the resolved file, relative to the project
    result = await prepared.run(_noop)
    assert "print('app')" in result.output


async def _noop(content: object) -> None:
    pass


@pytest.mark.parametrize(("path", "message"), [("", "path is empty"), ("src/a\0b", "contains a NUL byte")])
async def test_empty_and_nul_paths_are_refused(project: Path, path: str, message: str) -> None:
    assert message in await refused(project, "read_file", path=path)


async def test_reading_a_directory_or_a_fifo_is_refused(project: Path) -> None:
    assert await refused(project, "read_file", path="src") == (
        "src is a directory, not a file (use list_directory to see what it holds)"
    )
    os.mkfifo(project / "pipe")
    assert await refused(project, "read_file", path="pipe") == (
        "pipe is a named pipe, not a regular file; it cannot be used"
    )
    assert "is a named pipe" in await refused(project, "edit_file", path="pipe", old_text="a", new_text="b")
    assert "is a named pipe; only regular files can be written" in await refused(
        project, "write_file", path="pipe", content="x"
    )
    assert await refused(project, "list_directory", path="src/app.py") == (
        "src/app.py is a file, not a directory (use read_file to read it)"
    )


async def test_a_missing_file_says_how_to_find_one(project: Path) -> None:
    assert await refused(project, "read_file", path="src/nope.py") == (
        "src/nope.py does not exist (use list_directory or glob to find the right path)"
    )


async def test_writing_the_project_directory_itself_or_under_a_file_is_refused(project: Path) -> None:
    assert "is the project directory itself" in await refused(project, "write_file", path=".", content="x")
    assert await refused(project, "write_file", path="src/app.py/x", content="x") == (
        "cannot create src/app.py/x: src/app.py is not a directory"
    )


async def test_a_project_directory_reached_through_a_symlink(project: Path, tmp_path: Path) -> None:
    """Locations keep the session's spelling of the project directory; confinement uses its real path."""
    link = tmp_path / "link-to-project"
    link.symlink_to(project, target_is_directory=True)
    prepared = await prepare(link, "read_file", path="src/app.py")
    assert prepared.locations[0].path == str(link / "src" / "app.py")
    via_real = await prepare(link, "read_file", path=str(project / "src" / "app.py"))
    assert via_real.title == "Read src/app.py"
    with pytest.raises(ToolCallError, match="outside the project directory"):
        await prepare(link, "read_file", path="../outside/secret.txt")


def test_the_workspace_resolves_and_confines(project: Path) -> None:
    workspace = Workspace(str(project / "src" / ".."))
    assert workspace.cwd == str(project)
    target = workspace.resolve("src/new/file.txt")  # need not exist
    assert (target.rel, target.path) == ("src/new/file.txt", str(project / "src" / "new" / "file.txt"))
    assert workspace.resolve(".").rel == "."
    assert not workspace.contains(str(project) + "-sibling")  # a prefix of the name is not inside
    with pytest.raises(ToolCallError):
        workspace.resolve(str(project) + "-sibling/x")
