"""What one turn has made so far, and the message ids its streamed text and thought carry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..domain import Message, ModelStep, Outcome, StopReason, ToolCallRecord, answer_message_id

if TYPE_CHECKING:
    from ._compaction import TurnContext

__all__ = ["Answer"]


class Answer:
    """What the turn has made so far: the finished tool steps, and the request being streamed; the message ids of
    that request's text and thought (the answer is stored as ``seq``)."""

    __slots__ = ("calls", "context", "reasoning", "seq", "steps", "text", "text_id", "thought_id")

    def __init__(self, seq: int) -> None:
        self.context: TurnContext | None = None  # set once the turn's view is built: its last usage is stored
        self.seq = seq
        self.steps: list[ModelStep] = []
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCallRecord] | None = None  # the ended calls of the step being run
        self.text_id = answer_message_id(seq, 0, "text")
        self.thought_id = answer_message_id(seq, 0, "thought")

    def step(self) -> ModelStep:
        return ModelStep("".join(self.text), "".join(self.reasoning), tuple(self.calls or ()))

    def next_request(self) -> None:
        self.text, self.reasoning, self.calls = [], [], None
        step = len(self.steps)
        self.text_id = answer_message_id(self.seq, step, "text")
        self.thought_id = answer_message_id(self.seq, step, "thought")

    def message(self, stop_reason: StopReason | None, outcome: Outcome) -> Message:
        """The answer to store: finished steps, the step cut short (if its calls had begun), the text streamed —
        without the images the calls returned (they lived for this turn only)."""
        steps = [step.without_images() for step in self.steps]
        if self.calls is not None:
            steps.append(self.step().without_images())
            content, reasoning = "", ""
        else:
            content, reasoning = "".join(self.text), "".join(self.reasoning)
        usage = None if self.context is None else self.context.usage
        return Message("assistant", content, reasoning, stop_reason, outcome, tuple(steps), usage)
