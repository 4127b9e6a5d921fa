"""The fast loop's guard (tests/conftest.py): which commands start the agent or daemon, so that a test running one
must be marked ``e2e`` — and which merely name its directories."""

from __future__ import annotations

import pytest

from tests.conftest import starts_acp_server


@pytest.mark.parametrize(
    "command",
    [
        ["python3", "-m", "acp_server", "serve"],
        ["/venv/bin/acp-server", "--version"],
        ["sh", "-c", "exec acp-server ask --offline hi"],
        ["python3", "-c", "import runpy; runpy.run_module('x'); ' -m acp_server'"],
        "acp-server serve --port 0",
    ],
)
def test_commands_that_start_the_agent(command: list[str] | str) -> None:
    assert starts_acp_server(command)


@pytest.mark.parametrize(
    "command",
    [
        ["bwrap", "--tmpfs", "/home/u/.config/acp-server", "--", "sh", "-c", "true"],
        ["python3", "-c", "import acp_server.tools"],
        ["git", "clone", "/src/acp-server"],
    ],
)
def test_commands_that_only_name_its_paths(command: list[str]) -> None:
    assert not starts_acp_server(command)
