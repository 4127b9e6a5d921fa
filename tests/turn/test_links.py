"""Linked files: a ``file://`` link inside the cwd is read for the model (capped, text only), anything else is
given as the link with a note; the prompt as sent (what history replays) keeps the link."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest

from acp_server.domain import Message, Prompt, ResourceLinkPart, TextPart
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.turn import MAX_LINKED_BYTES, MAX_LINKED_FILE_BYTES, ModelSettings, ModelTurn, with_linked_files
from acp_server.turn._links import file_path

from .test_model_turn import NO_RETRIES, Events, Session

pytestmark = pytest.mark.anyio


def _link(path: Path, name: str | None = None) -> ResourceLinkPart:
    return ResourceLinkPart(f"file://{quote(str(path))}", name or path.name)


async def _given(prompt: Prompt, cwd: Path) -> str:
    """What the model gets of ``prompt`` (its parts' text)."""
    parts = (await with_linked_files(prompt, str(cwd))).parts
    assert all(isinstance(part, TextPart) for part in parts)
    return "\n\n".join(part.text for part in parts if isinstance(part, TextPart))


def test_file_uris() -> None:
    assert file_path("file:///p/a%20b.txt") == "/p/a b.txt"
    assert file_path("file://localhost/p/x#L3") == "/p/x"
    assert file_path("FILE:///p/x?q=1") == "/p/x"
    assert file_path("file://otherhost/p/x") is None
    assert file_path("https://example.com/x") is None
    assert file_path("file:relative") is None
    assert file_path("file:///p/%ff") is None  # not UTF-8


async def test_a_linked_file_inside_the_cwd_is_given_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes one.txt").write_text("line 1\nline 2\n")
    text = await _given(Prompt((TextPart("look at"), _link(tmp_path / "docs" / "notes one.txt"))), tmp_path)
    assert text.startswith("look at\n\n[notes one.txt](file://")
    assert text.endswith('\n<file path="docs/notes one.txt">\nline 1\nline 2\n</file>')


async def test_a_link_outside_the_cwd_is_only_the_link_with_a_note(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET")
    (tmp_path / "project").mkdir()
    text = await _given(Prompt((_link(outside),)), tmp_path / "project")
    assert "SECRET" not in text
    assert "(not read: path" in text and "is outside the project directory" in text


async def test_a_symlink_inside_the_cwd_to_a_file_outside_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("SECRET")
    project = tmp_path / "project"
    project.mkdir()
    (project / "innocent.txt").symlink_to(tmp_path / "outside.txt")
    text = await _given(Prompt((_link(project / "innocent.txt"),)), project)
    assert "SECRET" not in text
    assert "through a symbolic link, outside the project directory" in text


async def test_a_symlink_inside_the_cwd_to_a_file_inside_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("real text")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real.txt")
    text = await _given(Prompt((_link(tmp_path / "alias.txt"),)), tmp_path)
    assert '<file path="real.txt">\nreal text\n</file>' in text


async def test_binary_directories_and_missing_files_get_a_note(tmp_path: Path) -> None:
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "dir").mkdir()
    prompt = Prompt((_link(tmp_path / "image.png"), _link(tmp_path / "dir"), _link(tmp_path / "gone.txt")))
    text = await _given(prompt, tmp_path)
    assert "(not read: binary file image.png not shown" in text
    assert "(not read: dir is a directory" in text
    assert "(not read: gone.txt does not exist" in text


async def test_a_large_linked_file_is_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i}\n" for i in range(50_000)))
    text = await _given(Prompt((_link(tmp_path / "big.txt"),)), tmp_path)
    assert len(text.encode()) < MAX_LINKED_FILE_BYTES + 1024
    assert "line 0\n" in text and "line 49999" not in text
    assert "[big.txt cut here: a linked file is given up to 64 KiB; read_file with offset" in text


async def test_the_linked_files_of_a_prompt_are_capped_together(tmp_path: Path) -> None:
    links = []
    for i in range(MAX_LINKED_BYTES // MAX_LINKED_FILE_BYTES + 2):
        (tmp_path / f"f{i}.txt").write_text(f"FILE{i}" + "x" * MAX_LINKED_FILE_BYTES)
        links.append(_link(tmp_path / f"f{i}.txt"))
    text = await _given(Prompt(tuple(links)), tmp_path)
    assert "FILE0" in text
    assert f"FILE{len(links) - 1}" not in text
    assert "(not read: the linked files of a prompt are given up to 256 KiB in all)" in text
    assert len(text.encode()) < MAX_LINKED_BYTES + 16 * 1024


async def test_a_prompt_without_file_links_is_given_as_it_is(tmp_path: Path) -> None:
    prompt = Prompt((TextPart("hi"), ResourceLinkPart("https://example.com/a", "a")))
    assert await with_linked_files(prompt, str(tmp_path)) is prompt


# -- through a turn -------------------------------------------------------------------------------------------


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


async def test_the_model_gets_the_file_and_history_keeps_the_link(model: LoopbackModel, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    try:
        model.enqueue(Answer(text="ok", reasoning=""))
        session = Session(model, cwd=str(tmp_path))
        prompt = Prompt((TextPart("look at"), _link(tmp_path / "notes.txt")))
        assert await runner(session, prompt, Events(session)) == "end_turn"
        user = model.requests[0].body["messages"][-1]
        assert user["role"] == "user"
        assert '<file path="notes.txt">\nremember the milk\n</file>' in user["content"]
        (_, (recorded_prompt, recorded_user, _)) = session.calls[0]
        assert recorded_prompt is prompt  # what the user sent, for replay: the link
        assert recorded_user == Message("user", user["content"])  # what the model got, for the next turns
    finally:
        await runner.aclose()


async def test_a_linked_file_in_an_additional_directory_is_read_with_its_absolute_path(tmp_path: Path) -> None:
    project, extra = tmp_path / "project", tmp_path / "extra"
    project.mkdir()
    extra.mkdir()
    (extra / "shared.txt").write_text("shared text\n")
    prompt = Prompt((_link(extra / "shared.txt"),))
    parts = (await with_linked_files(prompt, str(project), (str(extra),))).parts
    text = "\n\n".join(part.text for part in parts if isinstance(part, TextPart))
    assert text.endswith(f'\n<file path="{extra / "shared.txt"}">\nshared text\n</file>')
    alone = await _given(prompt, project)  # the same link, the session without that directory
    assert "shared text" not in alone and "is outside the project directory" in alone
