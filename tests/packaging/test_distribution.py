"""The distribution: the version is written once (``acp_server.__version__``, which pyproject.toml reads and
``acp-server --version`` prints); every module the package imports is a declared dependency; psycopg is the
``postgres`` extra (the dev extra has it too), and ``--store`` without it is a usage error naming the extra."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from acp_server import __version__

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

VIA_EXTRA = {"aiohttp": "openai[aiohttp]"}
"""Modules that come with an extra of a declared dependency (as the declaration says)."""


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = PYPROJECT["project"]
    extras = {extra: {_name(r) for r in reqs} for extra, reqs in project["optional-dependencies"].items()}
    return {_name(r) for r in project["dependencies"]}, extras


def _imported() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "acp_server").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "acp_server"}


@pytest.mark.e2e  # starts acp_server as a process
def test_the_version_is_written_once_and_printed() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "acp_server.__version__"}
    assert __version__ == "0.2.0"
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"acp-server {__version__}")


def test_every_imported_module_is_declared() -> None:
    required, extras = _declared()
    everything = required.union(*extras.values())
    distributions = packages_distributions()
    for module in sorted(_imported()):
        if module in VIA_EXTRA:
            assert any(r.startswith(VIA_EXTRA[module]) for r in PYPROJECT["project"]["dependencies"]), module
            continue
        names = {_name(d) for d in distributions.get(module, [module])}
        assert names & everything, f"{module} (from {names}) is imported but not declared"


def test_psycopg_is_the_postgres_extra_and_the_dev_extra_has_it() -> None:
    required, extras = _declared()
    assert "psycopg" not in required
    assert "psycopg" in extras["postgres"] and "psycopg" in extras["dev"]


def test_a_store_without_the_postgres_extra_is_a_usage_error_naming_it() -> None:
    hide = "import sys; sys.modules['psycopg'] = None; from acp_server.cli import main; sys.exit(main())"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    done = subprocess.run(
        [sys.executable, "-c", hide, "--store", "postgresql://u:hunter2@localhost/db", "--offline"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "acp-server[postgres]" in done.stderr and "--store" in done.stderr
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr
