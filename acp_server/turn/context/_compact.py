"""Compaction: keep a turn's next request within its budget, by eliding older tool outputs, then summarising the
older turns with the same model.

Invariants: the latest turns are sent whole (the summary covers whole turns before them); a summary is kept
(``keep``) only once its request succeeded, so a failed or cancelled compaction changes nothing stored; a prompt
that cannot fit alone fails with :class:`ContextWindowExceededError` before anything is sent. A summary is bounded:
what the model returns is cut to :attr:`Budget.summary_tokens` (:data:`SUMMARY_SHARE` of the window), less when the
room under the limit is smaller, before it is stored; the previous summary takes at most half of a summary request
(cut, never a reason for the request not to fit).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal
from uuid import uuid4

from anyio import CancelScope, get_cancelled_exc_class

from ...domain import Compacted, Compacting, Compaction, CompactionStopped, Emit, Message, ModelStep, compaction_id
from .._exceptions import CompactionFailedError, ContextWindowExceededError
from ._budget import CHARS_PER_TOKEN, MESSAGE_TOKENS, Budget, messages_tokens, text_tokens
from ._view import ContextView, cut_summary, elided_output, turn_starts

__all__ = ["SUMMARY_INSTRUCTIONS", "Compactor", "summary_request"]

SUMMARY_INSTRUCTIONS = """\
You are compacting the earlier part of a conversation between a user and a coding assistant, so that the \
assistant can continue the work with your summary in place of those messages. Write the summary the assistant \
will rely on as its only memory of them. Cover, as short bullet lists under these headings:

Goal: what the user wants overall, and the current request.
Decisions: what was decided or agreed, and why; constraints and preferences the user stated.
Files: every file read, created or changed (exact paths), and what was learned or changed in each.
Commands: commands run and what they showed (failures included).
State: what is done, what is in progress, and the next step.
Open questions: what is unresolved or was asked and not answered.

Keep names, paths, numbers and error messages exact. Leave out pleasantries and anything not needed to go on. \
Do not call tools. Write only the summary, at most about {words} words."""
"""The summary request's instructions (its system message); ``{words}``: the length asked for."""

_MESSAGE_CHARS = 2_000
"""The most of one message the summary request quotes (its head and its tail)."""
_UNKNOWN_WINDOW_CHARS = 400_000
"""The most the summary request quotes in all when the window is unknown."""
_MIN_SUMMARY_TOKENS = 100
"""The least a summary is allowed, however little room the window leaves."""
_KEEP_SHARE = 0.5
"""The share of the room under the limit (beside the system prompt, the prompt, this turn's steps and the tools) the
newest turns kept whole may take; the rest is left for the summary and what comes next."""
_ELIDED_ENOUGH = 0.75
"""Elision alone is enough when it brings the request under this share of the limit; else the older turns are
summarised too, so the next turns do not compact again at once."""


def _quote(text: str) -> str:
    if len(text) <= _MESSAGE_CHARS:
        return text
    head = _MESSAGE_CHARS * 3 // 4
    tail = _MESSAGE_CHARS - head
    return f"{text[:head]}\n[… {len(text) - _MESSAGE_CHARS} characters left out …]\n{text[-tail:]}"


def _rendered(message: Message) -> str:
    lines: list[str] = []
    if message.role == "user":
        lines.append(f"USER:\n{_quote(message.content)}")
        return "\n".join(lines)
    for step in message.steps:
        if step.text:
            lines.append(f"ASSISTANT:\n{_quote(step.text)}")
        for call in step.calls:
            output = call.output if len(call.output) <= 240 else elided_output(call.output)
            lines.append(f"TOOL CALL {call.name} {_quote(call.arguments)} ({call.status}):\n{output}")
    if message.content:
        lines.append(f"ASSISTANT:\n{_quote(message.content)}")
    elif message.outcome != "complete":
        lines.append(f"ASSISTANT: (no answer: {message.outcome})")
    return "\n".join(lines)


def summary_request(
    previous: Compaction | None, messages: Sequence[Message], *, max_chars: int, words: int, instructions: str = ""
) -> list[dict[str, Any]]:
    """The messages of a plain, tool-less request for a summary of ``previous`` (if any) and ``messages``, within
    ``max_chars``: the previous summary cut to half of them at most, then the newest messages that fit (the oldest
    left out, noted). ``instructions``: what the user asked of the summary (``/compact <instructions>``), at most
    :data:`MAX_COMPACT_INSTRUCTIONS` characters of it."""
    rendered = [_rendered(message) for message in messages]
    earlier = None if previous is None else cut_summary(previous.summary, max_chars // 2)
    budget = max_chars - (len(earlier) if earlier is not None else 0)
    kept: list[str] = []
    used = 0
    for text in reversed(rendered):
        if used + len(text) > budget and kept:
            break
        kept.append(text)
        used += len(text) + 2
    kept.reverse()
    parts: list[str] = []
    if earlier is not None:
        parts.append(f"SUMMARY OF THE CONVERSATION BEFORE THESE MESSAGES:\n{earlier}")
    if len(kept) < len(rendered):
        parts.append(f"[{len(rendered) - len(kept)} earlier messages left out]")
    parts.extend(kept)
    transcript = "\n\n".join(parts)
    system = SUMMARY_INSTRUCTIONS.format(words=words)
    if instructions.strip():
        system += f"\n\nThe user asks this of the summary: {instructions.strip()[:MAX_COMPACT_INSTRUCTIONS]}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"The conversation to summarise:\n\n{transcript}\n\nWrite the summary now."},
    ]


def _stored_tokens(message: Message) -> int:
    """The estimate of a stored message as the view sends it whole."""
    total = MESSAGE_TOKENS + text_tokens(message.content)
    for step in message.steps:
        total += MESSAGE_TOKENS + text_tokens(step.text)
        for call in step.calls:
            total += 2 * MESSAGE_TOKENS + text_tokens(call.arguments) + text_tokens(call.output)
    return total


MAX_COMPACT_INSTRUCTIONS = 2000
"""Characters of ``/compact <instructions>`` the summary request carries."""

Ask = Callable[[list[dict[str, Any]]], Awaitable[str]]
"""Runs a summary request, returns the summary (raises :class:`CompactionFailedError` when it fails)."""
Keep = Callable[[Compaction], Awaitable[None]]
"""Stores a compaction as the session's latest."""


class Compactor:
    """Fits one turn's requests into their budget; the turn calls :meth:`fit` before each request.

    ``tool_tokens``: the estimate of the request's tool definitions; ``keep``: where a summary is stored (None: it
    lives for this turn only).
    """

    def __init__(self, view: ContextView, *, ask: Ask, keep: Keep | None, emit: Emit) -> None:
        self.view = view
        self._ask = ask
        self._keep = keep
        self._emit = emit
        self.outcome: Literal["compacted", "nothing", "not_smaller"] = "nothing"
        """What the last :meth:`fit` did: compacted (outputs elided or turns summarised), nothing (nothing to
        compact, or no compaction needed or able to help), or ``not_smaller`` (the summary was thrown away)."""

    def estimate(self, messages: Sequence[dict[str, Any]], budget: Budget, tool_tokens: int) -> int:
        return budget.estimate(messages_tokens(messages) + tool_tokens)

    async def fit(
        self,
        messages: list[dict[str, Any]],
        steps: Sequence[ModelStep],
        budget: Budget,
        *,
        tool_tokens: int = 0,
        reason: Literal["threshold", "refused", "requested"] = "threshold",
        instructions: str = "",
    ) -> list[dict[str, Any]]:
        """``messages`` when they fit the budget, else the view compacted until they do (elision first, then a
        summary). ``reason`` other than ``threshold`` compacts whatever the estimate (a refusal, ``/compact``).
        :attr:`outcome` says what was done.

        A summary is asked for only where it can help: the part it replaces holds more than
        :data:`_MIN_SUMMARY_TOKENS`, and (before a request) the request would fit the limit with it; a summary not
        smaller than what it replaces is thrown away (never stored, never announced as done).

        Raises :class:`ContextWindowExceededError` when the prompt's own text is larger than the window, or when
        the endpoint refused the request and nothing is left to compact. With nothing to compact, a request over
        the threshold is sent as it is (the estimate is no reason to refuse it: the endpoint decides).
        """
        view = self.view
        self.outcome = "nothing"
        estimate = self.estimate(messages, budget, tool_tokens)
        window, hard = budget.window, budget.hard_limit
        if not steps and hard is not None and budget.estimate(view.content_tokens()) > hard:
            raise ContextWindowExceededError(budget.estimate(view.prompt_tokens() + tool_tokens), window)
        if reason == "threshold" and not budget.over(estimate):
            return messages
        alone = budget.estimate(view.prompt_tokens() + messages_tokens(view.step_messages(steps)) + tool_tokens)
        through = self._through(budget, alone, everything=reason == "requested")
        if reason == "refused" and through <= view.start:  # the newest turns too, rather than fail
            through = len(view.history.messages)
        replaced = self._replaced_tokens(through)
        summarise = through > view.start and budget.estimate(replaced) > _MIN_SUMMARY_TOKENS
        limit = budget.limit
        if summarise and reason == "threshold" and limit is not None:
            projected = max(alone, estimate - budget.estimate(replaced)) + self.summary_bound(budget, alone)
            summarise = projected <= limit  # else no summary can bring the request under the limit: none is asked
        can_elide = not view.elide and view.has_elidable(steps)
        if not can_elide and not summarise:
            if reason == "refused":
                raise ContextWindowExceededError(estimate, window, prompt=budget.estimate(view.content_tokens()))
            return messages
        before = estimate
        if can_elide:  # the view only: nothing is sent or stored before the compaction is announced
            view.elide = True
            messages = view.messages(steps)
            estimate = self.estimate(messages, budget, tool_tokens)
            self.outcome = "compacted"
        enough = limit is not None and estimate <= limit * _ELIDED_ENOUGH
        summarise = summarise and (reason != "threshold" or not enough)
        # A summary's id is its stored record's (messages 1..through); outputs elided only are never stored.
        known = compaction_id(through) if summarise else f"elided-{uuid4().hex}"
        await self._emit(Compacting(reason, before, window, compaction_id=known))
        if summarise:
            try:
                kept = await self._summarise(through, budget, alone, replaced, instructions)
            except BaseException as exc:
                if isinstance(exc, get_cancelled_exc_class()):
                    stopped = CompactionStopped(known, "cancelled")
                else:
                    stopped = CompactionStopped(known, "failed", str(exc) or type(exc).__name__)
                with CancelScope(shield=True):
                    await self._emit(stopped)
                raise
            if kept:
                messages = view.messages(steps)
                estimate = self.estimate(messages, budget, tool_tokens)
                self.outcome = "compacted"
            elif self.outcome == "nothing":
                self.outcome = "not_smaller"
                error = f"The summary was not smaller than the ~{replaced} tokens it would replace: it was thrown away"
                note = f"{error}, the conversation is sent as it was.\n\n"
                await self._emit(CompactionStopped(known, "failed", error, note))
                return messages
        summary = view.history.compaction.summary if summarise and view.history.compaction is not None else ""
        await self._emit(Compacted(view.start, estimate, window, compaction_id=known, summary=summary))
        return messages

    def _replaced_tokens(self, through: int) -> int:
        """The estimate of what a summary through ``through`` replaces: the previous summary (as sent) and the
        stored messages from the view's start to ``through``."""
        view = self.view
        previous = view.compaction
        total = sum(_stored_tokens(message) for message in view.history.messages[view.start : through])
        if previous is not None:
            sent = previous.summary if view.summary_chars is None else cut_summary(previous.summary, view.summary_chars)
            total += text_tokens(sent)
        return total

    def _through(self, budget: Budget, alone: int, *, everything: bool) -> int:
        """Where the summary ends: before the newest whole turns that fit :data:`_KEEP_SHARE` of the room left
        under the limit by what every request holds (``alone``)."""
        history = self.view.history.messages
        if everything:  # /compact: every stored turn
            return len(history)
        limit = budget.limit or budget.hard_limit or 0
        room = int((limit - alone) * _KEEP_SHARE)
        keep_from = len(history)
        for start in reversed(turn_starts(history, self.view.start)):
            room -= sum(_stored_tokens(message) for message in history[start:keep_from])
            if room < 0:
                break
            keep_from = start
        return keep_from

    @staticmethod
    def summary_bound(budget: Budget, alone: int) -> int:
        """The most tokens a summary may take: :attr:`Budget.summary_tokens`, at most half the room under the limit
        beside what every request holds (``alone``), never under :data:`_MIN_SUMMARY_TOKENS`."""
        bound = budget.summary_tokens
        limit = budget.limit or budget.hard_limit
        if limit is not None:
            bound = min(bound, (limit - alone) // 2)
        return max(bound, _MIN_SUMMARY_TOKENS)

    async def _summarise(
        self, through: int, budget: Budget, alone: int, replaced: int, instructions: str = ""
    ) -> bool:
        """Ask for a summary of the view's messages up to ``through`` and keep it — unless it is not smaller than
        the ``replaced`` tokens: then nothing is kept (False)."""
        view = self.view
        window = budget.window
        max_chars = _UNKNOWN_WINDOW_CHARS if window is None else max(window // 2, 256) * CHARS_PER_TOKEN
        bound = self.summary_bound(budget, alone)
        words = max(50, min(1500, bound // 2))
        request = summary_request(
            view.compaction,
            view.history.messages[view.start : through],
            max_chars=max_chars,
            words=words,
            instructions=instructions,
        )
        summary = cut_summary((await self._ask(request)).strip(), bound * CHARS_PER_TOKEN)
        if not summary:
            raise CompactionFailedError("the model answered the summary request with nothing")
        if text_tokens(summary) >= replaced:
            return False
        compaction = Compaction(through, summary)
        if self._keep is not None:
            await self._keep(compaction)
        view.history.compaction = compaction
        return True
