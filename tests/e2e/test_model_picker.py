"""What the editor shows around a conversation, end to end: the official ACP Python SDK as the editor drives a real
``acp-server`` process over real pipes against the scriptable loopback model — the model picker (``--models`` or
the endpoint's ``GET /v1/models``, which never delays ``session/new``), the context meter (``usage_update`` from the
model's usage chunk, per-turn totals in the answer), session titles, and all of it across a restart."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, spawn_agent_process
from acp.schema import ConfigOptionUpdate, SessionInfoUpdate, UsageUpdate, UserMessageChunk

from acp_server.provider.offline import Answer, LoopbackModel
from tests.acp_blocks import text_block

pytestmark = pytest.mark.anyio


class Editor:
    """The client side: records every update; ``wait_for`` waits (bounded) until one matches."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self._changed = anyio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, condition: Callable[[Any], bool]) -> Any:
        """The first update that meets ``condition`` (the SDK delivers notifications from tasks of their own)."""
        with anyio.fail_after(10):
            while True:
                found = [u for u in self.updates if condition(u)]
                if found:
                    return found[0]
                await self._changed.wait()

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}


@asynccontextmanager
async def _agent(
    editor: Editor, model: LoopbackModel, *flags: str, state: Path | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[Any]:
    args = ["-m", "acp_server", "--base-url", model.base_url, *flags]
    args += ["--no-persist"] if state is None else ["--state-dir", str(state)]
    async with spawn_agent_process(editor, sys.executable, *args, env={**_env(), **(env or {})}) as (conn, _process):
        await conn.initialize(protocol_version=1)
        yield conn


def _model_option(options: Any) -> Any:
    [option] = [o for o in options if o.id == "model"]
    return option


def _offered(options: Any) -> list[str]:
    return [o.value for o in _model_option(options).options]


async def _session_offering(conn: Any, model: str) -> Any:
    """A new session once the background model list has arrived (bounded polling of another process)."""
    for _ in range(500):
        session = await conn.new_session(cwd="/tmp", mcp_servers=[])
        if model in _offered(session.config_options):
            return session
        await anyio.sleep(0.02)
    raise AssertionError(f"{model!r} was never offered")


async def test_picking_a_model_makes_the_next_model_request_use_it() -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="one", reasoning=""), Answer(text="two", reasoning=""))
        async with _agent(editor, model, "--model", "small", "--models", "small,big") as conn:
            session = await conn.new_session(cwd="/tmp", mcp_servers=[])
            assert [o.id for o in session.config_options] == ["mode", "model"]
            option = _model_option(session.config_options)
            assert (option.category, option.current_value, _offered(session.config_options)) == (
                "model",
                "small",
                ["small", "big"],
            )
            await conn.prompt(session_id=session.session_id, prompt=[text_block("first")])
            answer = await conn.set_config_option(config_id="model", session_id=session.session_id, value="big")
            assert _model_option(answer.config_options).current_value == "big"
            update = await editor.wait_for(lambda u: isinstance(u, ConfigOptionUpdate))
            assert _model_option(update.config_options).current_value == "big"
            with pytest.raises(RequestError) as refused:
                await conn.set_config_option(config_id="model", session_id=session.session_id, value="huge")
            assert refused.value.code == -32602
            await conn.prompt(session_id=session.session_id, prompt=[text_block("second")])
    assert [r.body["model"] for r in model.requests] == ["small", "big"]
    assert model.model_list_requests == []  # --models given: the endpoint is never asked


async def test_usage_from_the_model_s_usage_chunk_arrives_as_usage_update_and_the_turn_s_totals_in_the_answer() -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="hi", reasoning="", usage=(1200, 34)), Answer(text="ok", reasoning="", usage=(9, 1)))
        flags = ("--model", "gpt-4o-mini", "--models", "gpt-4o-mini,local-model")
        async with _agent(editor, model, *flags) as conn:
            session = await conn.new_session(cwd="/tmp", mcp_servers=[])
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("count")])
            meter = await editor.wait_for(lambda u: isinstance(u, UsageUpdate))
            assert (meter.used, meter.size) == (1234, 128_000)  # gpt-4o-mini: the family's documented window
            usage = {"inputTokens": 1200, "outputTokens": 34, "totalTokens": 1234, "requests": 1}
            assert response.stop_reason == "end_turn" and response.field_meta == {"acpServer": {"usage": usage}}
            await conn.set_config_option(config_id="model", session_id=session.session_id, value="local-model")
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("again")])
            assert response.field_meta["acpServer"]["usage"]["totalTokens"] == 10
    assert len(editor.of(UsageUpdate)) == 1  # local-model's window is unknown: no meter rather than a guess
    assert all(r.body["stream_options"] == {"include_usage": True} for r in model.requests)


async def test_the_context_window_flag_sizes_every_model_s_meter() -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="hi", reasoning="", usage=(3000, 96)))
        async with _agent(editor, model, "--model", "m", "--context-window", "8192") as conn:
            session = await conn.new_session(cwd="/tmp", mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("count")])
            meter = await editor.wait_for(lambda u: isinstance(u, UsageUpdate))
    assert (meter.used, meter.size) == (3096, 8192)


async def test_the_model_list_and_the_window_can_come_from_the_environment() -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="hi", reasoning="", usage=(100, 28)))
        env = {"ACP_SERVER_MODELS": " small , big ", "ACP_SERVER_CONTEXT_WINDOW": "4096"}
        async with _agent(editor, model, env=env) as conn:
            session = await conn.new_session(cwd="/tmp", mcp_servers=[])
            assert _offered(session.config_options) == ["small", "big"]  # the first is --model's default
            await conn.set_config_option(config_id="model", session_id=session.session_id, value="big")
            await conn.prompt(session_id=session.session_id, prompt=[text_block("count")])
            meter = await editor.wait_for(lambda u: isinstance(u, UsageUpdate))
    assert (meter.used, meter.size) == (128, 4096)
    assert [r.body["model"] for r in model.requests] == ["big"]
    assert model.model_list_requests == []  # a configured list: the endpoint is never asked


async def test_a_model_list_that_does_not_come_never_delays_session_new() -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.listed_models = [{"id": "loopback"}, {"id": "listed"}]
        model.model_list_gate = anyio.Event()  # the endpoint holds GET /v1/models
        async with _agent(editor, model, "--model", "m") as conn:
            await model.wait_for_model_list_requests(1)  # asked in the background once initialize was answered
            early = await conn.new_session(cwd="/tmp", mcp_servers=[])
            assert not model.model_list_gate.is_set()  # answered while the list request is still held
            assert _offered(early.config_options) == ["m"]  # what is known then: the default
            model.model_list_gate.set()
            later = await _session_offering(conn, "listed")
            assert _offered(later.config_options) == ["m", "loopback", "listed"]
            await conn.set_config_option(config_id="model", session_id=later.session_id, value="listed")
            await conn.prompt(session_id=later.session_id, prompt=[text_block("hi")])
    assert model.requests[-1].body["model"] == "listed"
    assert len(model.model_list_requests) == 1  # asked once


async def test_a_failing_model_list_offers_the_default_and_prompts_still_work() -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.model_list_status = 500
        model.enqueue(Answer(text="fine", reasoning=""))
        async with _agent(editor, model, "--model", "m") as conn:
            await model.wait_for_model_list_requests(1)
            session = await conn.new_session(cwd="/tmp", mcp_servers=[])
            assert _offered(session.config_options) == ["m"]
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
            assert response.stop_reason == "end_turn"


async def test_replay_after_load_keeps_the_chosen_model_and_the_title(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = Editor()
    async with LoopbackModel() as model:
        model.enqueue(*(Answer(text=f"answer {i}", reasoning="") for i in range(3)))
        flags = ("--model", "small", "--models", "small,big")
        async with _agent(first, model, *flags, state=state) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            session_id = session.session_id
            await conn.prompt(session_id=session_id, prompt=[text_block("Explain the parser\nin detail")])
            titled = await first.wait_for(lambda u: isinstance(u, SessionInfoUpdate))
            assert titled.title == "Explain the parser"
            await conn.set_config_option(config_id="model", session_id=session_id, value="big")
            await conn.prompt(session_id=session_id, prompt=[text_block("and the lexer?")])
            assert len(first.of(SessionInfoUpdate)) == 1  # set once, announced once
            assert (
                await conn.ext_method("acp-server/set_title", {"sessionId": session_id, "title": "Parser notes"}) == {}
            )
            renamed = await first.wait_for(lambda u: isinstance(u, SessionInfoUpdate) and u.title == "Parser notes")
            assert renamed.updated_at is not None

        second = Editor()
        async with _agent(second, model, *flags, state=state) as conn:
            listed = await conn.list_sessions(cwd=str(tmp_path))
            assert [(s.session_id, s.title) for s in listed.sessions] == [(session_id, "Parser notes")]
            loaded = await conn.load_session(session_id=session_id, cwd=str(tmp_path), mcp_servers=[])
            assert _model_option(loaded.config_options).current_value == "big"
            replayed = [u.content.text for u in second.of(UserMessageChunk)]
            assert replayed == ["Explain the parser\nin detail", "and the lexer?"]
            [restored] = second.of(SessionInfoUpdate)  # the replay ends with the title: no session/list needed
            assert (restored.title, second.updates[-1]) == ("Parser notes", restored)
            await conn.prompt(session_id=session_id, prompt=[text_block("one more")])
            assert len(second.of(SessionInfoUpdate)) == 1  # the title did not change: nothing more to announce
    assert [r.body["model"] for r in model.requests] == ["small", "big", "big"]


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--models", " , "], "--models"), (["--context-window", "0"], "--context-window")],
)
def test_bad_model_flags_are_usage_errors(args: list[str], named: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "acp_server", *args], input="", capture_output=True, text=True, env=_env(), timeout=60
    )
    assert result.returncode == 2
    assert named in result.stderr
