"""The suite leaves the working tree as it found it: hypothesis keeps its files outside the repository."""

from __future__ import annotations

from pathlib import Path

from hypothesis.configuration import storage_directory

ROOT = Path(__file__).resolve().parent.parent


def test_hypothesis_files_live_outside_the_repository() -> None:
    where = Path(storage_directory("examples").path).resolve()
    assert not where.is_relative_to(ROOT), where
