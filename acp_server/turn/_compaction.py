"""A turn's hold on its context: the view its requests are built from, the budget of each request, compaction before
a request that would not fit, and one retry after a refusal for length.

Invariants: every request of a turn is fitted before it is sent; a refusal for length is retried once, compacted
(the window learned when the refusal states it); a second refusal, or a prompt that cannot fit alone, fails the
prompt with :class:`ContextWindowExceededError`. The summary request runs inside the turn (its cancel scope and
deadline, the pipeline's watchdog and retries), so it never takes another queue slot.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..domain import Compaction, ContextUsage, Conversation, Emit, ModelStep
from ..pipeline import ChatRequest, Delta, Finished, ModelHTTPError, ModelTurnError, StreamPolicy, run_chat
from ._exceptions import CompactionFailedError, ContextWindowExceededError
from ._models import ModelCatalog
from ._notices import window_notice
from .context import (
    CHARS_PER_TOKEN,
    Budget,
    Compactor,
    ContextView,
    context_refusal,
    messages_tokens,
    text_tokens,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["CompactOutcome", "KeepsCompactions", "TurnContext", "summary_text"]

logger = logging.getLogger("acp_server.turn")


@dataclass(frozen=True, slots=True)
class CompactOutcome:
    """What a compaction on demand (``/compact``) did: ``done`` is ``compacted`` (its notes were emitted),
    ``nothing`` (nothing to compact yet) or ``not_smaller`` (the summary was thrown away); ``estimate`` the tokens
    the next request holds, ``window`` the context window when known."""

    done: Literal["compacted", "nothing", "not_smaller"]
    estimate: int
    window: int | None

    @property
    def text(self) -> str | None:
        """What the user is answered; None when the compaction's own notes said it."""
        size = f"about {self.estimate} tokens" + (f" of a {self.window}-token window" if self.window else "")
        if self.done == "nothing":
            return f"Nothing to compact yet: the conversation is {size}."
        if self.done == "not_smaller":
            return f"Nothing compacted: a summary would not be smaller than the conversation ({size})."
        return None


@runtime_checkable
class KeepsCompactions(Protocol):
    """A session that stores its compactions (the bridge's do); one that does not compacts for one turn only."""

    async def record_compaction(self, compaction: Compaction, /) -> None: ...


class TurnContext:
    """One turn's requests, kept within the window of the model they go to.

    ``ask`` runs a tool-less summary request with a model; ``threshold`` is the compaction threshold in percent.
    """

    def __init__(
        self,
        view: ContextView,
        *,
        catalog: ModelCatalog,
        threshold: int,
        session: object,
        emit: Emit,
        ask: Callable[[str, list[dict[str, Any]]], Awaitable[str]],
    ) -> None:
        self.view = view
        self._catalog = catalog
        self._threshold = threshold
        self._ask = ask
        self._model = ""
        keep = session.record_compaction if isinstance(session, KeepsCompactions) else None
        self._compactor = Compactor(view, ask=self._ask_model, keep=keep, emit=emit)
        self._emit = emit
        self._usage = _last_usage(view.history)
        self.usage: ContextUsage | None = None  # the last request's, as the endpoint reported it

    async def _ask_model(self, messages: list[dict[str, Any]]) -> str:
        return await self._ask(self._model, messages)

    def budget(self, model: str) -> Budget:
        return Budget.calibrated(self._catalog.budget_window(model), self._threshold, self.usage or self._usage)

    def oversize(self, model: str) -> int | None:
        """The estimate past which a stored prompt is never sent again: more than the window has room for beside
        the system prompt."""
        hard = self.budget(model).hard_limit
        return None if hard is None else hard - text_tokens(self.view.system)

    async def send(
        self,
        messages: list[dict[str, Any]],
        steps: tuple[ModelStep, ...] | list[ModelStep],
        model: str,
        tool_tokens: int,
        request: Callable[[list[dict[str, Any]]], Awaitable[Finished]],
    ) -> tuple[list[dict[str, Any]], Finished]:
        """Fit ``messages`` (compacting when needed), send them with ``request``; on a refusal for length, learn,
        compact and send once more. Returns the messages sent and the finished request."""
        self._model = model
        oversize = self.oversize(model)
        if oversize != self.view.oversize or self.view.elide:
            # the first request or another model (a prompt too large is left out), or eliding: the step before the
            # newest is now an older one
            self.view.oversize = oversize
            messages = self.view.messages(steps)
        budget = self.budget(model)
        summary_chars = budget.summary_tokens * CHARS_PER_TOKEN
        if summary_chars != self.view.summary_chars:  # a stored summary larger than the bound is sent cut
            self.view.summary_chars = summary_chars
            messages = self.view.messages(steps)
        messages = await self._compactor.fit(messages, steps, budget, tool_tokens=tool_tokens)
        try:
            finished = await request(messages)
        except ModelHTTPError as exc:
            refusal = context_refusal(exc)
            if refusal is None:
                raise
            estimate = self._compactor.estimate(messages, budget, tool_tokens)
            logger.warning("the endpoint refused a request of ~%d tokens as too long (%s)", estimate, exc)
            if refusal.window is not None and self._catalog.learn_window(model, refusal.window):
                await self._emit(window_notice(model, refusal.window))
            budget = self.budget(model)
            self.view.oversize = self.oversize(model)
            self.view.summary_chars = budget.summary_tokens * CHARS_PER_TOKEN
            messages = self.view.messages(steps)
            messages = await self._compactor.fit(messages, steps, budget, tool_tokens=tool_tokens, reason="refused")
            try:
                finished = await request(messages)
            except ModelHTTPError as again:
                if context_refusal(again) is None:
                    raise
                estimate = self._compactor.estimate(messages, budget, tool_tokens)
                prompt = budget.estimate(self.view.content_tokens())
                raise ContextWindowExceededError(estimate, budget.window, prompt=prompt) from again
        self._note_usage(model, finished, messages, tool_tokens)
        return messages, finished

    def _note_usage(self, model: str, finished: Finished, messages: list[dict[str, Any]], tool_tokens: int) -> None:
        """Keep the reported usage (the estimate's correction), and tell the catalog how large a request ``model``
        accepted: the reported prompt tokens, else the estimate."""
        usage = finished.usage
        prompt = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
        estimate = messages_tokens(messages) + tool_tokens
        if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt > 0:
            self.usage = ContextUsage(prompt, estimate)
            self._catalog.note_accepted(model, prompt)
        else:
            self._catalog.note_accepted(model, estimate)

    async def compact(self, model: str, tool_tokens: int, instructions: str = "") -> CompactOutcome:
        """Compact now, whatever the estimate (``/compact``): every stored turn is summarised, when there is enough
        to summarise and the summary is smaller; ``instructions`` go to the summary request."""
        self._model = model
        budget = self.budget(model)
        self.view.summary_chars = budget.summary_tokens * CHARS_PER_TOKEN
        messages = self.view.messages()
        requested = partial(self._compactor.fit, reason="requested", instructions=instructions)
        messages = await requested(messages, (), budget, tool_tokens=tool_tokens)
        estimate = self._compactor.estimate(messages, budget, tool_tokens)
        return CompactOutcome(self._compactor.outcome, estimate, budget.window)


async def summary_text(client: AsyncOpenAI, model: str, messages: list[dict[str, Any]], *, policy: StreamPolicy) -> str:
    """The text of one plain, tool-less request (a compaction's summary), guarded like any request (watchdog,
    retries); its failure is a :class:`CompactionFailedError`, the model's error chained."""
    text: list[str] = []

    async def on_delta(delta: Delta) -> None:
        if delta.text:
            text.append(delta.text)

    try:
        await run_chat(client, ChatRequest(model, messages), policy, on_delta)
    except ModelTurnError as exc:
        raise CompactionFailedError(f"the summary request failed: {exc}", retryable=exc.retryable) from exc
    return "".join(text)


def _last_usage(history: Conversation) -> ContextUsage | None:
    for message in reversed(history.messages):
        if message.usage is not None:
            return message.usage
    return None
