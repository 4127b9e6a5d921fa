"""A tool's question answered by the same model over a text the tool brought back, in one tool-less side request
(``web_fetch`` with a ``prompt``): the parent's window pays only for the answer.

Invariants: the side request carries no tools and no history (the question and the text alone), runs under the
same stream policy as any request (watchdog, retries) and is cancelled with the prompt; its answer is cut at
:data:`MAX_SIDE_ANSWER_CHARS`; a failure of the model is told in the call's output, never ends the prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..pipeline import ChatRequest, Delta, ModelTurnError, StreamPolicy, run_chat

__all__ = ["MAX_SIDE_ANSWER_CHARS", "SideAsk", "side_answer"]

MAX_SIDE_ANSWER_CHARS = 16_000

SideAsk = Callable[[str, str], Awaitable[str]]
"""Answers ``(question, text)`` with the session's model."""

_SYSTEM = (
    "Answer the question from the document below only, concisely. Quote exact figures, names and code when they "
    "matter. If the document does not say, answer that it does not."
)


async def side_answer(client: Any, model: str, policy: StreamPolicy, question: str, text: str) -> str:
    """The model's answer to ``question`` over ``text`` (see the module's invariants)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": f"<document>\n{text}\n</document>\n\nQuestion: {question}"},
    ]
    parts: list[str] = []
    size = 0

    async def on_delta(delta: Delta) -> None:
        nonlocal size
        if delta.text and size < MAX_SIDE_ANSWER_CHARS:
            parts.append(delta.text)
            size += len(delta.text)

    try:
        await run_chat(client, ChatRequest(model, messages), policy, on_delta)
    except ModelTurnError as exc:
        return f"(the question could not be answered: {exc})"
    return "".join(parts)[:MAX_SIDE_ANSWER_CHARS]
