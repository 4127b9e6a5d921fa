"""What every endpoint reads from a request: its daemon, a JSON object body, a string field, a flag, an event id.

Invariant: bad input raises a field-naming :class:`InvalidRequestError` (or 415) before anything changes; the daemon
is the one :func:`create_app` stored on ``app.state``, never a global.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import HTTPConnection, Request

from ...rpc import lone_surrogate_at
from .._exceptions import InvalidRequestError, UnsupportedMediaTypeError
from .._options import MAX_EVENT_ID
from ._daemon import Daemon

__all__ = ["daemon_of", "flag", "json_object", "last_event_id", "required_str"]

_EVENT_ID = re.compile(r"[0-9]{1,16}")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses


def daemon_of(connection: HTTPConnection) -> Daemon:
    """The daemon this request's app serves (set once by :func:`create_app` on ``app.state.daemon``)."""
    daemon = connection.app.state.daemon
    assert isinstance(daemon, Daemon)
    return daemon


async def json_object(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The body as a JSON object with only ``allowed`` keys (else 400 / 415; over the cap 413 from the read)."""
    content_type = request.headers.get("content-type", "")
    media = content_type.partition(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaTypeError(content_type)
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError.for_field("(body)", "not valid JSON", f"Body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidRequestError.for_field("(body)", "expected an object", "Body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequestError(
            f"Unknown field {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})",
            [{"field": name, "message": "unknown field"} for name in unknown],
        )
    where = lone_surrogate_at(body)
    if where is not None:  # refused at the door, like ACP: never stored, never sent to the model
        problem = "contains a lone UTF-16 surrogate (UTF-8 cannot carry it)"
        raise InvalidRequestError.for_field(where, problem)
    return body


def required_str(body: dict[str, Any], name: str) -> str:
    """``body[name]`` as a string; absent or another type is a 400 naming the field."""
    value = body.get(name)
    if not isinstance(value, str):
        problem = "Field required" if name not in body else "must be a string"
        raise InvalidRequestError.for_field(name, problem, f"{name}: a string is required")
    return value


def flag(request: Request, name: str) -> bool:
    """A boolean query parameter: absent, ``false``, ``0`` or empty is false; ``true`` or ``1`` true; else a 400."""
    value = request.query_params.get(name)
    if value is None or value.lower() in ("false", "0", ""):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidRequestError.for_field(name, "must be true or false", f"{name} must be true or false")


def last_event_id(request: Request) -> int | None:
    """``Last-Event-ID`` (what an EventSource resends), else the ``lastEventId`` query parameter: ASCII digits, at
    most :data:`MAX_EVENT_ID`; anything else is a 400 naming the field (never an ``int()`` failure)."""
    value = request.headers.get("last-event-id")
    field = "Last-Event-ID"
    if value is None:
        value, field = request.query_params.get("lastEventId"), "lastEventId"
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if not _EVENT_ID.fullmatch(text.lstrip("0") or "0"):
        if text.isascii() and text.isdigit():
            raise InvalidRequestError.for_field(
                field, "event id out of range", f"{field} must be at most {MAX_EVENT_ID}"
            )
        raise InvalidRequestError.for_field(
            field, "not an event id", f"{field} must be a non-negative integer event id"
        )
    event_id = int(text)
    if event_id > MAX_EVENT_ID:
        raise InvalidRequestError.for_field(field, "event id out of range", f"{field} must be at most {MAX_EVENT_ID}")
    return event_id
