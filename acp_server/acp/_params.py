"""The params checked by hand: ``initialize`` (its reply must not wait for the ~0.7 s schema import), the
:data:`SET_TITLE_METHOD` extension (no schema model), ``_meta.acpServer.promptDeadlineMs`` of a prompt and a session
request's ``systemPrompt`` (the schema model drops it). Each refusal is an :class:`InvalidInputError` naming the
field, before any handler does anything."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..bridge import check_additional_directories, check_system_prompt
from ..errors import InvalidInputError
from ..limits import MAX_DEADLINE_MS
from ..system_prompts import ClientPrompt

__all__ = [
    "MAX_TITLE_CHARS",
    "SET_TITLE_METHOD",
    "Sent",
    "check_additional_directories_sent",
    "check_initialize",
    "check_session_sent",
    "check_set_title",
    "deadline_from_meta",
    "invalid_params",
]

SET_TITLE_METHOD = "_acp-server/set_title"
"""The extension method that renames a session (ACP v1 has no stable one): ``{sessionId, title}`` → ``{}``."""

MAX_TITLE_CHARS = 200

Sent = ClientPrompt | None
"""A session request's ``systemPrompt`` as sent and checked (None: omitted or null)."""


@contextmanager
def invalid_params(method: str) -> Iterator[None]:
    """A refusal of the bridge's rules inside, as ``method``'s invalid params: the same fields, its message after
    ``Invalid params for <method>: `` (as every refusal of a params check reads)."""
    try:
        yield
    except InvalidInputError as refused:
        raise InvalidInputError(f"Invalid params for {method}: {refused}", refused.errors) from None


def check_additional_directories_sent(params: Any, method: str) -> None:
    """``additionalDirectories`` of a session request checked as sent, by the bridge's rule: the schema model drops
    the entries that are not strings (``skip_invalid_items``), so a refusal naming ``additionalDirectories[i]``
    must be made before it."""
    sent = params.get("additionalDirectories") if isinstance(params, dict) else None
    if isinstance(sent, list):
        with invalid_params(method):
            check_additional_directories(sent)


def check_session_sent(params: Any, method: str) -> Sent:
    """What a session request (new, load, resume, fork) carries that its schema model drops or would only coarsely
    check: ``additionalDirectories`` (see above) and ``systemPrompt`` (``bridge.check_system_prompt``), whose
    checked value is returned. Every refusal comes before anything is created, loaded, resumed or forked."""
    check_additional_directories_sent(params, method)
    with invalid_params(method):
        return check_system_prompt(params.get("systemPrompt") if isinstance(params, dict) else None)


def check_initialize(params: Any) -> int:
    """Validate ``initialize`` params without the schema models (they cost ~0.7 s to import; this reply must not)."""
    if not isinstance(params, dict):
        raise InvalidInputError.for_field(
            "(root)", "expected object", "Invalid params for initialize: expected an object"
        )
    if "protocolVersion" not in params:
        raise InvalidInputError.for_field(
            "protocolVersion", "Field required", "Invalid params for initialize: protocolVersion: Field required"
        )
    version = params["protocolVersion"]
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        problem = "must be an integer from 0 to 65535"
        raise InvalidInputError.for_field(
            "protocolVersion", problem, f"Invalid params for initialize: protocolVersion: {problem}"
        )
    for key in ("clientCapabilities", "clientInfo", "_meta"):
        if key in params and params[key] is not None and not isinstance(params[key], dict):
            raise InvalidInputError.for_field(
                key, "must be an object", f"Invalid params for initialize: {key}: must be an object"
            )
    return version


def check_set_title(params: Any) -> tuple[str, str]:
    """``{sessionId, title}`` of :data:`SET_TITLE_METHOD`: a session id and a title of at most
    :data:`MAX_TITLE_CHARS` characters on one line (``""`` clears it)."""
    method = SET_TITLE_METHOD

    def refuse(field: str, problem: str) -> InvalidInputError:
        return InvalidInputError.for_field(field, problem, f"Invalid params for {method}: {field}: {problem}")

    if not isinstance(params, dict):
        raise refuse("(root)", "expected an object")
    session_id, title = params.get("sessionId"), params.get("title")
    if not isinstance(session_id, str) or not session_id:
        raise refuse("sessionId", "must be a non-empty string")
    if not isinstance(title, str):
        raise refuse("title", "must be a string")
    title = title.strip()
    if len(title) > MAX_TITLE_CHARS or "\n" in title or "\r" in title:
        raise refuse("title", f"must be one line of at most {MAX_TITLE_CHARS} characters")
    return session_id, title


def deadline_from_meta(meta: Any) -> int | None:
    """``_meta.acpServer.promptDeadlineMs``: a positive integer that can only shorten the server's deadline."""
    if not isinstance(meta, dict) or not isinstance(meta.get("acpServer"), dict):
        return None
    value = meta["acpServer"].get("promptDeadlineMs")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_DEADLINE_MS:
        problem = f"must be a positive integer of at most {MAX_DEADLINE_MS}"
        field = "_meta.acpServer.promptDeadlineMs"
        raise InvalidInputError.for_field(field, problem, f"Invalid params for session/prompt: {field} {problem}")
    return value
