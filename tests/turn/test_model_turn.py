"""``ModelTurn`` against the real openai SDK over the offline loopback model, with a recording session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import acp_server.turn._turn as turn_module
from acp_server.domain import (
    Conversation,
    ImagePart,
    Message,
    ModelStep,
    Prompt,
    ResourceLinkPart,
    ResourcePart,
    TextChunk,
    TextPart,
    ThoughtChunk,
    TurnEvent,
    UsageReported,
)
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, ChunksThenSilent, ConnectionReset, LoopbackModel
from acp_server.turn import ModelNotConfiguredError, ModelSettings, ModelTurn, to_chat_messages, user_content

pytestmark = pytest.mark.anyio

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)


class Session:
    """A ``SessionLike`` that records its journal calls, in order, with what the model had been asked by then."""

    def __init__(self, model: LoopbackModel | None, history: list[Message] | None = None, cwd: str = "/work") -> None:
        self._model = model
        self._cwd = cwd
        self._conversation = Conversation(list(history or []))
        self.calls: list[tuple[str, Any]] = []

    @property
    def cwd(self) -> str:
        return self._cwd

    @property
    def conversation(self) -> Conversation:
        return self._conversation

    mode = "default"
    model: str | None = None

    @property
    def permission_rules(self) -> dict[str, bool]:
        return {}

    async def mode_switched(self) -> None:
        await anyio.sleep_forever()  # its mode never changes

    async def record_steps(self, steps: tuple[ModelStep, ...], /) -> None:
        self.calls.append(("steps", steps))

    async def begin_turn(self, prompt: Prompt, user: Message, /) -> Conversation:
        asked = len(self._model.requests) if self._model is not None else 0
        self.calls.append(("begin", (prompt, user, asked)))
        history = Conversation(list(self._conversation.messages))
        self._conversation.messages.append(user)
        return history

    async def end_turn(self, answer: Message, /) -> None:
        self.calls.append(("end", answer))
        self._conversation.messages.append(answer)


class Events:
    """The turn's ``emit``: records events, interleaved with the session's calls."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.events: list[TurnEvent] = []
        self.on_event: Any = None

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)
        self.session.calls.append(("emit", event))
        if self.on_event is not None:
            self.on_event(len(self.events))


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


@pytest.fixture
async def turn(model: LoopbackModel) -> AsyncIterator[ModelTurn]:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="test-model", policy=NO_RETRIES))
    try:
        yield runner
    finally:
        await runner.aclose()


def text_prompt(text: str) -> Prompt:
    return Prompt((TextPart(text),))


async def test_a_turn_records_the_prompt_streams_thought_then_text_in_order_and_records_the_answer(
    model: LoopbackModel, turn: ModelTurn
) -> None:
    model.enqueue(Answer(text="one two three", reasoning="think hard"))
    history = [Message("user", "earlier"), Message("assistant", "before"), Message("assistant", "", outcome="failed")]
    session = Session(model, history)
    emit = Events(session)
    prompt = text_prompt("hello")

    assert await turn(session, prompt, emit) == "end_turn"

    # The answer is stored as message 5 (3 before it, then the prompt): its first request's thought and text are
    # a message each, every chunk of one with the same id.
    thought, text = ThoughtChunk, TextChunk
    streamed: list[TurnEvent] = [thought("think", message_id="5.0.thought"), thought(" hard", message_id="5.0.thought")]
    streamed += [text("one", message_id="5.0"), text(" two", message_id="5.0"), text(" three", message_id="5.0")]
    [usage] = [e for e in emit.events if isinstance(e, UsageReported)]
    streamed.append(usage)  # what the request used, after it (the loopback model counts words and chunks)
    assert emit.events == streamed
    assert session.calls == [
        ("begin", (prompt, Message("user", "hello"), 0)),  # recorded before the model was asked
        *[("emit", event) for event in streamed],
        ("end", Message("assistant", "one two three", "think hard", "end_turn", "complete")),
    ]
    [request] = model.requests
    assert request.body["model"] == "test-model"
    assert request.body["stream"] is True
    system = request.body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(ModelSettings().system_prompt)
    assert "\n- Working directory: /work\n" in system["content"]  # the environment follows how to work
    assert request.body["messages"][1:] == [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "before"},  # the empty failed answer is not sent
        {"role": "user", "content": "hello"},
    ]


async def test_the_user_content_is_computed_once_per_turn_and_is_what_the_model_gets_and_the_journal_stores(
    model: LoopbackModel, turn: ModelTurn, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Prompt] = []
    original = turn_module.user_content

    def counting(prompt: Prompt) -> Any:
        calls.append(prompt)
        return original(prompt)

    monkeypatch.setattr(turn_module, "user_content", counting)
    prompt = Prompt(
        (
            TextPart("look at this"),
            ResourceLinkPart("https://example.com/a.py", "a.py", "the module"),  # not a file: passed on as is
            ResourcePart("file:///p/b.txt", "B contents", "text/plain"),
            ResourcePart("file:///p/c.bin", None),
            ImagePart("iVBORw0KGgo=", "image/png"),
        )
    )
    model.enqueue(Answer(text="ok", reasoning=""))
    session = Session(model)
    assert await turn(session, prompt, Events(session)) == "end_turn"

    assert calls == [prompt]
    text = (
        "look at this\n\n[a.py](https://example.com/a.py) — the module\n\n"
        '<context uri="file:///p/b.txt">\nB contents\n</context>\n\n[binary resource: file:///p/c.bin]'
    )
    expected = [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    assert model.requests[0].body["messages"][-1] == {"role": "user", "content": expected}
    (_, (_, user, _)) = session.calls[0]
    assert user == Message("user", text)  # the journal keeps the text the model got


async def test_a_cancelled_turn_records_what_was_streamed_as_cancelled(model: LoopbackModel, turn: ModelTurn) -> None:
    model.enqueue(ChunksThenSilent(k=3))
    session = Session(model)
    emit = Events(session)
    with anyio.CancelScope() as scope:
        emit.on_event = lambda n: scope.cancel() if n == 3 else None
        await turn(session, text_prompt("alpha beta gamma delta"), emit)
    assert scope.cancelled_caught  # the cancellation propagated out of the turn
    assert emit.events == [TextChunk(t, message_id="2.0") for t in ("You", " said:", " alpha")]
    assert session.calls[-1] == ("end", Message("assistant", "You said: alpha", "", "cancelled", "cancelled"))
    assert [kind for kind, _ in session.calls].count("end") == 1
    with anyio.fail_after(5):
        await model.wait_for_disconnects(1)  # the model's stream was closed, not left hanging


async def test_a_failed_turn_records_what_was_streamed_as_failed_and_raises(
    model: LoopbackModel, turn: ModelTurn
) -> None:
    model.enqueue(ConnectionReset(after_chunks=2))
    session = Session(model)
    emit = Events(session)
    with pytest.raises(Exception) as caught:
        await turn(session, text_prompt("x y"), emit)
    assert not isinstance(caught.value, AssertionError)
    assert emit.events == [TextChunk("You", message_id="2.0"), TextChunk(" said:", message_id="2.0")]
    assert session.calls[-1] == ("end", Message("assistant", "You said:", "", None, "failed"))


@pytest.mark.parametrize(
    ("finish", "stop"), [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal")]
)
async def test_the_finish_reason_maps_to_a_stop_reason(
    model: LoopbackModel, turn: ModelTurn, finish: str, stop: str
) -> None:
    model.enqueue(Answer(text="cut", reasoning="", finish_reason=finish))
    session = Session(model)
    assert await turn(session, text_prompt("q"), Events(session)) == stop
    assert session.calls[-1] == ("end", Message("assistant", "cut", "", stop, "complete"))


async def test_an_unconfigured_model_fails_before_anything_is_recorded() -> None:
    runner = ModelTurn(ModelSettings())
    session = Session(None)
    with pytest.raises(ModelNotConfiguredError):
        await runner(session, text_prompt("q"), Events(session))
    assert session.calls == []


async def test_the_client_is_reused_across_turns(model: LoopbackModel, turn: ModelTurn) -> None:
    session = Session(model)
    for text in ("a", "b"):
        model.enqueue(Answer(text=text, reasoning=""))
        await turn(session, text_prompt(text), Events(session))
    assert [r.connection for r in model.requests] == [0, 0]  # one pooled connection
    assert model.requests[1].body["messages"][1:] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "b"},
    ]


# -- the pure helpers -------------------------------------------------------------------------------------------


def test_user_content_of_text_only_prompts_is_a_string() -> None:
    assert user_content(text_prompt("hi")) == "hi"
    assert user_content(Prompt((TextPart("a"), TextPart("b")))) == "a\n\nb"
    assert user_content(Prompt((ResourceLinkPart("u://x", "x"),))) == "[x](u://x)"


def test_user_content_with_images_is_a_text_part_then_image_parts() -> None:
    content = user_content(Prompt((ImagePart("AAA", "image/gif"), TextPart("t"), ImagePart("BBB", "image/png"))))
    assert content == [
        {"type": "text", "text": "t"},
        {"type": "image_url", "image_url": {"url": "data:image/gif;base64,AAA"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBB"}},
    ]


def test_to_chat_messages_shape() -> None:
    conversation = Conversation(
        [
            Message("user", "q1"),
            Message("assistant", "half", stop_reason="cancelled", outcome="cancelled"),
            Message("user", "q2"),
            Message("assistant", ""),
        ]
    )
    content = [{"type": "text", "text": "q3"}]
    assert to_chat_messages("sys", conversation, content) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "half"},  # kept even though it was cut short
        {"role": "user", "content": "q2"},
        {"role": "user", "content": content},
    ]
    assert to_chat_messages("s", Conversation(), "x") == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "x"},
    ]
