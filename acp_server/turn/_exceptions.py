"""Errors of the turn layer.

    ServerError
     └── TurnError
          ├── ModelNotConfiguredError      no base URL and no API key: nothing to talk to
          ├── ContextWindowExceededError   a prompt too large for the model's window, even alone
          └── CompactionFailedError        the summary request of a needed compaction failed
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..errors import ServerError

__all__ = ["CompactionFailedError", "ContextWindowExceededError", "ModelNotConfiguredError", "TurnError"]


class TurnError(ServerError):
    """Root of the turn layer's errors."""


class ModelNotConfiguredError(TurnError):
    error_kind: ClassVar[str] = "model_not_configured"

    def __init__(self) -> None:
        super().__init__(
            "No model is configured: pass --base-url and/or --api-key (or set OPENAI_BASE_URL / OPENAI_API_KEY, "
            "and OPENAI_MODEL), or start acp-server with --offline to use the built-in offline model"
        )


class ContextWindowExceededError(TurnError):
    """The prompt cannot fit the model's context window even alone (with the system prompt), or the endpoint still
    refused it as too long once the conversation was compacted. Nothing of it is sent again: the session stays
    usable."""

    error_kind: ClassVar[str] = "context_window_exceeded"

    def __init__(self, estimate: int, window: int | None) -> None:
        window_text = f"the model's context window of {window} tokens" if window is not None else "its context window"
        super().__init__(
            f"This prompt is too large for the model: about {estimate} tokens (with the system prompt and tools) do "
            f"not fit {window_text}, even with the conversation compacted. Send a shorter prompt (a smaller file, "
            "or a part of it); the session can go on."
        )
        self.estimate = estimate
        self.window = window

    def details(self) -> Mapping[str, object]:
        out: dict[str, object] = {"estimatedTokens": self.estimate}
        if self.window is not None:
            out["contextWindow"] = self.window
        return out


class CompactionFailedError(TurnError):
    """The conversation had to be compacted before the next request, and the summary request failed: the prompt
    fails, the stored conversation is untouched (no summary is kept)."""

    error_kind: ClassVar[str] = "context_compaction_failed"

    def __init__(self, reason: str, *, retryable: bool = False) -> None:
        super().__init__(f"The conversation could not be compacted to fit the model's context window: {reason}")
        self.retryable = retryable
