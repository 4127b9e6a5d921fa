"""Errors of the turn layer.

    ServerError
     └── TurnError
          ├── ModelNotConfiguredError      no base URL and no API key: nothing to talk to
          ├── ContextWindowExceededError   a prompt too large for the model's window, even alone
          ├── ContextWindowTooSmallError   the window has no room for a prompt beside the instructions and tools
          └── CompactionFailedError        the summary request of a needed compaction failed
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..errors import ServerError

__all__ = [
    "CompactionFailedError",
    "ContextWindowExceededError",
    "ContextWindowTooSmallError",
    "ModelNotConfiguredError",
    "TurnError",
]


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

    def __init__(self, estimate: int, window: int | None, *, prompt: int | None = None) -> None:
        """``prompt``: the prompt's own tokens when known; a prompt under half the ``estimate`` is not what takes the
        room, and the message does not advise a shorter one."""
        window_text = f"the model's context window of {window} tokens" if window is not None else "its context window"
        if prompt is None or 2 * prompt >= estimate:
            text = (
                f"This prompt is too large for the model: about {estimate} tokens (with the system prompt and tools) "
                f"do not fit {window_text}, even with the conversation compacted. Send a shorter prompt (a smaller "
                "file, or a part of it); the session can go on."
            )
        else:
            text = (
                f"The model refused the request as too long: about {estimate} tokens (the system prompt, tools and "
                f"conversation; the prompt itself about {prompt}) do not fit {window_text}, and nothing is left to "
                "compact. A larger context window would help; the session can go on."
            )
        super().__init__(text)
        self.estimate = estimate
        self.window = window

    def details(self) -> Mapping[str, object]:
        out: dict[str, object] = {"estimatedTokens": self.estimate}
        if self.window is not None:
            out["contextWindow"] = self.window
        return out


class ContextWindowTooSmallError(TurnError):
    """The window cannot hold what every request of the session holds — the instructions, the tools offered, a
    minimal prompt and the answer's room — so no prompt can work, whatever its size: raised before anything is sent
    (no summary request either). ``parts``: what takes the room, ``(what, tokens)``; ``advice``: what would help."""

    error_kind: ClassVar[str] = "context_window_too_small"

    def __init__(
        self, window: int, needed: int, parts: tuple[tuple[str, int], ...], advice: tuple[str, ...], text: str
    ) -> None:
        super().__init__(text)
        self.window = window
        self.needed = needed
        self.parts = parts
        self.advice = advice

    def details(self) -> Mapping[str, object]:
        return {
            "contextWindow": self.window,
            "neededTokens": self.needed,
            "parts": [{"what": what, "tokens": tokens} for what, tokens in self.parts],
            "advice": list(self.advice),
        }


class CompactionFailedError(TurnError):
    """The conversation had to be compacted before the next request, and the summary request failed: the prompt
    fails, the stored conversation is untouched (no summary is kept)."""

    error_kind: ClassVar[str] = "context_compaction_failed"

    def __init__(self, reason: str, *, retryable: bool = False) -> None:
        super().__init__(f"The conversation could not be compacted to fit the model's context window: {reason}")
        self.retryable = retryable
