"""A model turn: the session's conversation plus a prompt become one streamed chat request."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..domain import (
    Conversation,
    Emit,
    ImagePart,
    Message,
    Outcome,
    Prompt,
    ResourceLinkPart,
    ResourcePart,
    StopReason,
    TextChunk,
    TextPart,
    ThoughtChunk,
)
from ..pipeline import ChatRequest, Delta, StreamPolicy, run_chat
from ._exceptions import ModelNotConfiguredError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ModelSettings", "ModelTurn", "SessionLike", "to_chat_messages", "user_content"]

logger = logging.getLogger("acp_server.turn")

_STOP_REASONS: dict[str | None, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_calls": "end_turn",
}
"""Finish reasons as stop reasons; any other reason the model gives ends the turn normally (``end_turn``)."""


class SessionLike(Protocol):
    """What a turn needs of a session: where it works, and the journal of its history.

    ``begin_turn`` records the prompt and returns the history before it (what the model gets); ``end_turn``
    records the answer. Each is called once per turn, in that order, by the turn that holds the session's FIFO.
    """

    @property
    def cwd(self) -> str: ...

    @property
    def conversation(self) -> Conversation: ...

    async def begin_turn(self, prompt: Prompt, user: Message, /) -> Conversation: ...

    async def end_turn(self, answer: Message, /) -> None: ...


@dataclass(frozen=True)
class ModelSettings:
    """Where the model is and how its streams are guarded. ``api_key`` is a secret: never logged."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str = "gpt-4o-mini"
    policy: StreamPolicy = field(default_factory=StreamPolicy)
    system_prompt: str = "You are a helpful coding assistant working in the user's project at {cwd}."

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)


def user_content(prompt: Prompt) -> str | list[dict[str, Any]]:
    """The prompt as the content of one OpenAI user message: its text parts (links and embedded resources
    written as text), plus ``image_url`` parts when it has images."""
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for part in prompt.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ResourceLinkPart):
            texts.append(f"[{part.name}]({part.uri})" + (f" — {part.description}" if part.description else ""))
        elif isinstance(part, ResourcePart):
            if part.text is None:
                texts.append(f"[binary resource: {part.uri}]")
            else:
                texts.append(f'<context uri="{part.uri}">\n{part.text}\n</context>')
        elif isinstance(part, ImagePart):
            images.append({"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}})
    text = "\n\n".join(texts)
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def to_chat_messages(
    system: str, conversation: Conversation, content: str | list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """OpenAI chat messages: system, then the history (answers kept even if cut short), then the user's
    ``content`` (see :func:`user_content`)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in conversation.messages:
        if message.content:
            messages.append({"role": message.role, "content": message.content})
    messages.append({"role": "user", "content": content})
    return messages


class ModelTurn:
    """Runs turns against one OpenAI-compatible endpoint; the HTTP client is created on first use and reused."""

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._client: AsyncOpenAI | None = None

    def _get_client(self) -> AsyncOpenAI:
        if not self.settings.configured:
            raise ModelNotConfiguredError()
        if self._client is None:
            from ..provider import make_openai_client

            self._client = make_openai_client(base_url=self.settings.base_url, api_key=self.settings.api_key)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with anyio.CancelScope(shield=True):
                await client.close()

    async def __call__(self, session: SessionLike, prompt: Prompt, emit: Emit) -> StopReason:
        """Stream one answer. The session's journal gains the prompt before the model is asked, and whatever was
        streamed when the turn ends, marked with its outcome (``complete``, ``failed``, ``cancelled``).

        The answer is recorded even when the turn is cancelled (shielded); a failure to record it is raised only
        when the turn itself succeeded, so it never hides the turn's own error or cancellation.

        ``emit`` is the prompt's event stream: awaiting it is the reader's backpressure. It runs inside the
        pipeline's per-attempt lifetime scope (:func:`run_chat`), so a reader that stops reading cannot hold the
        model request open past ``--stream-max-lifetime-ms``: the turn then fails with the lifetime error.
        """
        client = self._get_client()
        content = user_content(prompt)  # once per turn: what the model gets, and (its text) what is stored
        user = Message("user", content if isinstance(content, str) else content[0]["text"])
        history = await session.begin_turn(prompt, user)
        answer: list[str] = []
        reasoning: list[str] = []
        stop_reason: StopReason = "end_turn"

        async def on_delta(delta: Delta) -> None:
            if delta.reasoning:
                reasoning.append(delta.reasoning)
                await emit(ThoughtChunk(delta.reasoning))
            if delta.text:
                answer.append(delta.text)
                await emit(TextChunk(delta.text))

        try:
            request = ChatRequest(
                model=self.settings.model,
                messages=to_chat_messages(self.settings.system_prompt.format(cwd=session.cwd), history, content),
            )
            finished = await run_chat(client, request, self.settings.policy, on_delta)
            stop_reason = _STOP_REASONS.get(finished.finish_reason, "end_turn")
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            outcome: Outcome = "cancelled" if cancelled else "failed"
            stopped: StopReason | None = "cancelled" if cancelled else None
            cut = Message("assistant", "".join(answer), "".join(reasoning), stopped, outcome)
            with anyio.CancelScope(shield=True):
                try:
                    await session.end_turn(cut)
                except Exception:
                    logger.exception("could not record the %s answer of a turn", outcome)
            raise
        with anyio.CancelScope(shield=True):
            await session.end_turn(Message("assistant", "".join(answer), "".join(reasoning), stop_reason, "complete"))
        return stop_reason
