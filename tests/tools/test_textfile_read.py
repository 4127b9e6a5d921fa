"""Reading a text file from disk: sized from ``fstat`` (a small file costs a small buffer), yet read to its end
when it grew after the ``fstat``, and still refused once it is over the cap."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

import acp_server.tools._textfile as textfile_module
from acp_server.tools import ToolCallError
from acp_server.tools._textfile import read_text
from acp_server.tools._workspace import Target, Workspace


def _target(root: Path, rel: str) -> Target:
    return Workspace(str(root)).existing_file(rel)


def _stale_size(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """``fstat`` answers ``size``, as if the file grew after it."""
    open_regular = textfile_module._open_regular

    def stale(target: Target) -> tuple[int, int]:
        fd, _ = open_regular(target)
        return fd, size

    monkeypatch.setattr(textfile_module, "_open_regular", stale)


def test_a_small_file_is_read_without_a_buffer_of_the_cap(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a short note\n" * 20)
    target = _target(tmp_path, "notes.txt")
    tracemalloc.start()
    try:
        text = read_text(target)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text == "a short note\n" * 20
    assert peak < 256 * 1024, peak  # not a 10 MiB read buffer per call


def test_a_file_that_grew_after_its_fstat_is_read_to_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    content = "".join(f"line {i}\n" for i in range(40_000))  # ~350 KiB: several reads past the stale size
    (tmp_path / "log.txt").write_text(content)
    _stale_size(monkeypatch, 10)
    assert read_text(_target(tmp_path, "log.txt")) == content


def test_a_file_that_grew_past_the_cap_after_its_fstat_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(textfile_module, "MAX_TEXT_FILE_BYTES", 1024)
    (tmp_path / "big.txt").write_bytes(b"x" * 5000)
    _stale_size(monkeypatch, 100)
    with pytest.raises(ToolCallError, match=r"^big\.txt is .* MiB; files over 0 MiB are not read"):
        read_text(_target(tmp_path, "big.txt"))


def test_an_empty_file_reads_as_empty_text(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    assert read_text(_target(tmp_path, "empty.txt")) == ""
    assert os.path.getsize(tmp_path / "empty.txt") == 0
