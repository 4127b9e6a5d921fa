"""The model catalog and what a turn does with it, against the real openai SDK over the loopback model: the model
list from ``GET /v1/models`` (bounded, failure-tolerant), the session's model read before each request, usage asked
for and reported after each request (with a known window only), and an endpoint that refuses ``stream_options``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from acp_server.domain import Conversation, Message, Prompt, TextPart, UsageReported
from acp_server.pipeline import Finished, ModelHTTPError, StreamPolicy
from acp_server.provider.offline import Answer, ErrorStatus, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.turn import ModelCatalog, ModelSettings, ModelTurn, family_context_window, usage_of

from .test_model_turn import Events, Session

pytestmark = pytest.mark.anyio

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


def _turn(model: LoopbackModel, **settings: object) -> ModelTurn:
    return ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES, **settings))  # type: ignore[arg-type]


def _prompt(text: str) -> Prompt:
    return Prompt((TextPart(text),))


# -- the catalog ---------------------------------------------------------------------------------------------


def test_the_default_is_offered_first_and_alone_until_a_list_arrives() -> None:
    catalog = ModelCatalog("m")
    assert (catalog.available, catalog.final) == (("m",), False)
    catalog.learn([{"id": "a"}, {"id": "m"}, {"id": "b"}, {"id": ""}, {"object": "model"}])
    assert (catalog.available, catalog.final) == (("m", "a", "b"), True)
    catalog.learn([{"id": "late"}])  # the list changes once only
    assert catalog.available == ("m", "a", "b")


def test_a_configured_list_is_final_and_keeps_the_default_first() -> None:
    catalog = ModelCatalog("gpt-4o", ("o3", "gpt-4o", "o3"))
    assert (catalog.available, catalog.final, catalog.configured) == (("gpt-4o", "o3"), True, True)


def test_a_stored_choice_not_offered_reads_as_the_default_until_it_is() -> None:
    catalog = ModelCatalog("m")
    assert catalog.resolve(None) == catalog.resolve("big") == "m"
    catalog.learn([{"id": "big"}])
    assert catalog.resolve("big") == "big"  # the stored choice was kept: now it applies


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "context_length": 65536}, 65536),  # OpenRouter, Together
        ({"id": "m", "top_provider": {"context_length": 32000}}, 32000),  # OpenRouter's routed provider
        ({"id": "m", "context_window": 131072}, 131072),  # Groq
        ({"id": "m", "max_model_len": 32768}, 32768),  # vLLM
        ({"id": "m", "meta": {"n_ctx": 8192, "n_ctx_train": 131072, "n_vocab": 49152}}, 8192),  # llama-server
        ({"id": "m", "max_context_length": 4096, "state": "loaded"}, 4096),  # LM Studio's own list, Mistral
        ({"id": "m", "meta": {"n_ctx_train": 131072}}, None),  # what the model was trained for, not what is served
        ({"id": "m", "meta": "n_ctx=8192"}, None),
        ({"id": "m", "meta": {"n_ctx": True}, "context_length": 0}, None),
        ({"id": "m", "owned_by": "library"}, None),  # Ollama's /v1/models
    ],
)
def test_the_window_is_read_from_every_model_list_shape(entry: dict[str, object], window: int | None) -> None:
    catalog = ModelCatalog("m")
    catalog.learn([entry])
    assert catalog.context_window("m") == window


def test_context_windows_are_configured_reported_or_documented_never_guessed() -> None:
    catalog = ModelCatalog("m")
    catalog.learn([{"id": "served", "max_model_len": 32768}, {"id": "routed", "context_length": 65536}])
    assert catalog.context_window("served") == 32768
    assert catalog.context_window("routed") == 65536
    assert catalog.context_window("gpt-4o-mini-2024-07-18") == 128_000
    assert catalog.context_window("openai/gpt-4.1-nano") == 1_047_576
    assert catalog.context_window("m") is None
    assert catalog.context_window("llama3.1:8b") is None  # a local model's window is its server's setting
    assert ModelCatalog("m", context_window=8000).context_window("gpt-4o") == 8000


def test_family_windows_match_whole_family_names_only() -> None:
    assert family_context_window("gpt-4o") == 128_000
    assert family_context_window("gpt-5-chat-latest") == 128_000
    assert family_context_window("gpt-5-mini") == 400_000
    assert family_context_window("claude-3-5-sonnet-20241022") == 200_000
    assert family_context_window("gpt-4oo") is None
    assert family_context_window("o3x") is None


def test_usage_is_read_from_the_stream_s_usage_object() -> None:
    assert usage_of(Finished("stop", {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})) == (7, 3)
    assert usage_of(Finished("stop", {"total_tokens": 10})) == (10, 0)
    assert usage_of(Finished("stop", {"prompt_tokens": -1, "completion_tokens": True})) is None
    assert usage_of(Finished("stop")) is None


# -- discovery -------------------------------------------------------------------------------------------------


async def test_discovery_offers_what_the_endpoint_lists_with_its_windows(model: LoopbackModel) -> None:
    llama_server = {"id": "gemma.gguf", "meta": {"vocab_type": 1, "n_ctx": 8192, "n_ctx_train": 32768}}
    model.listed_models = [{"id": "loopback"}, {"id": "big", "context_length": 200_000}, llama_server]
    turn = _turn(model)
    try:
        await turn.discover_models()
    finally:
        await turn.aclose()
    assert turn.models.available == ("m", "loopback", "big", "gemma.gguf")
    assert turn.models.context_window("big") == 200_000
    assert turn.models.context_window("gemma.gguf") == 8192  # through the SDK's model objects, nested
    assert [(r.method, r.path) for r in model.model_list_requests] == [("GET", "/v1/models")]
    assert model.requests == []  # the model list never shifts the chat requests' indexes


async def test_the_model_list_is_asked_for_only_once_the_chat_request_in_flight_has_its_answer(
    model: LoopbackModel,
) -> None:
    # llama-cpp-python's server cuts the stream it is sending when another request arrives: never alongside one
    model.enqueue(Answer(text="one two three four five six", reasoning="", chunk_delay_s=0.05))
    turn = _turn(model)
    session = Session(model)
    emit = Events(session)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn, session, _prompt("go"), emit)
            await model.wait_for_requests(1)
            tg.start_soon(turn.discover_models)
            await model.wait_for_model_list_requests(1)
            streamed = "".join(getattr(event, "text", "") for event in emit.events)
            assert streamed == "one two three four five six"  # the whole answer came before the list was asked
    finally:
        await turn.aclose()
    assert turn.models.final


class PreparingSession(Session):
    """A session whose turn is held while it prepares its first request (a slow import, a slow git)."""

    def __init__(self, model: LoopbackModel) -> None:
        super().__init__(model)
        self.preparing = anyio.Event()
        self.go_on = anyio.Event()

    async def begin_turn(self, prompt: Prompt, user: Message, /) -> Conversation:
        self.preparing.set()
        await self.go_on.wait()
        return await super().begin_turn(prompt, user)


async def test_a_model_list_asked_for_while_the_turn_prepares_its_request_waits_for_that_requests_answer(
    model: LoopbackModel,
) -> None:
    model.enqueue(Answer(text="one two three", reasoning=""))
    turn = _turn(model)
    session = PreparingSession(model)
    emit = Events(session)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn, session, _prompt("go"), emit)
            await session.preparing.wait()  # no chat request sent yet
            tg.start_soon(turn.discover_models)
            await anyio.wait_all_tasks_blocked()
            session.go_on.set()
            await model.wait_for_model_list_requests(1)
            assert [r.path for r in model.requests] == ["/v1/chat/completions"]  # the list came after the chat
            streamed = "".join(getattr(event, "text", "") for event in emit.events)
            assert streamed == "one two three"  # whose answer had ended
    finally:
        await turn.aclose()


@pytest.mark.parametrize("status", [404, 500])
async def test_a_failing_model_list_leaves_the_default_alone(model: LoopbackModel, status: int) -> None:
    model.model_list_status = status
    turn = _turn(model)
    try:
        await turn.discover_models()
    finally:
        await turn.aclose()
    assert (turn.models.available, turn.models.final) == (("m",), True)


async def test_a_model_list_that_does_not_come_is_given_up_after_the_timeout(model: LoopbackModel) -> None:
    model.model_list_gate = anyio.Event()  # never set: the answer never comes
    turn = _turn(model, model_list_timeout_s=0.2)
    try:
        with anyio.fail_after(10):
            await turn.discover_models()
    finally:
        await turn.aclose()
    assert (turn.models.available, turn.models.final) == (("m",), True)
    assert len(model.model_list_requests) == 1


async def test_a_configured_list_or_no_endpoint_never_asks() -> None:
    async with LoopbackModel() as model:
        turn = _turn(model, models=("m", "x"))
        await turn.discover_models()
        assert turn.models.available == ("m", "x")
        assert model.model_list_requests == []
    unconfigured = ModelTurn(ModelSettings(model="m"))
    await unconfigured.discover_models()
    assert (unconfigured.models.available, unconfigured.models.final) == (("m",), True)


# -- turns -----------------------------------------------------------------------------------------------------


async def test_each_request_uses_the_session_s_model_as_it_is_then(model: LoopbackModel) -> None:
    read = ScriptedCall("read_file", {"path": "missing.txt"}, id="c1")
    model.enqueue(ToolCalls((read,)), Answer(text="done", reasoning=""), Answer(text="again", reasoning=""))
    turn = _turn(model, models=("m", "other"))
    session = Session(model)
    events = Events(session)

    def switch(count: int) -> None:
        if count == 1:  # the first request's first event: its model was already chosen
            session.model = "other"

    events.on_event = switch
    try:
        assert await turn(session, _prompt("look"), events) == "end_turn"
        session.model = "not-offered"  # a stored choice this server does not offer: the default
        await turn(session, _prompt("again"), events)
    finally:
        await turn.aclose()
    assert [r.body["model"] for r in model.requests] == ["m", "other", "m"]


async def test_usage_is_asked_for_and_reported_after_each_request(model: LoopbackModel) -> None:
    read = ScriptedCall("read_file", {"path": "missing.txt"}, id="c1")
    model.enqueue(ToolCalls((read,), usage=(100, 20)), Answer(text="done", reasoning="", usage=(150, 5)))
    turn = _turn(model, context_window=10_000)
    session = Session(model)
    events = Events(session)
    try:
        await turn(session, _prompt("look"), events)
    finally:
        await turn.aclose()
    assert all(r.body["stream_options"] == {"include_usage": True} for r in model.requests)
    usages = [e for e in events.events if isinstance(e, UsageReported)]
    assert usages == [UsageReported(100, 20, 10_000), UsageReported(150, 5, 10_000)]
    assert usages[1].used == 155
    kinds = [(type(e).__name__, getattr(e, "status", None)) for e in events.events]
    # after its request (whose call was shown while it streamed), before its calls run
    assert kinds.index(("ToolCallStarted", None)) < kinds.index(("UsageReported", None))
    assert kinds.index(("UsageReported", None)) < kinds.index(("ToolCallUpdated", "failed"))  # missing.txt
    assert kinds[-1] == ("UsageReported", None)


async def test_an_unknown_window_is_reported_as_none(model: LoopbackModel) -> None:
    model.enqueue(Answer(text="hi", reasoning="", usage=(9, 1)))
    turn = _turn(model)
    session = Session(model)
    events = Events(session)
    try:
        await turn(session, _prompt("x"), events)
    finally:
        await turn.aclose()
    assert [e for e in events.events if isinstance(e, UsageReported)] == [UsageReported(9, 1, None)]


async def test_an_endpoint_that_refuses_stream_options_is_asked_again_without_them_for_good(
    model: LoopbackModel,
) -> None:
    refusal = ErrorStatus(400, "Unrecognized request argument supplied: stream_options")
    model.enqueue(refusal, Answer(text="one", reasoning=""), Answer(text="two", reasoning=""))
    turn = _turn(model)
    session = Session(model)
    events = Events(session)
    try:
        assert await turn(session, _prompt("x"), events) == "end_turn"
        assert await turn(session, _prompt("y"), events) == "end_turn"
    finally:
        await turn.aclose()
    assert ["stream_options" in r.body for r in model.requests] == [True, False, False]
    assert not any(isinstance(e, UsageReported) for e in events.events)


async def test_any_other_400_is_the_turn_s_error(model: LoopbackModel) -> None:
    model.enqueue(ErrorStatus(400, "messages: too long"))
    turn = _turn(model)
    session = Session(model)
    try:
        with pytest.raises(ModelHTTPError):
            await turn(session, _prompt("x"), Events(session))
    finally:
        await turn.aclose()
    assert len(model.requests) == 1


def test_the_window_of_a_one_model_listing_applies_to_any_name(caplog: pytest.LogCaptureFixture) -> None:
    catalog = ModelCatalog("gpt-4o-mini")  # llama-server lists its one model, and serves it whatever name is asked
    with caplog.at_level("INFO", logger="acp_server.turn"):
        catalog.learn([{"id": "qwen2.5-coder-7b.gguf", "meta": {"n_ctx": 4096, "n_ctx_train": 32768}}])
    assert catalog.context_window("gpt-4o-mini") == 4096  # not the family's 128,000
    assert catalog.context_window("anything") == 4096
    assert "lists one model, 'qwen2.5-coder-7b.gguf', with a 4096-token window" in caplog.text
    two = ModelCatalog("m")
    two.learn([{"id": "a", "max_model_len": 8192}, {"id": "b"}])
    assert two.context_window("m") is None and two.context_window("b") is None  # two models: no guessing


async def test_a_one_model_listing_s_window_sizes_the_usage_reported(model: LoopbackModel) -> None:
    model.listed_models = [{"id": "served.gguf", "meta": {"n_ctx": 8192}}]
    turn = _turn(model)
    try:
        await turn.discover_models()
        session = Session(model)
        events = Events(session)
        await turn(session, _prompt("hello"), events)
    finally:
        await turn.aclose()
    usage = [e for e in events.events if isinstance(e, UsageReported)]
    assert usage and usage[-1].size == 8192
