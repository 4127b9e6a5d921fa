"""The manual's pages as the tests read them: ``docs/<name>`` as written, or rendered the way ``mkdocs build`` renders
it (its generated tables filled in by the site's hook, ``docs/hooks/generated.py``)."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def page(name: str) -> str:
    """The page as written (``name`` relative to ``docs/``)."""
    return (DOCS / name).read_text()


@cache
def hook() -> ModuleType:
    """The site's hook, loaded from its file (it is not a module of the package)."""
    spec = importlib.util.spec_from_file_location("acp_server_docs_hook", DOCS / "hooks" / "generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rendered(name: str) -> str:
    """The page as the site shows it: every ``<!-- generated: ... -->`` marker replaced by its table."""
    text: str = hook().render(page(name))
    return text
