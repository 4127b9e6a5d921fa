"""What the model sees of a session for one turn: the system prompt (with the compaction summary, if any), the
turns after the summary, the prompt, and the turn's own tool steps so far.

Two rules shrink it, never the stored conversation: older tool outputs are elided (:attr:`ContextView.elide`: the
call stays, with a one-line note of what it returned), and a stored prompt too large for the window on its own is
replaced by a note (it failed once; it is never sent again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...domain import Compaction, Conversation, Message, ModelStep
from ._budget import message_tokens, text_tokens
from ._messages import step_messages

__all__ = ["KEEP_WHOLE_TURNS", "ContextView", "cut_summary", "elided_output", "turn_starts"]

KEEP_WHOLE_TURNS = 2
"""The latest turns whose tool outputs are never elided."""

_FIRST_LINE = 120


def elided_output(output: str) -> str:
    """The one-line note that stands for a tool output in older turns."""
    lines = output.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    if len(first) > _FIRST_LINE:
        first = first[: _FIRST_LINE - 1] + "…"
    return (
        f"[output elided to save context: {len(output)} characters, {len(lines)} lines; first line: {first!r}. "
        "Call the tool again if you need it.]"
    )


def cut_summary(summary: str, max_chars: int) -> str:
    """``summary`` when it holds at most ``max_chars`` characters, else its head, noted as cut, within them."""
    if len(summary) <= max_chars:
        return summary
    note = f"\n[… the summary was cut: {len(summary) - max_chars} more characters left out …]"
    return summary[: max(max_chars - len(note), 0)] + note


def _elided(step: ModelStep) -> ModelStep:
    """``step`` with each output longer than its note replaced by the note, and no images (their notes stay in the
    outputs)."""
    calls = tuple(
        call if len(call.output) <= _FIRST_LINE * 2 else dataclasses.replace(call, output=elided_output(call.output))
        for call in step.calls
    )
    return ModelStep(step.text, step.reasoning, tuple(c.without_images() for c in calls))


def turn_starts(messages: Sequence[Message], start: int = 0) -> list[int]:
    """The indexes from ``start`` on where a turn begins (a user message after an answer, or the first)."""
    return [
        i
        for i in range(start, len(messages))
        if messages[i].role == "user" and (i == start or messages[i - 1].role == "assistant")
    ]


def _too_large_note(tokens: int) -> str:
    return f"[A prompt of about {tokens} tokens was here: too large for the model's context window, it was not sent.]"


class ContextView:
    """The messages of one turn's requests, built from the session's ``history`` (the stored messages before the
    prompt, and its compaction) and the prompt's ``content``.

    ``oversize``: a stored user message estimated above it is sent as a note (None: every message is sent);
    ``summary_chars``: the most of the stored summary sent (a summary stored larger — by a runaway model, before
    summaries were bounded — is cut, so it never makes the session's requests too large).
    """

    def __init__(
        self,
        system: str,
        history: Conversation,
        content: str | list[dict[str, Any]],
        *,
        oversize: int | None = None,
    ) -> None:
        self.system = system
        self.history = history
        self.content = content
        self.oversize = oversize
        self.summary_chars: int | None = None
        self.elide = False
        self._prompt = {"role": "user", "content": content}

    @property
    def compaction(self) -> Compaction | None:
        return self.history.compaction

    @property
    def start(self) -> int:
        """The index of the first stored message sent verbatim (those before it are summarised)."""
        compaction = self.compaction
        return 0 if compaction is None else min(compaction.through, len(self.history.messages))

    def system_message(self) -> dict[str, Any]:
        compaction = self.compaction
        if compaction is None:
            return {"role": "system", "content": self.system}
        text = compaction.summary if self.summary_chars is None else cut_summary(compaction.summary, self.summary_chars)
        summary = (
            f"{self.system}\n\n<conversation_summary messages=\"1-{compaction.through}\">\n"
            "The earlier part of this conversation was compacted into this summary:\n"
            f"{text}\n</conversation_summary>"
        )
        return {"role": "system", "content": summary}

    def history_messages(self) -> list[dict[str, Any]]:
        """The stored messages after the summary, in chat terms (answers kept even if cut short, each answer's
        tool steps before its text); older tool outputs elided when :attr:`elide` is set."""
        messages = self.history.messages
        start = self.start
        starts = turn_starts(messages, start)
        whole_from = starts[-KEEP_WHOLE_TURNS] if len(starts) >= KEEP_WHOLE_TURNS else start
        out: list[dict[str, Any]] = []
        for index in range(start, len(messages)):
            message = messages[index]
            elide = self.elide and index < whole_from
            for step in message.steps:
                out.extend(step_messages(_elided(step) if elide else step))
            if not message.content:
                continue
            if message.role == "user" and self.oversize is not None:
                tokens = text_tokens(message.content)
                if tokens > self.oversize:
                    out.append({"role": "user", "content": _too_large_note(tokens)})
                    continue
            out.append({"role": message.role, "content": message.content})
        return out

    def step_messages(self, steps: Sequence[ModelStep]) -> list[dict[str, Any]]:
        """The turn's own steps so far; with :attr:`elide`, all but the last one's outputs elided."""
        out: list[dict[str, Any]] = []
        last = len(steps) - 1
        for i, step in enumerate(steps):
            out.extend(step_messages(_elided(step) if self.elide and i < last else step))
        return out

    def messages(self, steps: Sequence[ModelStep] = ()) -> list[dict[str, Any]]:
        """Every message of the next request: system, history, prompt, this turn's steps."""
        return [self.system_message(), *self.history_messages(), self._prompt, *self.step_messages(steps)]

    def has_elidable(self, steps: Sequence[ModelStep]) -> bool:
        """Whether eliding would shrink anything: an output of an older turn, or of this turn's older steps."""
        messages = self.history.messages
        starts = turn_starts(messages, self.start)
        whole_from = starts[-KEEP_WHOLE_TURNS] if len(starts) >= KEEP_WHOLE_TURNS else self.start
        older = (step for message in messages[self.start : whole_from] for step in message.steps)
        return any(_elided(step) != step for step in (*older, *steps[:-1]))

    def content_tokens(self) -> int:
        """The estimate of the prompt's own content."""
        return message_tokens(self._prompt)

    def prompt_tokens(self) -> int:
        """The estimate of the system prompt and the prompt alone (what no compaction can shrink)."""
        return message_tokens({"role": "system", "content": self.system}) + message_tokens(self._prompt)
