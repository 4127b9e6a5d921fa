"""The user's command files: where they are read from and in which order, frontmatter, ``$ARGUMENTS``/``$1`` and
gemini-cli's ``{{args}}``, names from subdirectories, bounds, a built-in's name, and re-reading at most once a
second (a virtual clock)."""

from __future__ import annotations

from pathlib import Path

from acp_server.commands import CommandFiles, UserCommand, expand
from acp_server.commands._files import MAX_FILE_BYTES


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_sources_names_frontmatter_and_precedence(tmp_path: Path) -> None:
    project, user = tmp_path / "p", tmp_path / "u"
    _write(
        project / ".agents/commands/review.md",
        "---\ndescription: 'Review it'\nargument-hint: <files>\n---\nReview $ARGUMENTS",
    )
    _write(project / ".claude/commands/review.md", "the claude one loses")
    _write(project / ".claude/commands/git/commit.md", "Commit with message $1")
    _write(project / ".gemini/commands/explain.toml", 'description = "Explain"\nprompt = "Explain {{args}}"\n')
    _write(project / ".gemini/commands/broken.toml", "prompt = [")
    _write(user / "hello.md", "Say hello\n")
    _write(user / "help.md", "never offered: a built-in")
    _write(user / "huge.md", "x" * (MAX_FILE_BYTES + 1))
    files = CommandFiles(str(user))
    files.reserve(["help"])
    commands = {c.name: c for c in files.commands(str(project))}
    assert list(commands) == ["review", "git:commit", "explain", "hello"]
    review = commands["review"]
    assert (review.description, review.hint) == ("Review it", "<files>")
    assert review.path.endswith(".agents/commands/review.md")
    assert commands["hello"].description == "Say hello"
    assert expand(review, "a.py b.py") == "Review a.py b.py"
    assert expand(commands["git:commit"], "fix the parser") == "Commit with message fix"
    assert expand(commands["explain"], "this") == "Explain this"
    assert expand(commands["hello"], "Ann") == "Say hello\n\n\nAnn"


def test_no_placeholder_and_no_argument() -> None:
    command = UserCommand("x", "", None, "Do it", "/x.md")
    assert expand(command, "") == "Do it"
    assert expand(UserCommand("y", "", None, "A $2 B", "/y.md"), "one") == "A  B"


def test_changes_are_seen_at_most_once_a_second(tmp_path: Path) -> None:
    now = [100.0]
    files = CommandFiles(None, clock=lambda: now[0])
    command = tmp_path / ".agents/commands/a.md"
    _write(command, "one")
    assert [c.body for c in files.commands(str(tmp_path))] == ["one"]
    _write(command, "one more")
    _write(tmp_path / ".agents/commands/b.md", "two")
    now[0] += 0.5
    assert [c.body for c in files.commands(str(tmp_path))] == ["one"]  # not looked at again yet
    now[0] += 0.6
    assert [c.body for c in files.commands(str(tmp_path))] == ["one more", "two"]
    (tmp_path / ".agents/commands/b.md").unlink()
    now[0] += 1.1
    assert [c.name for c in files.commands(str(tmp_path))] == ["a"]
