"""Shared fixtures: anyio runs tests on asyncio by default; modules that need virtual time override ``anyio_backend``."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
