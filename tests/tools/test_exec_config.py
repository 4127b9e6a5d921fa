"""Files that make the user's tools run code: a write or an edit of one is announced as a command (kind
``execute``, the reason in its title), matched on the resolved path whatever spelling reaches it."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from acp_server.tools import Workspace
from acp_server.tools._exec_config import EXEC_CONFIG, exec_config_reason

from ._support import prepare

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project with a real git repository in it."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    return tmp_path


def reason(root: Path, path: str) -> str | None:
    workspace = Workspace(str(root))
    return exec_config_reason(workspace, workspace.resolve(path).real)


async def test_writing_git_config_is_announced_as_a_command_with_the_reason_in_its_title(repo: Path) -> None:
    write = await prepare(repo, "write_file", path=".git/config", content="[core]\n\tfsmonitor = touch PWNED\n")
    assert (write.kind, write.title, write.needs_permission) == (
        "execute",
        "Write .git/config (runs code: git config)",
        True,
    )
    edit = await prepare(repo, "edit_file", path=".git/config", old_text="[core]", new_text="[core]\n\tbare = false")
    assert (edit.kind, edit.title) == ("execute", "Edit .git/config (runs code: git config)")
    hook = await prepare(repo, "write_file", path=".git/hooks/pre-commit", content="#!/bin/sh\ntouch PWNED\n")
    assert (hook.kind, hook.title) == ("execute", "Write .git/hooks/pre-commit (runs code: git hook)")


async def test_an_ordinary_file_stays_an_edit(repo: Path) -> None:
    write = await prepare(repo, "write_file", path="src/app.py", content="print('bye')\n")
    assert (write.kind, write.title) == ("edit", "Write src/app.py")
    for path in ("src/app.py", ".gitignore", ".gitattributes", ".gitmodules", "Makefile", "build.rs", "notes/.git.md"):
        assert reason(repo, path) is None, path


@pytest.mark.parametrize(
    ("path", "why"),
    [
        (".git/config", "git config"),
        (".git/hooks/post-checkout", "git hook"),
        (".git/info/attributes", "git attributes: filters"),
        (".git/modules/lib/config", "git config"),
        (".git/modules/a/modules/b/config", "git config"),
        (".git/worktrees/wt/config.worktree", "git config"),
        (".git/HEAD", "git's own directory"),
        ("sub/.git/config", "git config"),  # a nested repository the model creates
        ("sub/.git", "git's own directory"),  # a worktree's or submodule's pointer file
        (".envrc", "direnv"),
        ("web/.envrc", "direnv"),
        (".vscode/tasks.json", "VS Code tasks"),
        (".vscode/settings.json", "VS Code settings"),
        ("project.code-workspace", "VS Code workspace"),
        (".zed/settings.json", "Zed settings"),
        (".idea/workspace.xml", "JetBrains project settings"),
        (".idea/runConfigurations/app.xml", "JetBrains project settings"),
        (".husky/pre-commit", "husky git hook"),
        (".pre-commit-config.yaml", "pre-commit hooks"),
        ("lefthook.yml", "lefthook git hooks"),
    ],
)
def test_the_listed_files_run_code(repo: Path, path: str, why: str) -> None:
    assert reason(repo, path) == why


@pytest.mark.parametrize(
    "path",
    [
        "./.git/config",
        "src/../.git/config",
        ".GIT/CONFIG",  # a case-insensitive file system (macOS, Windows) takes it for .git/config
        ".Git/Config",
        ".g\u200cit/config",  # HFS+ ignores this code point
        ".git./config",  # NTFS drops trailing dots and spaces
        "git~1/config",  # NTFS's short name
        f"{os.sep}.git{os.sep}config",  # made absolute below
    ],
)
def test_spellings_of_git_config_match_after_resolving(repo: Path, path: str) -> None:
    if path.startswith(os.sep):
        path = str(repo) + path
    assert reason(repo, path) == "git config"


def test_a_symlink_into_git_is_resolved(repo: Path) -> None:
    (repo / "innocent").symlink_to(".git")
    (repo / "settings.cfg").symlink_to(".git/config")
    (repo / "hooks").symlink_to(".git/hooks")
    assert reason(repo, "innocent/config") == "git config"
    assert reason(repo, "settings.cfg") == "git config"
    assert reason(repo, "hooks/pre-push") == "git hook"


def test_a_git_file_pointing_to_a_git_directory_elsewhere_in_the_project(tmp_path: Path) -> None:
    # git init --separate-git-dir: the project's .git is a file naming its git directory, which has no .git in
    # its path.
    subprocess.run(["git", "init", "-q", f"--separate-git-dir={tmp_path / 'meta'}", str(tmp_path / "work")], check=True)
    root = tmp_path
    assert (root / "work" / ".git").is_file()
    assert reason(root, "meta/config") == "git's own directory"
    assert reason(root, "meta/hooks/pre-commit") == "git's own directory"
    assert reason(root, "work/app.py") is None


def test_a_directory_becomes_git_s_once_it_looks_like_one_and_the_pointer_to_it_asks(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "HEAD").write_text("ref: refs/heads/main\n")
    assert reason(tmp_path, "store/config") is None  # not a git directory (yet): git would not read it
    (tmp_path / "store" / "objects").mkdir()
    assert reason(tmp_path, "store/config") == "git's own directory"
    assert reason(tmp_path, "sub/.git") == "git's own directory"  # what would make git use it


def test_a_bare_repository_in_the_project(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "origin.git")], check=True)
    assert reason(tmp_path, "origin.git/config") == "git's own directory"
    assert reason(tmp_path, "origin.git/hooks/post-receive") == "git's own directory"


def test_the_repositorys_hooks_path_holds_hooks(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "config", "core.hooksPath", "tools/githooks"], check=True)
    assert reason(repo, "tools/githooks/pre-commit") == "git hook (core.hooksPath)"
    assert reason(repo, "tools/other.sh") is None
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + '[Core]\n\tHooksPath = "quoted dir" ; the last one wins\n')
    assert reason(repo, "quoted dir/pre-commit") == "git hook (core.hooksPath)"
    assert reason(repo, "tools/githooks/pre-commit") is None


def test_every_listed_pattern_is_lower_case_and_has_a_reason() -> None:
    for pattern, why in EXEC_CONFIG:
        assert pattern == pattern.lower() and why, pattern


async def test_a_read_of_git_config_is_not_a_command(repo: Path) -> None:
    read = await prepare(repo, "read_file", path=".git/config")
    assert (read.kind, read.needs_permission) == ("read", False)


def test_a_project_inside_a_git_directory_is_git_s(tmp_path: Path) -> None:
    """A root that lies inside a git directory (a bare repository's ``hooks``) is that git directory's: what git
    runs from there is judged by the directory above the root, not only by what lies within it."""
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "origin.git")], check=True)
    assert reason(tmp_path / "origin.git" / "hooks", "post-receive") == "git's own directory"


def test_a_hooks_path_into_a_subdirectory_project_holds_hooks(repo: Path) -> None:
    """The cwd a subdirectory of a repository whose ``core.hooksPath`` points into it: its hooks ask."""
    (repo / "sub" / "hooks").mkdir(parents=True)
    subprocess.run(["git", "-C", str(repo), "config", "core.hooksPath", "sub/hooks"], check=True)
    assert reason(repo / "sub", "hooks/pre-commit") == "git hook (core.hooksPath)"
    assert reason(repo / "sub", "other.sh") is None


async def test_a_named_pipe_where_git_s_files_are_is_not_waited_on(tmp_path: Path) -> None:
    """Judging a path reads a ``.git`` file and a git directory's ``config`` and ``commondir``, here and above the
    project; a named pipe in their place (opening it would wait for a writer forever) is passed over as empty."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (tmp_path / ".git").write_text(f"gitdir: {elsewhere}\n")
    os.mkfifo(elsewhere / "config")
    os.mkfifo(elsewhere / "commondir")
    try:
        with anyio.fail_after(10):  # a hang guard only: without the pipes' handling it never returns
            found = await anyio.to_thread.run_sync(reason, project, "app.py", abandon_on_cancel=True)
        assert found is None
    finally:
        for pipe in ("config", "commondir"):  # release a reader that would wait, so the test process can end
            with contextlib.suppress(OSError):
                os.close(os.open(elsewhere / pipe, os.O_WRONLY | os.O_NONBLOCK))
