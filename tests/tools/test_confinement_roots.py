"""Confinement over several roots: the session's cwd (relative paths resolve there) and its additional directories
(ACP ``additionalDirectories``), each used through an absolute path. Inside a root is allowed, after resolving
symbolic links; outside every root is refused as with the cwd alone; the per-root rules (gitignore, files that run
code, the walk of grep and glob) apply to the root the path lies in; paths found in an additional directory are
spelled absolute; commands still start in the cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_server.tools import ToolCallError

from ._support import Sink, call, prepare

pytestmark = pytest.mark.anyio


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``(project, extra, outside)``: the cwd, an additional directory, and a directory in neither."""
    project, extra, outside = tmp_path / "project", tmp_path / "extra", tmp_path / "outside"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("needle in the project\n")
    (extra / "sub" / "deep").mkdir(parents=True)
    (extra / "sub" / "a.txt").write_text("needle in extra\n")
    (extra / "sub" / "deep" / "b.txt").write_text("same text\n")
    (extra / ".gitignore").write_text("ignored.txt\n")
    (extra / "ignored.txt").write_text("needle hidden\n")
    (outside / "sub" / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("needle outside\n")
    (outside / "sub" / "deep" / "b.txt").write_text("same text\n")
    return project, extra, outside


async def test_a_file_in_an_additional_directory_is_read_by_its_absolute_path(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    prepared = await prepare(project, "read_file", additional=[extra], path=str(extra / "sub" / "a.txt"))
    assert prepared.title == f"Read {extra / 'sub' / 'a.txt'}"  # spelled absolute: not relative to the cwd
    assert [location.path for location in prepared.locations] == [str(extra / "sub" / "a.txt")]
    result = await prepared.run(Sink())
    assert not result.failed and "needle in extra" in result.output


async def test_without_the_additional_directory_the_same_path_is_refused(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    with pytest.raises(ToolCallError, match=f"is outside the project directory {project}$"):
        await prepare(project, "read_file", path=str(extra / "sub" / "a.txt"))


async def test_a_relative_path_means_the_cwd_only(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    with pytest.raises(ToolCallError, match=r"^sub/a\.txt does not exist"):
        await prepare(project, "read_file", additional=[extra], path="sub/a.txt")


async def test_outside_every_root_is_refused_naming_them(roots: tuple[Path, Path, Path]) -> None:
    project, extra, outside = roots
    with pytest.raises(ToolCallError) as refused:
        await prepare(project, "read_file", additional=[extra], path=str(outside / "secret.txt"))
    assert str(refused.value) == (
        f"path '{outside / 'secret.txt'}' is outside the project directory {project} and the additional directories "
        f"({extra})"
    )
    with pytest.raises(ToolCallError, match="is outside the project directory"):
        await prepare(project, "write_file", additional=[extra], path="../outside/new.txt", content="x")
    assert not (outside / "new.txt").exists()


async def test_a_symbolic_link_from_an_additional_directory_to_outside_is_refused(
    roots: tuple[Path, Path, Path],
) -> None:
    project, extra, outside = roots
    (extra / "link").symlink_to(outside)
    with pytest.raises(ToolCallError, match="through a symbolic link, outside the project directory"):
        await prepare(project, "read_file", additional=[extra], path=str(extra / "link" / "secret.txt"))
    with pytest.raises(ToolCallError, match="through a symbolic link"):
        await prepare(project, "write_file", additional=[extra], path=str(extra / "link" / "new.txt"), content="x")
    assert not (outside / "new.txt").exists()


async def test_a_symbolic_link_from_the_cwd_into_an_additional_directory_is_inside(
    roots: tuple[Path, Path, Path],
) -> None:
    project, extra, _ = roots
    (project / "shared").symlink_to(extra / "sub")
    prepared = await prepare(project, "write_file", additional=[extra], path="shared/new.txt", content="made\n")
    assert [location.path for location in prepared.locations] == [str(extra / "sub" / "new.txt")]  # where it lands
    result = await prepared.run(Sink())
    assert not result.failed and (extra / "sub" / "new.txt").read_text() == "made\n"
    with pytest.raises(ToolCallError, match="through a symbolic link"):  # without the root: outside, as before
        await prepare(project, "write_file", path="shared/other.txt", content="x")


async def test_a_write_and_an_edit_in_an_additional_directory(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    target = extra / "sub" / "new" / "made.txt"
    prepared = await prepare(project, "write_file", additional=[extra], path=str(target), content="one\n")
    assert (prepared.kind, prepared.title) == ("edit", f"Write {target}")
    result = await prepared.run(Sink())
    assert not result.failed and target.read_text() == "one\n"
    result = await call(project, "edit_file", additional=[extra], path=str(target), old_text="one", new_text="two")
    assert not result.failed and target.read_text() == "two\n"


@pytest.mark.parametrize("name", [".git/config", ".envrc", ".vscode/tasks.json"])
async def test_files_that_run_code_ask_like_a_command_in_an_additional_directory(
    roots: tuple[Path, Path, Path], name: str
) -> None:
    project, extra, _ = roots
    prepared = await prepare(project, "write_file", additional=[extra], path=str(extra / name), content="x")
    assert prepared.kind == "execute" and "(runs code: " in prepared.title


async def test_a_repository_in_an_additional_directory_is_judged_by_its_own_git_directory(
    roots: tuple[Path, Path, Path],
) -> None:
    project, extra, _ = roots
    gitdir = extra / "sub" / "deep"  # a git directory elsewhere in the root, as a worktree's .git file points
    (gitdir / "objects").mkdir()
    (gitdir / "HEAD").write_text("ref: refs/heads/main\n")
    prepared = await prepare(project, "write_file", additional=[extra], path=str(gitdir / "hooks.txt"), content="x")
    assert prepared.kind == "execute" and prepared.title.endswith("(runs code: git's own directory)")


async def test_an_additional_directory_inside_a_git_directory_is_judged_as_git_s(tmp_path: Path) -> None:
    project, bare = tmp_path / "project", tmp_path / "origin.git"
    project.mkdir()
    (bare / "hooks").mkdir(parents=True)  # what git takes for a bare repository
    (bare / "objects").mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    hook = bare / "hooks" / "post-receive"
    prepared = await prepare(project, "write_file", additional=[bare / "hooks"], path=str(hook), content="x")
    assert prepared.kind == "execute" and prepared.title.endswith("(runs code: git's own directory)")


async def test_grep_and_glob_without_a_path_stay_in_the_cwd(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    result = await call(project, "grep", additional=[extra], pattern="needle")
    assert result.output == "src/main.py:1:needle in the project"
    result = await call(project, "glob", additional=[extra], pattern="**/*.txt")
    assert result.output == "no path matches '**/*.txt'"


async def test_grep_in_an_additional_directory_spells_its_paths_absolute(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    result = await call(project, "grep", additional=[extra], pattern="needle", path=str(extra))
    assert result.output == f"{extra}/sub/a.txt:1:needle in extra"  # ignored.txt: hidden by that root's .gitignore
    result = await call(project, "grep", additional=[extra], pattern="needle", path=str(extra), include="sub/*.txt")
    assert result.output == f"{extra}/sub/a.txt:1:needle in extra"  # an include with / is relative to the root


async def test_glob_with_an_absolute_pattern_in_an_additional_directory(roots: tuple[Path, Path, Path]) -> None:
    project, extra, outside = roots
    result = await call(project, "glob", additional=[extra], pattern=f"{extra}/**/*.txt")
    assert result.output.splitlines() == [f"{extra}/sub/a.txt", f"{extra}/sub/deep/b.txt"]
    with pytest.raises(ToolCallError, match="is outside the project directory and the additional directories"):
        await prepare(project, "glob", additional=[extra], pattern=f"{outside}/*.txt")


async def test_list_directory_of_an_additional_directory_honours_its_gitignore(
    roots: tuple[Path, Path, Path],
) -> None:
    project, extra, _ = roots
    result = await call(project, "list_directory", additional=[extra], path=str(extra))
    assert result.output.splitlines() == [".gitignore", "sub/", "[1 entry hidden by .gitignore]"]


async def test_a_path_in_both_roots_belongs_to_the_cwd(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    project = outer / "project"
    project.mkdir(parents=True)
    (project / "f.txt").write_text("x\n")
    prepared = await prepare(project, "read_file", additional=[outer], path=str(project / "f.txt"))
    assert prepared.title == "Read f.txt"


async def test_commands_still_start_in_the_cwd(roots: tuple[Path, Path, Path]) -> None:
    project, extra, _ = roots
    result = await call(project, "run_command", additional=[extra], command="pwd")
    assert str(project) in result.output.splitlines()


# --- races, per root ----------------------------------------------------------------------------------------


def _swap(extra: Path, outside: Path) -> None:
    """``extra/sub`` becomes a symbolic link to the directory outside (the real one moved out of the way)."""
    os.rename(extra / "sub", extra / "sub.moved")
    os.symlink(outside / "sub", extra / "sub")


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("tool", "path", "arguments", "verb"),
    [
        ("write_file", "sub/new.txt", {"content": "planted\n"}, "write"),
        ("write_file", "sub/deep/new.txt", {"content": "planted\n"}, "write"),
        ("write_file", "sub/deep/b.txt", {"content": "planted\n"}, "read"),  # the re-read refuses first
        ("edit_file", "sub/deep/b.txt", {"old_text": "same", "new_text": "planted"}, "read"),
        ("read_file", "sub/deep/b.txt", {}, "read"),
    ],
)
async def test_a_directory_of_an_additional_root_swapped_after_the_check_fails_the_call(
    roots: tuple[Path, Path, Path], tool: str, path: str, arguments: dict[str, str], verb: str
) -> None:
    project, extra, outside = roots
    target = str(extra / path)
    prepared = await prepare(project, tool, additional=[extra], path=target, **arguments)
    before = _files(outside)
    _swap(extra, outside)
    result = await prepared.run(Sink())
    assert result.failed
    assert result.output == (
        f"Error: cannot {verb} {target}: {extra}/sub changed after the call was checked (it is now a symbolic link, "
        "no longer the directory inside the additional directory it was); nothing was done"
    )
    assert _files(outside) == before  # nothing outside was created, replaced or read into the result
    assert "planted" not in result.output


async def test_an_additional_root_swapped_for_a_symbolic_link_is_refused(roots: tuple[Path, Path, Path]) -> None:
    project, extra, outside = roots
    target = extra / "sub" / "new.txt"
    prepared = await prepare(project, "write_file", additional=[extra], path=str(target), content="x")
    os.rename(extra, extra.parent / "extra.moved")
    os.symlink(outside, extra)
    result = await prepared.run(Sink())
    assert result.failed
    assert result.output.startswith(f"Error: cannot write {target}: the additional directory {extra} cannot be ")
    assert not (outside / "sub" / "new.txt").exists()


async def test_the_file_system_root_as_an_additional_directory_reaches_everything(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    target = tmp_path / "elsewhere" / "made.txt"
    result = await call(project, "write_file", additional=["/"], path=str(target), content="anywhere\n")
    assert not result.failed and target.read_text() == "anywhere\n"  # the editor asked for it: its choice
