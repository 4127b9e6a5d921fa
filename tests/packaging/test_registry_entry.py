"""The ACP Registry entry (``packaging/acp-registry/acp-server``): valid against the registry's ``agent.schema.json``
(vendored here from https://github.com/agentclientprotocol/registry/blob/main/agent.schema.json, served as
https://cdn.agentclientprotocol.com/registry/v1/latest/agent.schema.json), plus the checks the registry's
``.github/workflows/build_registry.py`` makes beyond it: the id is the directory's name, the uvx package pins the
entry's version, which is the package's own; the icon is a square 16×16 SVG whose fills and strokes are
``currentColor`` or ``none``, and uses ``currentColor``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from acp_server import __version__

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "packaging" / "acp-registry" / "acp-server"
SCHEMA = Path(__file__).resolve().parent / "agent.schema.json"


def _agent() -> dict[str, Any]:
    agent: dict[str, Any] = json.loads((ENTRY / "agent.json").read_text(encoding="utf-8"))
    return agent


def test_the_entry_is_valid_against_the_registry_schema() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(_agent(), schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def test_the_id_is_the_directory_and_the_versions_are_the_package_s() -> None:
    agent = _agent()
    assert agent["id"] == ENTRY.name
    assert agent["version"] == __version__
    assert agent["distribution"] == {"uvx": {"package": f"acp-server=={__version__}", "args": []}}


def test_the_icon_is_a_16px_square_in_current_color() -> None:
    svg = (ENTRY / "icon.svg").read_text(encoding="utf-8")
    width = re.search(r'<svg[^>]*\swidth=["\'](\d+)', svg)
    height = re.search(r'<svg[^>]*\sheight=["\'](\d+)', svg)
    assert width and height and (width.group(1), height.group(1)) == ("16", "16")
    assert re.search(r'viewBox=["\']0 0 16 16["\']', svg)
    paints = re.findall(r'\b(?:fill|stroke)\s*=\s*["\']([^"\']+)["\']', svg, re.IGNORECASE)
    assert paints and {paint.strip().lower() for paint in paints} <= {"currentcolor", "none", "inherit"}
    assert "currentColor" in svg and "style=" not in svg
