"""The parts of the manual generated at build time (an mkdocs hook, ``hooks:`` in mkdocs.yml).

A page holds a marker where a generated table goes: ``<!-- generated: options -->`` (every flag of the agent, from the
one table of options in ``acp_server/config/_options.py``), ``<!-- generated: serve-options -->`` (the flags of
``acp-server serve`` only) and ``<!-- generated: openapi-routes -->`` (the daemon's routes, from
``schemas/openapi.json``). Nothing is copied by hand, so the pages cannot drift from the code; ``tests/test_readme.py``
renders the pages through ``render`` and compares. The changelog and the OpenAPI document, which live outside
``docs/``, are added to the site as they are.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "schemas" / "openapi.json"
MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def _options_table(serve: bool) -> str:
    if str(ROOT) not in sys.path:  # a checkout that is not installed builds its own tables
        sys.path.insert(0, str(ROOT))
    from acp_server.config import OPTIONS, SERVE_OPTIONS, option_table

    return option_table(SERVE_OPTIONS if serve else OPTIONS)


def openapi_routes() -> str:
    """One row per operation of the OpenAPI document: method, path, what it does, the statuses it answers."""
    document = json.loads(OPENAPI.read_text())
    rows = ["| method | path | what it does | statuses |", "| --- | --- | --- | --- |"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            summary = operation.get("summary", "").replace("|", "\\|").replace("\n", " ")
            statuses = ", ".join(sorted(operation.get("responses", {})))
            rows.append(f"| `{method.upper()}` | `{path}` | {summary} | {statuses} |")
    return "\n".join(rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "options": lambda: _options_table(serve=False),
    "serve-options": lambda: _options_table(serve=True),
    "openapi-routes": openapi_routes,
}


def render(markdown: str) -> str:
    """The page with every marker replaced by its table; an unknown marker is an error, not an empty spot."""

    def table(found: re.Match[str]) -> str:
        if found.group(1) not in GENERATORS:
            raise ValueError(f"unknown generated table {found.group(1)!r}")
        return GENERATORS[found.group(1)]()

    return MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "CHANGELOG.md", abs_src_path=str(ROOT / "CHANGELOG.md")))
    files.append(File.generated(config, "openapi.json", abs_src_path=str(OPENAPI)))
    return files
