"""A small one-shot cancel flag a caller can hand to ``SessionBridge.send_prompt``."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CancelSignal"]


class CancelSignal:
    """Once set, stays set; ``set()`` runs the subscribed callbacks synchronously, in order, no checkpoint.

    The bridge refuses a prompt whose signal is already set (before counting it); a signal set later cancels
    the prompt exactly like ``PromptHandle.cancel()``. One signal may guard many prompts (one per connection).
    """

    __slots__ = ("_callbacks", "_is_set", "_next_key")

    def __init__(self) -> None:
        self._is_set = False
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_key = 0

    def is_set(self) -> bool:
        return self._is_set

    def set(self) -> None:
        if self._is_set:
            return
        self._is_set = True
        callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when the signal is set (now if it already is); return an unsubscribe."""
        if self._is_set:
            callback()
            return _noop
        key = self._next_key
        self._next_key += 1
        self._callbacks[key] = callback

        def unsubscribe() -> None:
            self._callbacks.pop(key, None)

        return unsubscribe

    def __repr__(self) -> str:
        return f"<CancelSignal {'set' if self._is_set else 'unset'}>"


def _noop() -> None:
    return None
