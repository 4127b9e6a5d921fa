"""glob and grep on real trees, and the ``.gitignore`` subset they (and list_directory) honour."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from acp_server.domain import ToolLocation
from acp_server.tools import OUTPUT_LIMIT_BYTES, ToolCallError
from acp_server.tools._gitignore import parse_ignore_file
from acp_server.tools._globs import Glob, expand_braces
from acp_server.tools._worker import in_thread

from ._support import call, prepare

pytestmark = pytest.mark.anyio


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# --- glob patterns and .gitignore rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["src/a.py", "a.pyc"]),
        ("src/**/*.py", ["src/a.py", "src/x/y/a.py"], ["a.py", "srca.py", "src/a.txt"]),
        ("**/test_*.py", ["test_a.py", "a/b/test_c.py"], ["a/btest_c.py"]),
        ("src/**", ["src/a", "src/a/b"], ["src", "other/a"]),
        ("a/**/b", ["a/b", "a/x/b", "a/x/y/b"], ["a/xb", "b"]),
        ("file?.[ch]", ["file1.c", "filex.h"], ["file12.c", "file1.o", "file/.c"]),
        ("[!a]*", ["b", "zz"], ["a", "ab"]),
        ("**.py", ["a.py"], ["src/a.py"]),  # a ** that is not a whole segment is a *
        ("\\*x", ["*x"], ["ax"]),
    ],
)
def test_glob_matching(pattern: str, matches: list[str], misses: list[str]) -> None:
    glob = Glob(pattern)
    assert [path for path in matches if glob.match(path)] == matches
    assert [path for path in misses if glob.match(path)] == []


def test_brace_expansion() -> None:
    assert expand_braces("*.{ts,tsx}") == ["*.ts", "*.tsx"]
    assert expand_braces("{a,b{c,d}}/x") == ["a/x", "bc/x", "bd/x"]
    assert expand_braces("{single}") == ["{single}"]
    assert expand_braces("un{closed") == ["un{closed"]
    with pytest.raises(ValueError, match="more than 256"):
        expand_braces("{a,b}" * 9)


def ignored(text: str, path: str, is_dir: bool = False) -> bool | None:
    rules = parse_ignore_file(text, "/base/")
    return None if rules is None else rules.decide(path, is_dir)


def test_gitignore_rules() -> None:
    assert ignored("*.log", "a.log") is True
    assert ignored("*.log", "deep/down/a.log") is True  # no slash: any depth
    assert ignored("/build", "build", is_dir=True) is True
    assert ignored("/build", "sub/build", is_dir=True) is None  # anchored to the file's directory
    assert ignored("doc/*.txt", "doc/a.txt") is True
    assert ignored("doc/*.txt", "x/doc/a.txt") is None  # a middle slash anchors too
    assert ignored("out/", "out", is_dir=True) is True
    assert ignored("out/", "out") is None  # a trailing slash: directories only
    assert ignored("*.log\n!keep.log", "keep.log") is False  # the last matching rule wins
    assert ignored("!keep.log\n*.log", "keep.log") is True
    assert ignored("**/cache", "a/b/cache", is_dir=True) is True
    assert ignored("a/**/z", "a/z") is True and ignored("a/**/z", "a/b/c/z") is True
    assert ignored("# comment\n\n\\#hash", "#hash") is True
    assert ignored("\\!bang", "!bang") is True
    assert ignored("trail  ", "trail") is True
    assert ignored("sp\\ ", "sp ") is True
    assert ignored("# only a comment\n", "x") is None


async def test_glob_finds_paths_sorted_and_skips_ignored_and_git(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "build/\n*.pyc\n",
            "src/app.py": "",
            "src/app.pyc": "",
            "src/pkg/mod.py": "",
            "src/pkg/.gitignore": "generated_*.py\n",
            "src/pkg/generated_x.py": "",
            "build/out.py": "",
            ".git/hooks/x.py": "",
            "setup.py": "",
        },
    )
    prepared = await prepare(tmp_path, "glob", pattern="**/*.py")
    assert (prepared.title, prepared.kind, prepared.needs_permission) == ("Glob **/*.py", "search", False)
    result = await prepared.run(_noop)
    assert result.output == "setup.py\nsrc/app.py\nsrc/pkg/mod.py"
    assert result.raw_output == {"paths": 3, "truncated": False}
    assert (await call(tmp_path, "glob", pattern="src/*")).output == "src/app.py\nsrc/pkg/"
    assert (await call(tmp_path, "glob", pattern="src/**/*.{py,pyc}")).output == "src/app.py\nsrc/pkg/mod.py"
    assert (await call(tmp_path, "glob", pattern="*.rs")).output == "no path matches '*.rs'"
    assert (await call(tmp_path, "glob", pattern=f"{tmp_path}/src/*.py")).output == "src/app.py"
    # what is named explicitly is walked, even inside an ignored directory
    assert (await call(tmp_path, "glob", pattern="build/*.py")).output == "build/out.py"


async def _noop(content: object) -> None:
    pass


async def test_gitignore_of_the_repository_above_the_project_applies(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "*.tmp\n", "sub/a.tmp": "", "sub/b.txt": ""})
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("*.secret\n")
    (tmp_path / "sub" / "c.secret").write_text("")
    result = await call(tmp_path / "sub", "list_directory", path=".")
    assert result.output == "b.txt\n[2 entries hidden by .gitignore]"


async def test_glob_refuses_patterns_that_leave_the_project(tmp_path: Path) -> None:
    for pattern, message in [
        ("../*", "contains '..'"),
        ("src/{..,x}/*", "contains '..'"),
        ("/etc/*", "is outside the project directory"),
    ]:
        with pytest.raises(ToolCallError, match=message):
            await prepare(tmp_path, "glob", pattern=pattern)


async def test_glob_never_walks_through_a_symlink_out_of_the_project(tmp_path: Path) -> None:
    project = tree(tmp_path / "p", {"in.txt": ""})
    tree(tmp_path / "outside", {"secret.txt": ""})
    (project / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (project / "leak.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    (project / "alias.txt").symlink_to(project / "in.txt")
    assert (await call(project, "glob", pattern="**/*.txt")).output == "alias.txt\nin.txt"
    assert (await call(project, "glob", pattern="**")).output == "alias.txt\nin.txt"


async def test_glob_caps_its_paths(tmp_path: Path) -> None:
    for n in range(1003):
        (tmp_path / f"f{n:04}.txt").touch()
    result = await call(tmp_path, "glob", pattern="*.txt")
    assert result.output.splitlines()[:2] == ["f0000.txt", "f0001.txt"]
    assert result.output.endswith("f0999.txt\n[1000 of 1003 paths shown; narrow the pattern]")


# --- grep ---------------------------------------------------------------------------------------------------


async def test_grep_prints_path_line_and_text(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "dist/\n",
            "src/a.py": "import os\ndef foo():\n    return os.sep\n",
            "src/b.txt": "foo bar\n",
            "dist/c.py": "def foo(): pass\n",
            ".git/config": "foo\n",
        },
    )
    (tmp_path / "src" / "blob.bin").write_bytes(b"foo\x00\x01")
    (tmp_path / "src" / "latin.txt").write_bytes("foo café".encode("latin-1"))
    prepared = await prepare(tmp_path, "grep", pattern=r"foo|os\.sep")
    assert (prepared.title, prepared.kind, prepared.locations) == ("Grep 'foo|os\\.sep'", "search", ())
    result = await prepared.run(_noop)
    assert result.output == "src/a.py:2:def foo():\nsrc/a.py:3:    return os.sep\nsrc/b.txt:1:foo bar"
    assert result.raw_output == {"matches": 3, "files": 2, "truncated": False}
    only_py = await prepare(tmp_path, "grep", pattern="foo", path="src", include="*.py")
    assert only_py.title == "Grep 'foo' in src (*.py)"
    assert only_py.locations == (ToolLocation(str(tmp_path / "src")),)
    assert (await only_py.run(_noop)).output == "src/a.py:2:def foo():"
    by_path = await call(tmp_path, "grep", pattern="foo", include="src/**/*.txt")
    assert by_path.output == "src/b.txt:1:foo bar"
    none = await call(tmp_path, "grep", pattern="nothing here", path="src")
    assert none.output == "no matches for 'nothing here' in src" and not none.failed


async def test_grep_matches_line_by_line_like_grep(tmp_path: Path) -> None:
    tree(tmp_path, {"f.txt": "alpha\n  beta\ngamma beta\nend"})
    assert (await call(tmp_path, "grep", pattern="^beta")).output == "no matches for '^beta'"
    assert (await call(tmp_path, "grep", pattern="^\\s+beta$")).output == "f.txt:2:  beta"
    assert (await call(tmp_path, "grep", pattern="beta$")).output == "f.txt:2:  beta\nf.txt:3:gamma beta"
    assert (await call(tmp_path, "grep", pattern="\\s*end")).output == "f.txt:4:end"
    assert (await call(tmp_path, "grep", pattern="(?i)ALPHA")).output == "f.txt:1:alpha"


async def test_grep_a_single_file_even_an_ignored_one(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "*.log\n", "app.log": "error: boom\nok\n"})
    assert (await call(tmp_path, "grep", pattern="error")).output == "no matches for 'error'"
    assert (await call(tmp_path, "grep", pattern="error", path="app.log")).output == "app.log:1:error: boom"
    (tmp_path / "b.bin").write_bytes(b"error\x00")
    assert (await call(tmp_path, "grep", pattern="error", path="b.bin")).output == (
        "no matches for 'error' in b.bin\n[b.bin was not searched: it is a binary file]"
    )


async def test_grep_invalid_regex_is_a_tool_error_with_the_engines_message(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError) as caught:
        await prepare(tmp_path, "grep", pattern="foo(")
    assert str(caught.value) == "invalid regular expression 'foo(': missing ) at position 4"


async def test_grep_does_not_read_through_a_symlink_out_of_the_project(tmp_path: Path) -> None:
    project = tree(tmp_path / "p", {"in.txt": "needle inside\n"})
    tree(tmp_path / "outside", {"secret.txt": "needle outside\n"})
    (project / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (project / "leak.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    assert (await call(project, "grep", pattern="needle")).output == "in.txt:1:needle inside"
    with pytest.raises(ToolCallError, match="through a symbolic link"):
        await prepare(project, "grep", pattern="needle", path="leak.txt")


async def test_grep_caps_matches_lines_and_bytes(tmp_path: Path) -> None:
    tree(tmp_path, {"many.txt": "hit\n" * 2000, "wide.txt": ("hit " + "x" * 2000 + "\n") * 10})
    result = await call(tmp_path, "grep", pattern="hit", path="many.txt")
    assert result.output.count("\n") == 500
    assert result.output.endswith("[output capped at 500 matching lines; narrow the pattern, path or include]")
    assert result.raw_output["truncated"] is True  # type: ignore[index]
    wide = await call(tmp_path, "grep", pattern="hit", path="wide.txt")
    assert all(len(line) <= len("wide.txt:10:") + 501 for line in wide.output.splitlines())
    assert wide.output.splitlines()[0].endswith("x…")
    big = tree(tmp_path / "big", {f"f{n}.txt": ("hit " + "y" * 400 + "\n") * 400 for n in range(3)})
    capped = await call(big, "grep", pattern="hit")
    assert len(capped.output.encode()) <= OUTPUT_LIMIT_BYTES
    assert "[output capped at" in capped.output


async def test_grep_skips_files_over_10_mib(tmp_path: Path) -> None:
    (tmp_path / "small.txt").write_text("needle\n")
    with (tmp_path / "huge.txt").open("wb") as file:
        file.write(b"needle\n")
        file.truncate(10 * 1024 * 1024 + 1)
    result = await call(tmp_path, "grep", pattern="needle")
    assert result.output == "small.txt:1:needle\n[1 file(s) over 10 MiB skipped]"


async def test_a_cancelled_search_returns_at_once_and_its_walk_is_told_to_stop() -> None:
    started, finished = threading.Event(), threading.Event()

    def work(stop: threading.Event) -> str:
        started.set()
        stop.wait(10)  # a walk checks ``stop`` between entries
        finished.set()
        return "done"

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(in_thread, work)
        await anyio.to_thread.run_sync(started.wait)
        tasks.cancel_scope.cancel()
    assert await anyio.to_thread.run_sync(finished.wait, 5)


async def test_a_cancelled_grep_ends_with_the_cancel(tmp_path: Path) -> None:
    for n in range(20):
        tree(tmp_path / f"d{n}", {f"f{m}.txt": "needle\n" for m in range(10)})
    prepared = await prepare(tmp_path, "grep", pattern="needle")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await prepared.run(_noop)
    assert scope.cancelled_caught
