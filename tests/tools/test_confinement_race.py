"""Confinement under races: a directory of a checked path swapped for a symbolic link to a directory outside the
project between the check (prepare) and the run (what a pending permission request leaves time for) fails the call
with a precise error, and nothing outside is read, created or replaced."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from acp_server.tools import PreparedCall

from ._support import FakeClient, Sink, prepare

pytestmark = pytest.mark.anyio

SWAPPED = (
    "cannot {verb} {rel}: sub changed after the call was checked (it is now a symbolic link, no longer the directory "
    "inside the project it was); nothing was done"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("same text\n")
    (root / "sub" / "deep" / "b.txt").write_text("same text\n")
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "a.txt").write_text("same text\n")  # what a replace would overwrite: the same text, so no change shows
    (outside / "deep" / "b.txt").write_text("same text\n")
    return root


def _swap(project: Path) -> None:
    """``sub`` becomes a symbolic link to the directory outside (the real one moved out of the way)."""
    os.rename(project / "sub", project / "sub.moved")
    os.symlink(project.parent / "outside", project / "sub")


def _outside(project: Path) -> dict[str, str]:
    root = project.parent / "outside"
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


async def _run_after_swap(project: Path, prepared: PreparedCall) -> str:
    before = _outside(project)
    _swap(project)
    result = await prepared.run(Sink())
    assert result.failed
    assert _outside(project) == before  # nothing outside was created or replaced
    return result.output


@pytest.mark.parametrize("path", ["sub/new.txt", "sub/deep/new.txt", "sub/new/dir/new.txt"])
async def test_a_new_file_is_not_created_outside(project: Path, path: str) -> None:
    prepared = await prepare(project, "write_file", path=path, content="planted\n")
    output = await _run_after_swap(project, prepared)
    assert output == "Error: " + SWAPPED.format(verb="write", rel=path)
    assert not list((project.parent / "outside").rglob("new*"))


async def test_a_replaced_file_is_not_replaced_outside(project: Path) -> None:
    prepared = await prepare(project, "write_file", path="sub/deep/b.txt", content="planted\n")
    output = await _run_after_swap(project, prepared)
    assert output == "Error: " + SWAPPED.format(verb="read", rel="sub/deep/b.txt")  # the re-read refuses first


async def test_an_edit_is_not_applied_outside(project: Path) -> None:
    prepared = await prepare(project, "edit_file", path="sub/a.txt", old_text="same", new_text="planted")
    output = await _run_after_swap(project, prepared)
    assert output == "Error: " + SWAPPED.format(verb="read", rel="sub/a.txt")


async def test_a_read_does_not_read_outside(project: Path) -> None:
    (project.parent / "outside" / "a.txt").write_text("outside secret\n")
    prepared = await prepare(project, "read_file", path="sub/a.txt")
    _swap(project)
    result = await prepared.run(Sink())
    assert result.failed and "outside secret" not in result.output
    assert result.output == "Error: " + SWAPPED.format(verb="read", rel="sub/a.txt")


async def test_a_write_through_the_editor_is_refused_before_the_editor_is_asked(project: Path) -> None:
    client = FakeClient(write=True)
    prepared = await prepare(project, "write_file", client, path="sub/new.txt", content="planted\n")
    output = await _run_after_swap(project, prepared)
    assert output == "Error: " + SWAPPED.format(verb="write", rel="sub/new.txt")
    assert client.written == {}


async def test_a_directory_swapped_for_a_file_is_named(project: Path) -> None:
    prepared = await prepare(project, "write_file", path="sub/new.txt", content="x")
    shutil.rmtree(project / "sub")
    (project / "sub").write_text("now a file\n")
    result = await prepared.run(Sink())
    assert result.failed and "sub changed after the call was checked (it is now a file" in result.output
    assert (project / "sub").read_text() == "now a file\n"


async def test_without_a_swap_missing_directories_are_still_created(project: Path) -> None:
    prepared = await prepare(project, "write_file", path="sub/x/y/z.txt", content="ok\n")
    result = await prepared.run(Sink())
    assert not result.failed and (project / "sub" / "x" / "y" / "z.txt").read_text() == "ok\n"


async def test_a_project_directory_swapped_for_a_symlink_is_refused(project: Path) -> None:
    prepared = await prepare(project, "write_file", path="sub/new.txt", content="planted\n")
    moved = project.parent / "project.moved"
    os.rename(project, moved)
    os.symlink(project.parent / "outside", project)
    (project.parent / "outside" / "sub").mkdir()
    result = await prepared.run(Sink())
    assert result.failed
    assert result.output.startswith(f"Error: cannot write sub/new.txt: the project directory {project} cannot be ")
    assert not (project.parent / "outside" / "sub" / "new.txt").exists()
