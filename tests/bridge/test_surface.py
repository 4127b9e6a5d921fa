"""The public surface: exports, the exception tree and its wire details, limit validation (Q2)."""

from __future__ import annotations

import math
import re

import pytest

import acp_server.bridge as bridge_pkg
from acp_server.bridge import (
    DEFAULT_STREAM_CAPACITY,
    BridgeClosedError,
    BridgeError,
    InvalidCwdError,
    PromptDeadlineExceededError,
    PromptQueueFullError,
    PromptStream,
    SessionAlreadyExistsError,
    SessionBridge,
    SessionClosedError,
    SessionNotFoundError,
    validate_deadline_ms,
    validate_max_pending,
)
from acp_server.errors import ServerError

from ._support import ScriptedRunner


def _isort_style(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def test_exported_members() -> None:
    assert bridge_pkg.__all__ == [
        "DEFAULT_COALESCE_BYTES",
        "DEFAULT_STREAM_CAPACITY",
        "MAX_ADDITIONAL_DIRECTORIES",
        "BridgeClosedError",
        "BridgeError",
        "Choice",
        "InvalidCwdError",
        "PromptDeadlineExceededError",
        "PromptHandle",
        "PromptQueueFullError",
        "PromptStream",
        "SessionAlreadyExistsError",
        "SessionBridge",
        "SessionClosedError",
        "SessionEntry",
        "SessionNotFoundError",
        "SettingsChange",
        "SettingsRules",
        "TurnRunner",
        "check_additional_directories",
        "check_system_prompt",
        "validate_deadline_ms",
        "validate_max_pending",
    ]
    # Sorted the way ruff's RUF022 sorts ``__all__``: constants, then classes, then functions.
    assert bridge_pkg.__all__ == sorted(bridge_pkg.__all__, key=_isort_style)
    for name in bridge_pkg.__all__:
        member = getattr(bridge_pkg, name)
        if name.isupper():  # a constant: an int has no home module of its own
            continue
        assert member.__module__.startswith("acp_server.bridge")


def test_stream_capacity_default() -> None:
    assert DEFAULT_STREAM_CAPACITY == 256
    assert "buffered=0/256" in repr(PromptStream())
    assert "buffered=0/3" in repr(PromptStream(3))
    for capacity in (0, -1):
        with pytest.raises(ValueError, match="capacity"):
            PromptStream(capacity)


@pytest.mark.parametrize(
    ("error", "kind", "details", "retryable"),
    [
        (BridgeClosedError(), "bridge_closed", {}, False),
        (
            InvalidCwdError("rel"),
            "invalid_params",
            {"errors": [{"field": "cwd", "message": "must be an absolute path"}]},
            False,
        ),
        (SessionNotFoundError("s1"), "session_not_found", {"sessionId": "s1"}, False),
        (SessionAlreadyExistsError("s1"), "session_already_exists", {"sessionId": "s1"}, False),
        (SessionClosedError("s1"), "session_closed", {"sessionId": "s1"}, False),
        (
            PromptQueueFullError("s1", 5, 5),
            "prompt_queue_full",
            {"sessionId": "s1", "limit": 5, "pendingCount": 5},
            True,
        ),
        (
            PromptDeadlineExceededError("s1", 1500),
            "prompt_deadline_exceeded",
            {"sessionId": "s1", "deadlineMs": 1500},
            False,
        ),
    ],
)
def test_exception_tree_and_details(error: BridgeError, kind: str, details: dict[str, object], retryable: bool) -> None:
    assert isinstance(error, BridgeError)
    assert isinstance(error, ServerError)
    assert error.error_kind == kind
    assert dict(error.details()) == details
    assert error.retryable is retryable
    assert str(error)


def test_queue_full_message_is_exact() -> None:
    assert str(PromptQueueFullError("abc", 5, 5)) == 'Prompt queue full for session "abc" (5/5 pending)'


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), (0, None), (math.inf, None), (0.0, None), (1, 1), (5, 5), (5.0, 5), (1000, 1000)],
)
def test_valid_limits(value: float | None, expected: int | None) -> None:
    assert validate_max_pending(value) == expected
    assert SessionBridge(ScriptedRunner(), max_pending_prompts_per_session=value).limit == expected


@pytest.mark.parametrize("value", [-1, -0.5, 1.5, 2.25, math.nan, -math.inf, True, False, "5", [5], 1j])
def test_invalid_limits_are_rejected_at_construction(value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(value))):
        validate_max_pending(value)
    with pytest.raises(ValueError, match="max_pending_prompts_per_session"):
        SessionBridge(ScriptedRunner(), max_pending_prompts_per_session=value)  # type: ignore[arg-type]


def test_validator_names_the_setting_for_the_cli() -> None:
    with pytest.raises(ValueError, match=r"--max-pending-prompts must be .* got -3"):
        validate_max_pending(-3, "--max-pending-prompts")


@pytest.mark.parametrize(("value", "expected"), [(None, None), (0, None), (math.inf, None), (1, 1), (250, 250)])
def test_valid_deadlines(value: float | None, expected: int | None) -> None:
    assert validate_deadline_ms(value) == expected


@pytest.mark.parametrize("value", [-1, 0.5, math.nan, True, "100"])
def test_invalid_deadlines_are_rejected_at_construction(value: object) -> None:
    with pytest.raises(ValueError, match="prompt_deadline_ms"):
        SessionBridge(ScriptedRunner(), prompt_deadline_ms=value)  # type: ignore[arg-type]


def test_constructor_starts_nothing() -> None:
    """No event loop is running here: a constructor that started a task (or made an Event) would fail."""
    bridge = SessionBridge(ScriptedRunner())
    assert bridge.sessions == ()
    assert "unopened" in repr(bridge)
