"""Shared fixtures: tests run on asyncio by default; modules needing virtual time override ``anyio_backend``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis keeps its files (examples, constants) in the user's cache, never in the working tree (its default is
# ./.hypothesis).
set_hypothesis_home_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acp-server" / "hypothesis")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents started by a test keep their session database in a temporary directory, never in ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
