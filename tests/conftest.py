"""Shared fixtures: tests run on asyncio by default; modules needing virtual time override ``anyio_backend``."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
