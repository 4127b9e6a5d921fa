"""``DaemonSessionClient`` (Q14): one session, one long-lived subscription, the same local limit on its prompts."""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any

import anyio
import pytest

from acp_server.client import (
    INHERIT,
    DaemonClient,
    DaemonClientClosedError,
    DaemonConnectError,
    DaemonEventStreamEndedError,
    DaemonFeatureUnavailableError,
    DaemonNotFoundError,
    DaemonPendingPromptLimitError,
    DaemonSessionClient,
    DaemonSessionNotFoundError,
    DaemonTurnError,
    SessionUpdateEvent,
)
from acp_server.provider.offline import Answer, ChunksThenSilent, ErrorStatus, HangAfterHeaders, LoopbackModel

from ._support import Recorder, assert_released_once, running_daemon, wait_pending

pytestmark = pytest.mark.anyio


async def assert_session_released_once(session: DaemonSessionClient, rec: Recorder, model: LoopbackModel) -> None:
    await assert_released_once(session.prompt, lambda: session.pending_prompts, session.limit, rec, model)


def test_constructor_parameter_positions_are_stable() -> None:
    def positional(function: Any) -> list[str]:
        return [
            name
            for name, p in inspect.signature(function).parameters.items()
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]

    assert positional(DaemonSessionClient.create_or_attach) == ["client", "cwd"]
    assert positional(DaemonSessionClient.load) == ["client", "session_id", "cwd"]
    assert positional(DaemonSessionClient.resume) == ["client", "session_id", "cwd"]
    assert positional(DaemonSessionClient) == ["client", "session_id"]


async def test_one_subscription_streams_prompts_in_order_and_releases_on_turn_complete() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with DaemonClient(served.url, max_pending_prompts_per_session=2, transport=rec) as client:
            session = await DaemonSessionClient.create_or_attach(client, "/tmp")
            assert rec.requests == [("POST", "/session")]
            async with session:
                assert rec.count("GET", "/events") == 1 and rec.last_event_ids == [None]
                model.enqueue(Answer(text="one two", reasoning=""), Answer(text="three", reasoning=""))
                texts: dict[str, list[str]] = {"a": [], "b": []}

                async def run(key: str) -> None:
                    await session.prompt(key, on_update=lambda u: texts[key].append(u.text or ""))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(run, "a")
                    tg.start_soon(run, "b")
                assert sorted(["".join(texts["a"]), "".join(texts["b"])]) == ["one two", "three"]
                assert rec.count("GET", "/events") == 1  # both followed on the one subscription
                assert session.last_event_id == served.last_event_id(session.session_id)
                await assert_session_released_once(session, rec, model)


async def test_the_session_limit_can_be_overridden_and_is_shared_with_the_client() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with DaemonClient(served.url, max_pending_prompts_per_session=5, transport=rec) as client:
            session_id = await client.create_session("/tmp")
            assert DaemonSessionClient(client, session_id).limit == 5
            assert DaemonSessionClient(client, session_id, max_pending_prompts_per_session=None).limit is None
            assert DaemonSessionClient(client, session_id, max_pending_prompts_per_session=INHERIT).limit == 5
            with pytest.raises(ValueError, match="-1"):
                DaemonSessionClient(client, session_id, max_pending_prompts_per_session=-1)
            with pytest.raises(ValueError, match=r"1\.5"):
                await DaemonSessionClient.create_or_attach(client, "/tmp", max_pending_prompts_per_session=1.5)
            assert rec.count("POST", "/session") == 1  # no session created for an invalid limit
            async with DaemonSessionClient(client, session_id, max_pending_prompts_per_session=2) as session:
                model.enqueue(HangAfterHeaders())
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.prompt, session_id, "through the client")  # counts for the session too
                    tg.start_soon(session.prompt, "through the session")
                    await wait_pending(lambda: session.pending_prompts, 2)
                    sent = len(rec.requests)
                    with pytest.raises(DaemonPendingPromptLimitError) as refused:
                        await session.prompt("third")
                    assert (refused.value.session_id, refused.value.limit, refused.value.pending_count) == (
                        session_id,
                        2,
                        2,
                    )
                    assert len(rec.requests) == sent
                    tg.cancel_scope.cancel()
                await assert_session_released_once(session, rec, model)


async def test_released_on_turn_error() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with (
            DaemonClient(served.url, max_pending_prompts_per_session=1, transport=rec) as client,
            await DaemonSessionClient.create_or_attach(client, "/tmp") as session,
        ):
            model.enqueue(ErrorStatus(400))
            with pytest.raises(DaemonTurnError) as failed:
                await session.prompt("hello")
            assert failed.value.code == "model_http_error" and failed.value.session_id == session.session_id
            await assert_session_released_once(session, rec, model)


async def test_released_on_caller_cancellation_which_cancels_the_running_prompt() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with (
            DaemonClient(served.url, max_pending_prompts_per_session=1, transport=rec) as client,
            await DaemonSessionClient.create_or_attach(client, "/tmp") as session,
        ):
            model.enqueue(ChunksThenSilent(1))
            running = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: session.prompt("hello", on_update=lambda _: running.set()))
                await running.wait()
                tg.cancel_scope.cancel()
            assert rec.count("POST", "/cancel") == 1
            await model.wait_for_disconnects(1)
            await assert_session_released_once(session, rec, model)


async def test_a_failing_on_update_abandons_the_prompt_like_a_cancellation() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with (
            DaemonClient(served.url, max_pending_prompts_per_session=1, transport=rec) as client,
            await DaemonSessionClient.create_or_attach(client, "/tmp") as session,
        ):
            model.enqueue(ChunksThenSilent(1))

            def explode(update: SessionUpdateEvent) -> None:
                raise KeyError("the caller's bug")

            with pytest.raises(KeyError, match="the caller's bug"):
                await session.prompt("hello", on_update=explode)
            assert rec.count("POST", "/cancel") == 1
            await model.wait_for_disconnects(1)
            await assert_session_released_once(session, rec, model)


async def test_released_when_the_subscription_ends_and_later_prompts_are_refused_clearly() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with (
            DaemonClient(
                served.url, max_pending_prompts_per_session=2, transport=rec, reconnect_delays=(0.0,)
            ) as client,
            await DaemonSessionClient.create_or_attach(client, "/tmp") as session,
        ):
            model.enqueue(HangAfterHeaders())
            errors: list[BaseException] = []

            async def run(text: str) -> None:
                try:
                    await session.prompt(text)
                except DaemonConnectError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "first")
                await model.wait_for_requests(1)
                rec.cut_events("prompt_accepted", reconnect="refuse")  # the second one's acceptance ends the stream
                tg.start_soon(run, "second")
            assert len(errors) == 2 and session.pending_prompts == 0  # both followed prompts released
            with pytest.raises(DaemonEventStreamEndedError) as ended:
                await session.prompt("third")
            assert isinstance(ended.value.__cause__, DaemonConnectError)
            # the client shares the session's reservations: both slots came back, once each
            rec.cut_events("\x00never", reconnect="forward")
            sid = session.session_id
            await assert_released_once(partial(client.prompt, sid), lambda: session.pending_prompts, 2, rec, model)


async def test_aclose_ends_followed_prompts_and_the_session_client_cannot_be_reused() -> None:
    rec = Recorder()
    async with (
        LoopbackModel() as model,
        running_daemon(model) as served,
        DaemonClient(served.url, max_pending_prompts_per_session=1, transport=rec) as client,
    ):
        session = await DaemonSessionClient.create_or_attach(client, "/tmp")
        with pytest.raises(RuntimeError, match="not open"):
            await session.prompt("too early")
        async with session:
            model.enqueue(HangAfterHeaders())
            async with anyio.create_task_group() as tg:

                async def closed_under_it() -> None:
                    with pytest.raises(DaemonClientClosedError):
                        await session.prompt("hello")

                tg.start_soon(closed_under_it)
                await model.wait_for_requests(1)
                await session.aclose()
                await session.aclose()  # idempotent
            assert session.pending_prompts == 0 and session.closed
            with pytest.raises(DaemonClientClosedError):
                await session.prompt("after close")
        with pytest.raises(DaemonClientClosedError):
            async with session:
                pass
        assert not client.closed  # borrowed, not owned
        assert served.pending(session.session_id) == 1  # detaching leaves the session and its prompt
        # the slot came back once: the client may send one prompt of the session again, not two
        sid = session.session_id
        await assert_released_once(partial(client.prompt, sid), lambda: session.pending_prompts, 1, rec, model)


async def test_attach_to_an_unknown_session_fails_on_open() -> None:
    async with running_daemon(None) as served, DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create_or_attach(client, "/tmp", session_id="nope")
        with pytest.raises(DaemonSessionNotFoundError) as missing:
            async with session:
                pass  # pragma: no cover
        assert missing.value.session_id == "nope"
        assert session.closed


async def test_load_is_not_served_by_this_daemon_resume_is() -> None:
    async with running_daemon(None) as served, DaemonClient(served.url) as client:
        session_id = await client.create_session("/tmp")
        with pytest.raises(DaemonFeatureUnavailableError) as unavailable:
            await DaemonSessionClient.load(client, session_id, "/tmp")
        error = unavailable.value
        assert isinstance(error, DaemonNotFoundError) and error.feature == "session.load"
        assert (error.status_code, error.code, error.path) == (404, "not_found", f"/session/{session_id}/load")
        assert not (await client.capabilities()).supports("session.load")

        async with await DaemonSessionClient.resume(client, session_id, "/tmp") as session:
            assert session.session_id == session_id
        with pytest.raises(DaemonSessionNotFoundError):  # an unknown session is not an unavailable feature
            await DaemonSessionClient.resume(client, "nope")


async def test_close_session_detaches_it_and_closes_the_session_client() -> None:
    async with running_daemon(None) as served, DaemonClient(served.url) as client:
        async with await DaemonSessionClient.create_or_attach(client, "/tmp") as session:
            await session.close_session()
            assert session.closed
        with pytest.raises(DaemonSessionNotFoundError):  # detached: resume it first
            await client.prompt(session.session_id, "hello")
        with pytest.raises(DaemonSessionNotFoundError):
            await client.close_session("nope")


async def test_delete_session_removes_it_for_good() -> None:
    async with running_daemon(None) as served, DaemonClient(served.url) as client:
        assert (await client.capabilities()).supports("session.remove")
        session_id = await client.create_session("/tmp")
        await client.delete_session(session_id)
        assert await served.bridge.store.get_session(session_id) is None
        with pytest.raises(DaemonSessionNotFoundError):  # not merely detached: it cannot be resumed
            await client.resume_session(session_id)
        with pytest.raises(DaemonSessionNotFoundError) as missing:
            await client.delete_session(session_id)
        assert missing.value.session_id == session_id
