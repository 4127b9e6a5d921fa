"""A session's FIFO: the prompts (and forks) waiting in admission order, the one running, and its worker's flag.

Invariants:
- ``pending`` = waiting prompts + the running one; :meth:`admit` counts a prompt, :meth:`settle` releases it,
  exactly once per prompt (a second release is a bug and asserts);
- items leave in the order they came (:meth:`take`), except those settled or abandoned while waiting;
- at most one worker runs the FIFO (:meth:`claim_worker` / :meth:`release_worker`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

from ._prompt import Cause, PromptJob

__all__ = ["Fifo", "Queued"]


class Queued(Protocol):
    """What the FIFO needs of a fork waiting in it: its place in the queue."""

    @property
    def key(self) -> int: ...


F = TypeVar("F", bound=Queued)


class Fifo(Generic[F]):
    """The queue of one session (see the module's invariants); ``F`` is the type of its fork requests."""

    __slots__ = ("_items", "_pending", "_running", "_worker")

    def __init__(self) -> None:
        self._items: OrderedDict[int, PromptJob | F] = OrderedDict()
        self._pending = 0
        self._running: PromptJob | None = None
        self._worker = False

    @property
    def pending(self) -> int:
        """Waiting prompts plus the running one (forks are not counted)."""
        return self._pending

    @property
    def running(self) -> PromptJob | None:
        return self._running

    def __bool__(self) -> bool:
        """Whether anything waits."""
        return bool(self._items)

    def admit(self, job: PromptJob) -> None:
        """Count the prompt, then queue it."""
        self._pending += 1
        self._items[job.key] = job

    def enqueue_fork(self, fork: F) -> None:
        self._items[fork.key] = fork

    def withdraw(self, item: PromptJob | F) -> None:
        """Take a waiting item out without running it (a fork whose caller left). Counts are untouched."""
        self._items.pop(item.key, None)

    def take(self) -> PromptJob | F | None:
        """The next item, in order; a prompt becomes the running one. None when nothing waits."""
        if not self._items:
            return None
        _, item = self._items.popitem(last=False)
        if isinstance(item, PromptJob):
            self._running = item
        return item

    def settle(self, job: PromptJob) -> None:
        """A prompt ended (waiting or running): it leaves the queue and releases its count, exactly once."""
        self._items.pop(job.key, None)
        if self._running is job:
            self._running = None
        assert self._pending > 0, "a prompt slot was released twice"
        self._pending -= 1

    def cancel_prompts(self) -> int:
        """Cancel every prompt: the waiting ones leave the queue first (so that the running one's end starts none of
        them), then the running one is interrupted; each settles ``cancelled``. Forks keep their place. Returns how
        many prompts were pending."""
        waiting = [item for item in self._items.values() if isinstance(item, PromptJob)]
        for job in waiting:
            job.interrupt(Cause.CANCELLED)
        if self._running is not None:
            self._running.interrupt(Cause.CANCELLED)
            return len(waiting) + 1
        return len(waiting)

    def drain(self) -> list[PromptJob | F]:
        """Everything waiting, in order; the queue is left empty (the running prompt stays)."""
        items = list(self._items.values())
        self._items.clear()
        return items

    def claim_worker(self) -> bool:
        """True if the caller must start the worker (none runs); the worker calls :meth:`release_worker` at exit."""
        if self._worker:
            return False
        self._worker = True
        return True

    def release_worker(self) -> None:
        self._worker = False

    def __repr__(self) -> str:
        return f"<Fifo pending={self._pending} waiting={len(self._items)} running={self._running is not None}>"
