"""The optional fields of a chat request that an endpoint may refuse, and what is sent after it refused one.

Invariants: usage is asked for (``stream_options.include_usage``) until the endpoint refuses that field once; an
answer's bound (:func:`answer_bound`) is sent as ``max_tokens``, as ``max_completion_tokens`` once ``max_tokens``
was refused (OpenAI's reasoning models take only that one), and not at all once that too was refused. Each refusal
retries the request at once without the field and holds for the rest of the process (logged once).
"""

from __future__ import annotations

import logging
from typing import Any

from ..pipeline import ModelHTTPError
from .context import Budget, context_refusal

__all__ = ["MAX_ANSWER_BOUND", "RequestFields", "answer_bound"]

logger = logging.getLogger("acp_server.turn")

MAX_ANSWER_BOUND = 32_768
"""The most an automatic bound asks for (hosted models take at most 16k–128k answer tokens; a window's tenth of a
million-token model would be refused)."""

_INCLUDE_USAGE = {"include_usage": True}
_NEXT_BOUND_FIELD: dict[str, str | None] = {"max_tokens": "max_completion_tokens", "max_completion_tokens": None}


def answer_bound(setting: int | None, budget: Budget) -> int | None:
    """The answer's bound in tokens: ``setting`` when given (0: none), else the room kept for the answer
    (:attr:`Budget.reserve`, a tenth of the window, at most :data:`MAX_ANSWER_BOUND`) when the window is known —
    so a looping model ends ``max_tokens`` instead of filling the window; None: no bound is sent."""
    if setting is not None:
        return setting or None
    if budget.window is None:
        return None
    return max(min(budget.reserve, MAX_ANSWER_BOUND), 1)


def _refuses(exc: ModelHTTPError, field: str) -> bool:
    """The endpoint refused the request because of ``field`` (servers that reject unknown or unsupported fields),
    not as too long."""
    return (
        exc.status in (400, 422)
        and exc.chunks_received == 0
        and field in str(exc)
        and context_refusal(exc) is None
    )


class RequestFields:
    """What one runner sends beside the messages and tools: usage asked for, the answer's bound."""

    def __init__(self) -> None:
        self.ask_usage = True
        self.bound_field: str | None = "max_tokens"

    def extra(self, tools: list[dict[str, Any]], bound: int | None) -> dict[str, Any]:
        """The request's fields besides the model and messages."""
        extra: dict[str, Any] = {"tools": tools}
        if self.ask_usage:
            extra["stream_options"] = _INCLUDE_USAGE
        if bound is not None and self.bound_field is not None:
            extra[self.bound_field] = bound
        return extra

    def without_refused(self, exc: ModelHTTPError, extra: dict[str, Any]) -> bool:
        """Whether ``exc`` refused one of ``extra``'s optional fields: then ``extra`` no longer holds it (the bound
        moved to the next field the endpoint may take) and the request is to be sent again."""
        if "stream_options" in extra and _refuses(exc, "stream_options"):
            self.ask_usage = False
            del extra["stream_options"]
            logger.warning("the endpoint refused stream_options (%s): no more usage is asked for or reported", exc)
            return True
        field = self.bound_field
        if field is not None and field in extra and _refuses(exc, field):
            bound = extra.pop(field)
            self.bound_field = _NEXT_BOUND_FIELD[field]
            if self.bound_field is not None:
                extra[self.bound_field] = bound
            then = f"{self.bound_field} is sent instead" if self.bound_field else "no bound is sent any more"
            logger.warning("the endpoint refused %s (%s): %s", field, exc, then)
            return True
        return False
