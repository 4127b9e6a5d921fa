"""What a finished request's stream reported of its size."""

from __future__ import annotations

from collections.abc import Mapping

from ..pipeline import Finished

__all__ = ["usage_of"]


def usage_of(finished: Finished) -> tuple[int, int] | None:
    """``(prompt, completion)`` tokens of a finished request as its stream reported them; None when it did not."""
    usage = finished.usage
    if not isinstance(usage, Mapping):
        return None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    prompt, completion, total = count("prompt_tokens"), count("completion_tokens"), count("total_tokens")
    if prompt is None and completion is None:
        return None if total is None else (total, 0)
    return prompt or 0, completion or 0
