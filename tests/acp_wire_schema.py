"""ACP's JSON Schema as ``@agentclientprotocol/sdk@2.4.0`` ships it (``schema/v1/schema.json`` and
``schema.unstable.json``, vendored unchanged under ``tests/acp_schema_2_4_0/``, fetched with ``npm pack``): the tests
validate every message kind the agent sends against it, the stable file unless the item is only in the unstable one."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SDK_VERSION = "2.4.0"
SCHEMA_DIR = Path(__file__).parent / "acp_schema_2_4_0"


@cache
def _defs(unstable: bool) -> dict[str, Any]:
    name = "schema.unstable.json" if unstable else "schema.json"
    defs: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text())["$defs"]
    return defs


@cache
def _validator(definition: str, unstable: bool) -> Draft202012Validator:
    schema = {"$ref": f"#/$defs/{definition}", "$defs": _defs(unstable)}
    return Draft202012Validator(schema)


def validate(definition: str, value: Any, *, unstable: bool = False) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` is a valid ``definition`` of the 2.4.0 schema."""
    _validator(definition, unstable).validate(value)


def validate_update(params: dict[str, Any], *, unstable: bool = False) -> None:
    """Validate ``session/update`` params (a ``SessionNotification``)."""
    validate("SessionNotification", params, unstable=unstable)


def updates(messages: list[dict[str, Any]], kind: str | None = None) -> list[dict[str, Any]]:
    """The ``update`` of each ``session/update`` notification among ``messages`` (of ``kind`` only, if given)."""
    found = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    return [u for u in found if kind is None or u.get("sessionUpdate") == kind]
