"""Prompt admission over HTTP (Q8, Q9): the bridge is the one gate, whatever the entry point."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import pytest

from acp_server.acp import AcpAgent, AgentOptions, bind
from acp_server.bridge import PromptQueueFullError
from acp_server.config import Settings
from acp_server.domain import Prompt, TextPart
from acp_server.provider.offline import Answer, ErrorStatus, HangAfterHeaders, LoopbackModel, SlowDrip
from acp_server.rpc import to_rpc_error

from ._support import TEXT, assert_documented, running_daemon

pytestmark = pytest.mark.anyio

PROMPT_ROUTE = "/session/{sessionId}/prompt"


def queue_full_body(session_id: str, limit: int = 5, pending: int = 5) -> dict[str, Any]:
    return {
        "code": "prompt_queue_full",
        "error": f'Prompt queue full for session "{session_id}" ({pending}/{limit} pending)',
        "sessionId": session_id,
        "limit": limit,
        "pendingCount": pending,
    }


async def test_seven_prompts_back_to_back_five_accepted_two_refused_all_accepted_complete_in_order() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="slow " * 25))  # the first turn outlasts the seven POSTs
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                responses = [await served.prompt(session_id, f"prompt {i}") for i in range(7)]
                for response in responses:
                    assert_documented("POST", PROMPT_ROUTE, response)
                assert [r.status_code for r in responses] == [202] * 5 + [503] * 2
                accepted = [r.json()["promptId"] for r in responses[:5]]
                assert len(set(accepted)) == 5
                for refused in responses[5:]:
                    assert refused.headers["Retry-After"] == "5"
                    assert refused.json() == queue_full_body(session_id)  # exact: no promptId, nothing else
                seen = await events.until(lambda e: e.event == "turn_complete" and e.data["promptId"] == accepted[-1])
        assert [e.data["promptId"] for e in seen if e.event == "prompt_accepted"] == accepted
        completed = [e.data for e in seen if e.event == "turn_complete"]
        assert [c["promptId"] for c in completed] == accepted
        assert {c["stopReason"] for c in completed} == {"end_turn"}
        assert [e.id for e in seen] == list(range(seen[0].id, seen[0].id + len(seen)))
        # Updates of a prompt come after its acceptance and before its completion, and prompts do not interleave.
        owner = [e.data["promptId"] for e in seen if e.event in ("session_update", "turn_complete")]
        assert owner == sorted(owner, key=accepted.index)
        assert {e.data["promptId"] for e in seen if e.event == "session_update"} == set(accepted)
        assert len(model.requests) == 5


async def test_a_refusal_frees_nothing_and_a_slot_reopens_when_a_prompt_settles() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model, settings=Settings(max_pending_prompts_per_session=2)) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                first = await served.prompt(session_id)
                second = await served.prompt(session_id)
                assert second.status_code == 202
                refused = await served.prompt(session_id)
                assert refused.status_code == 503
                assert refused.json() == queue_full_body(session_id, limit=2, pending=2)
                await model.wait_for_requests(1)
                cancel = await served.client.post(f"/session/{session_id}/cancel")  # the session: running and queued
                assert cancel.status_code == 204 and cancel.content == b""
                assert_documented("POST", "/session/{sessionId}/cancel", cancel)
                ended: list[object] = []
                while len(ended) < 2:
                    done = await events.until(lambda e: e.event == "turn_complete")
                    ended.append(done[-1].data)
                assert sorted(ended, key=str) == sorted(
                    (
                        {"sessionId": session_id, "promptId": accepted.json()["promptId"], "stopReason": "cancelled"}
                        for accepted in (first, second)
                    ),
                    key=str,
                )
                assert len(model.requests) == 1  # the queued prompt never started
                assert (await served.prompt(session_id)).status_code == 202


class _Peer:
    """The stdio connection, as the ACP handlers see it."""

    def __init__(self, request_id: str | int | None = None) -> None:
        self.request_id = request_id
        self.notifications: list[tuple[str, Any]] = []

    def admitted(self) -> None:
        return None

    async def notify(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))

    def after_reply(self, method: str, params: Any) -> None:
        return None

    def cancel_request(self, request_id: str | int) -> bool:
        return False


async def test_stdio_and_http_share_one_counter_on_one_bridge() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            requests, _ = bind(AcpAgent(served.bridge, AgentOptions()))
            prompt = requests["session/prompt"]
            stdio_result: dict[str, Any] = {}

            async def stdio_prompt() -> None:
                stdio_result.update(await prompt({"sessionId": session_id, "prompt": TEXT}, _Peer(1)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(stdio_prompt)  # 1 running, through the ACP handler
                await model.wait_for_requests(1)
                http = [await served.prompt(session_id) for _ in range(3)]  # 3 waiting, over HTTP
                assert [r.status_code for r in http] == [202] * 3
                # 1 waiting, admitted the way the ACP handler admits
                direct = served.bridge.send_prompt(session_id, Prompt((TextPart("direct"),)))
                direct.events.close()  # nobody reads its events
                assert served.bridge.get(session_id).pending_prompt_count == 5

                refused = await served.prompt(session_id)  # HTTP refusal ...
                assert refused.status_code == 503
                assert refused.json() == queue_full_body(session_id)
                with pytest.raises(PromptQueueFullError) as caught:  # ... and the stdio refusal: one counter
                    await prompt({"sessionId": session_id, "prompt": TEXT}, _Peer(2))
                assert to_rpc_error(caught.value).to_wire() == {
                    "code": -32603,
                    "message": queue_full_body(session_id)["error"],
                    "data": {
                        "errorKind": "prompt_queue_full",
                        "sessionId": session_id,
                        "limit": 5,
                        "pendingCount": 5,
                        "retryable": True,
                    },
                }
                assert served.bridge.get(session_id).pending_prompt_count == 5

                assert (await served.client.post(f"/session/{session_id}/cancel")).status_code == 204
            assert stdio_result == {"stopReason": "cancelled"}  # the session's cancel reaches every prompt, any face
            assert await direct.result() == "cancelled"
            assert served.bridge.get(session_id).pending_prompt_count == 0
            assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (Settings(), {"maxPendingPromptsPerSession": 5, "promptDeadlineMs": None, "streamIdleTimeoutMs": 120000}),
        (
            Settings(max_pending_prompts_per_session=None),
            {"maxPendingPromptsPerSession": None, "promptDeadlineMs": None, "streamIdleTimeoutMs": 120000},
        ),
        (
            Settings(max_pending_prompts_per_session=3, prompt_deadline_ms=9000),
            {"maxPendingPromptsPerSession": 3, "promptDeadlineMs": 9000, "streamIdleTimeoutMs": 120000},
        ),
    ],
    ids=["default-5", "off-null", "custom-3"],
)
async def test_capabilities_advertise_the_bridge_limit(settings: Settings, expected: dict[str, Any]) -> None:
    async with running_daemon(None, settings=settings) as served:
        response = await served.client.get("/capabilities")
    assert response.status_code == 200
    assert_documented("GET", "/capabilities", response)
    body = response.json()
    assert body["v"] == 1 and body["protocolVersions"] == [1]
    assert "session.prompt" in body["features"] and "session.load" not in body["features"]
    assert {k: body["limits"][k] for k in expected} == expected


async def test_capabilities_watchdog_off_is_null() -> None:
    async with running_daemon(None, stream_idle_timeout_ms=0) as served:
        body = (await served.client.get("/capabilities")).json()
    assert body["limits"]["streamIdleTimeoutMs"] is None


async def test_unlimited_accepts_more_than_five() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model, settings=Settings(max_pending_prompts_per_session=None)) as served:
            session_id = await served.new_session()
            statuses = [(await served.prompt(session_id)).status_code for _ in range(12)]
            assert statuses == [202] * 12
            assert served.bridge.get(session_id).pending_prompt_count == 12


async def test_wait_true_answers_200_with_the_stop_reason() -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="all done"))
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                response = await served.prompt(session_id, wait="true")
                assert response.status_code == 200
                assert_documented("POST", PROMPT_ROUTE, response)
                assert response.json() == {"promptId": response.json()["promptId"], "stopReason": "end_turn"}
                seen = await events.until(lambda e: e.event == "turn_complete")
            text = "".join(
                e.data["update"]["content"]["text"]
                for e in seen
                if e.event == "session_update" and e.data["update"]["sessionUpdate"] == "agent_message_chunk"
            )
            assert text == "all done"


@pytest.mark.parametrize(
    ("behaviour", "extra", "status", "code"),
    [
        (ErrorStatus(400), {}, 502, "model_http_error"),
        (HangAfterHeaders(), {"deadlineMs": 100}, 504, "prompt_deadline_exceeded"),
    ],
    ids=["model-error-502", "deadline-504"],
)
async def test_a_failed_turn_is_a_turn_error_event_and_a_mapped_wait_response(
    behaviour: Any, extra: dict[str, Any], status: int, code: str
) -> None:
    async with LoopbackModel() as model:
        model.enqueue(behaviour)
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                response = await served.client.post(
                    f"/session/{session_id}/prompt", params={"wait": "true"}, json={"prompt": TEXT, **extra}
                )
                assert response.status_code == status
                assert_documented("POST", PROMPT_ROUTE, response)
                assert response.json()["code"] == code
                seen = await events.until(lambda e: e.event in ("turn_error", "turn_complete"))
            error = seen[-1]
            assert error.event == "turn_error"
            assert error.data["code"] == code
            assert error.data["message"] == response.json()["error"]
            assert "retryable" in error.data["data"]


async def test_wait_true_client_leaving_cancels_its_prompt() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(partial(served.prompt, session_id, "hello", wait="true"))
                    await model.wait_for_requests(1)
                    tg.cancel_scope.cancel()  # the HTTP client gives up: its connection closes
                seen = await events.until(lambda e: e.event == "turn_complete")
            assert seen[-1].data["stopReason"] == "cancelled"
            assert served.bridge.get(session_id).pending_prompt_count == 0


async def test_cancel_one_prompt_by_id_waiting_or_running() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="slow " * 200), Answer(text="third", reasoning=""))
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            first, second, third = [(await served.prompt(session_id, f"p{i}")).json()["promptId"] for i in range(3)]
            await model.wait_for_requests(1)
            base = f"/session/{session_id}/prompt"
            waiting = await served.client.post(f"{base}/{second}/cancel")  # leaves the FIFO; never reaches the model
            assert waiting.status_code == 204
            running = await served.client.post(f"{base}/{first}/cancel")
            assert running.status_code == 204
            handle = served.bridge.get(session_id)
            async with served.events(session_id, last_event_id=0) as events:
                seen = await events.until(lambda e: e.event == "turn_complete" and e.data["promptId"] == third, 10)
            ends = {e.data["promptId"]: e.data["stopReason"] for e in seen if e.event == "turn_complete"}
            assert ends == {first: "cancelled", second: "cancelled", third: "end_turn"}
            assert [r.body["messages"][-1]["content"] for r in model.requests] == ["p0", "p2"]
            assert handle.pending_prompt_count == 0
            gone = await served.client.post(f"{base}/{first}/cancel")
            assert gone.status_code == 404
            assert gone.json()["code"] == "prompt_not_found"
            assert_documented("POST", "/session/{sessionId}/prompt/{promptId}/cancel", gone)
