"""The README is part of the interface: its configuration table and test command must match the code and CI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from acp_server.config import option_table

ROOT = Path(__file__).resolve().parent.parent


def test_configuration_table_matches_the_options() -> None:
    readme = (ROOT / "README.md").read_text()
    table = re.search(r"<!-- options:begin -->\n(.*?)\n<!-- options:end -->", readme, re.S)
    assert table is not None
    assert table.group(1) == option_table()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("Run the tests", 1)[1]
    command = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert command is not None
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci_lines[-1] == command.group(1).strip()


def test_readme_links_stay_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "../" not in readme  # a path outside the clone is dead for every reader
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if not re.match(r"[a-z]+:", target):
            assert (ROOT / target).exists(), target


def test_the_license_file_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) acp-server contributors" in text
