"""Client SDK tests: import the ACP schema models and the openai client once, up front, not in the first test."""

from __future__ import annotations

import pytest

from acp_server.acp import preload


@pytest.fixture(scope="session", autouse=True)
def _preloaded() -> None:
    preload()
