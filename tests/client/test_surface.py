"""The SDK's public surface, argument validation, lifecycle, and the one mapping of answers to exceptions."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

import acp_server.client as sdk
from acp_server.client import (
    DaemonClient,
    DaemonClientClosedError,
    DaemonClientError,
    DaemonConnectError,
    DaemonFeatureUnavailableError,
    DaemonForbiddenError,
    DaemonHTTPError,
    DaemonInvalidRequestError,
    DaemonMethodNotAllowedError,
    DaemonNotFoundError,
    DaemonPayloadTooLargeError,
    DaemonPendingPromptLimitError,
    DaemonPromptQueueFullError,
    DaemonProtocolError,
    DaemonServerError,
    DaemonSessionNotFoundError,
    DaemonTimeoutError,
    DaemonTransportError,
    DaemonTurnError,
    DaemonUnauthorizedError,
    DaemonUnavailableError,
    DaemonUnsupportedMediaTypeError,
    UnknownEvent,
    validate_limit,
)

from ._support import running_daemon

pytestmark = pytest.mark.anyio

EXPORTED = [
    "CANCEL_TIMEOUT_S",
    "DEFAULT_RECONNECT_DELAYS",
    "DEFAULT_TIMEOUT",
    "EVENTS_READ_TIMEOUT_S",
    "INHERIT",
    "TOKEN_ENV",
    "Capabilities",
    "ConfigChangedEvent",
    "ConfigOption",
    "DaemonClient",
    "DaemonClientClosedError",
    "DaemonClientError",
    "DaemonConnectError",
    "DaemonEvent",
    "DaemonEventStreamEndedError",
    "DaemonEventsLostError",
    "DaemonFeatureUnavailableError",
    "DaemonForbiddenError",
    "DaemonHTTPError",
    "DaemonInvalidRequestError",
    "DaemonMethodNotAllowedError",
    "DaemonNotFoundError",
    "DaemonPayloadTooLargeError",
    "DaemonPendingPromptLimitError",
    "DaemonPermissionRequestNotFoundError",
    "DaemonPromptNotFoundError",
    "DaemonPromptQueueFullError",
    "DaemonProtocolError",
    "DaemonServerError",
    "DaemonSessionClient",
    "DaemonSessionNotFoundError",
    "DaemonTimeoutError",
    "DaemonTransportError",
    "DaemonTurnError",
    "DaemonUnauthorizedError",
    "DaemonUnavailableError",
    "DaemonUnsupportedMediaTypeError",
    "EventStream",
    "Inherit",
    "ModeChangedEvent",
    "ModeInfo",
    "OnPermission",
    "OnUpdate",
    "PermissionOption",
    "PermissionRequestEvent",
    "PlanEntry",
    "PlanEvent",
    "PromptAcceptedEvent",
    "PromptInput",
    "PromptResult",
    "ResyncRequiredEvent",
    "SessionClosedEvent",
    "SessionConfig",
    "SessionUpdateEvent",
    "ToolCallEvent",
    "TurnCompleteEvent",
    "TurnErrorEvent",
    "UnknownEvent",
    "validate_limit",
]


def test_public_surface_is_pinned_and_sorted() -> None:
    assert sdk.__all__ == EXPORTED
    assert sdk.__all__ == sorted(sdk.__all__, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    assert all(hasattr(sdk, name) for name in EXPORTED)
    public = {name for name, value in vars(sdk).items() if not name.startswith("_") and name != "annotations"}
    assert public == set(EXPORTED)


def test_every_error_has_one_root_and_the_tree_of_the_docstring() -> None:
    errors = [getattr(sdk, name) for name in EXPORTED if name.endswith("Error")]
    assert all(issubclass(error, DaemonClientError) for error in errors)
    assert issubclass(DaemonConnectError, DaemonTransportError) and issubclass(DaemonTimeoutError, DaemonTransportError)
    assert issubclass(DaemonFeatureUnavailableError, DaemonNotFoundError)
    for http in (DaemonPromptQueueFullError, DaemonSessionNotFoundError, DaemonUnauthorizedError, DaemonServerError):
        assert issubclass(http, DaemonHTTPError)
    assert not issubclass(DaemonPendingPromptLimitError, DaemonHTTPError)  # a local refusal is not an answer
    assert not issubclass(DaemonTurnError, DaemonHTTPError)
    assert not issubclass(DaemonClientClosedError, DaemonTransportError)  # closed is not broken


# -- the limit ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), (0, None), (math.inf, None), (0.0, None), (1, 1), (5, 5), (5.0, 5), (10**6, 10**6)],
)
def test_limit_takes_the_capability_value_as_is(value: Any, expected: int | None) -> None:
    assert validate_limit(value) == expected
    assert DaemonClient("http://127.0.0.1:1", max_pending_prompts_per_session=value).limit == expected


@pytest.mark.parametrize("value", [-1, -0.5, 1.5, math.nan, -math.inf, True, False, "5", [5]])
def test_invalid_limits_raise_at_construction(value: Any) -> None:
    with pytest.raises(ValueError, match="max_pending_prompts_per_session"):
        DaemonClient("http://127.0.0.1:1", max_pending_prompts_per_session=value)


def test_default_limit_is_five() -> None:
    assert DaemonClient("http://127.0.0.1:1").limit == 5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "ftp://host"}, "base_url"),
        ({"base_url": "not a url"}, "base_url"),
        ({"base_url": "http://h", "reconnect_delays": (-1.0,)}, "reconnect_delays"),
        ({"base_url": "http://h", "reconnect_delays": (math.inf,)}, "reconnect_delays"),
    ],
)
def test_invalid_construction(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DaemonClient(**kwargs)


# -- a scripted daemon ----------------------------------------------------------------------------------------


class Scripted:
    """A MockTransport answering with ``handler`` and recording each request."""

    def __init__(self, handler: Callable[[httpx2.Request], httpx2.Response]) -> None:
        self.requests: list[httpx2.Request] = []

        def record(request: httpx2.Request) -> httpx2.Response:
            self.requests.append(request)
            return handler(request)

        self.transport = httpx2.MockTransport(record)


def answer(status: int, body: Any = None, **headers: str) -> Callable[[httpx2.Request], httpx2.Response]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        if isinstance(body, bytes):
            return httpx2.Response(status, content=body, headers=headers)
        return httpx2.Response(status, json=body, headers=headers)

    return handler


async def test_token_argument_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = Scripted(answer(200, {"status": "ok"}))
    monkeypatch.setenv("ACP_SERVER_TOKEN", "from-env")
    for token, expected in (("explicit", "Bearer explicit"), (None, "Bearer from-env"), ("", None)):
        async with DaemonClient("http://daemon", token=token, transport=scripted.transport) as client:
            assert await client.health()
        assert scripted.requests[-1].headers.get("authorization") == expected
    monkeypatch.delenv("ACP_SERVER_TOKEN")
    async with DaemonClient("http://daemon", transport=scripted.transport) as client:
        await client.health()
    assert "authorization" not in scripted.requests[-1].headers


async def test_a_token_daemon_refuses_without_the_token() -> None:
    async with running_daemon(None, token="s3cret") as served:
        async with DaemonClient(served.url, token="wrong") as client:
            with pytest.raises(DaemonUnauthorizedError) as refused:
                await client.create_session("/tmp")
            assert (refused.value.status_code, refused.value.code) == (401, "unauthorized")
        async with DaemonClient(served.url, token="s3cret") as client:
            assert await client.create_session("/tmp")


async def test_closed_is_closed_everywhere_and_aclose_is_idempotent() -> None:
    scripted = Scripted(answer(200, {"status": "ok"}))
    client = DaemonClient("http://daemon", transport=scripted.transport)
    async with client:
        assert await client.health()
    await client.aclose()
    assert client.closed
    calls = [
        client.health(),
        client.capabilities(),
        client.create_session("/tmp"),
        client.cancel("s"),
        client.close_session("s"),
        client.prompt("s", "hello"),
    ]
    for call in calls:
        with pytest.raises(DaemonClientClosedError):
            await call
    with pytest.raises(DaemonClientClosedError):
        client.events("s")
    with pytest.raises(DaemonClientClosedError):
        async with client:
            pass  # pragma: no cover
    assert len(scripted.requests) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prompt": ""}, "empty"),
        ({"prompt": []}, "at least one"),
        ({"prompt": [{"text": "no type"}]}, "type"),
        ({"prompt": "hi", "deadline_ms": 0}, "deadline_ms"),
        ({"prompt": "hi", "deadline_ms": 1.5}, "deadline_ms"),
        ({"prompt": "hi", "wait": True, "on_update": print}, "on_update"),
    ],
)
async def test_bad_prompt_arguments_reserve_nothing_and_send_nothing(kwargs: dict[str, Any], match: str) -> None:
    scripted = Scripted(answer(500, {}))
    async with DaemonClient("http://daemon", transport=scripted.transport, max_pending_prompts_per_session=1) as client:
        with pytest.raises(ValueError, match=match):
            await client.prompt("s", **kwargs)
        assert client.pending_prompts("s") == 0 and scripted.requests == []


# -- the mapping of answers -----------------------------------------------------------------------------------

QUEUE_FULL = {
    "code": "prompt_queue_full",
    "error": 'Prompt queue full for session "s" (5/5 pending)',
    "sessionId": "s",
    "limit": 5,
    "pendingCount": 5,
}


@pytest.mark.parametrize(
    ("status", "body", "error", "fields"),
    [
        (
            400,
            {"code": "invalid_request", "error": "bad", "details": [{"field": "cwd", "message": "Field required"}]},
            DaemonInvalidRequestError,
            {"details": [{"field": "cwd", "message": "Field required"}]},
        ),
        (401, {"code": "unauthorized", "error": "no"}, DaemonUnauthorizedError, {}),
        (403, {"code": "forbidden_origin", "error": "no"}, DaemonForbiddenError, {"code": "forbidden_origin"}),
        (404, {"code": "not_found", "error": "No route", "path": "/x"}, DaemonNotFoundError, {"path": "/x"}),
        (
            404,
            {"code": "session_not_found", "error": "gone", "sessionId": "s"},
            DaemonSessionNotFoundError,
            {"session_id": "s"},
        ),
        (
            405,
            {"code": "method_not_allowed", "error": "no", "allowed": ["POST"]},
            DaemonMethodNotAllowedError,
            {"allowed": ("POST",)},
        ),
        (413, {"code": "payload_too_large", "error": "big", "limit": 10}, DaemonPayloadTooLargeError, {"limit": 10}),
        (415, {"code": "unsupported_media_type", "error": "json"}, DaemonUnsupportedMediaTypeError, {}),
        (503, {"code": "bridge_closed", "error": "shutting down"}, DaemonUnavailableError, {"code": "bridge_closed"}),
        (500, {"code": "internal", "error": "Internal error"}, DaemonServerError, {"code": "internal"}),
        (502, b"<html>Bad Gateway</html>", DaemonServerError, {"code": None, "body": {}}),
        (404, b"", DaemonNotFoundError, {"code": None}),
    ],
)
async def test_every_error_body_maps_to_its_exception_with_its_fields(
    status: int, body: Any, error: type[DaemonHTTPError], fields: dict[str, Any]
) -> None:
    scripted = Scripted(answer(status, body))
    async with DaemonClient("http://daemon", transport=scripted.transport) as client:
        with pytest.raises(error) as raised:
            await client.create_session("/tmp")
    assert type(raised.value) is error
    assert raised.value.status_code == status
    assert (raised.value.method, raised.value.url) == ("POST", "http://daemon/session")
    if isinstance(body, dict):
        assert str(raised.value) == body["error"] and raised.value.body == body
    for name, value in fields.items():
        assert getattr(raised.value, name) == value


# The Retry-After rules themselves are pinned once, in tests/pipeline/test_retry_after.py; this is the plumbing.
@pytest.mark.parametrize(
    ("header", "expected"), [("5", 5.0), ("0.5", None), (None, None), ("soon", None), ("-1", None)]
)
async def test_queue_full_carries_limit_pending_count_and_retry_after(header: str | None, expected: Any) -> None:
    headers = {} if header is None else {"Retry-After": header}
    scripted = Scripted(answer(503, QUEUE_FULL, **headers))
    async with DaemonClient("http://daemon", transport=scripted.transport, max_pending_prompts_per_session=None) as c:
        with pytest.raises(DaemonPromptQueueFullError) as refused:
            await c.prompt("s", "hello")
        assert c.pending_prompts("s") == 0
    error = refused.value
    assert (error.session_id, error.limit, error.pending_count, error.retry_after) == ("s", 5, 5, expected)
    assert str(error) == QUEUE_FULL["error"]


async def test_a_queue_full_body_without_its_fields_is_a_protocol_error() -> None:
    scripted = Scripted(answer(503, {"code": "prompt_queue_full", "error": "full"}))
    async with DaemonClient("http://daemon", transport=scripted.transport) as client:
        with pytest.raises(DaemonProtocolError, match="prompt_queue_full"):
            await client.prompt("s", "hello")
        assert client.pending_prompts("s") == 0


async def test_a_failed_blocking_turn_is_a_turn_error_with_the_body_details() -> None:
    body = {"code": "prompt_deadline_exceeded", "error": "late", "sessionId": "s", "deadlineMs": 50}
    scripted = Scripted(answer(504, body))
    async with DaemonClient("http://daemon", transport=scripted.transport) as client:
        with pytest.raises(DaemonTurnError) as failed:
            await client.prompt("s", "hello", wait=True)
    assert scripted.requests[0].url.params["wait"] == "true"
    error = failed.value
    assert (error.code, error.status_code, error.prompt_id, str(error)) == (
        "prompt_deadline_exceeded",
        504,
        None,
        "late",
    )
    assert error.data == {"sessionId": "s", "deadlineMs": 50} and not error.retryable


@pytest.mark.parametrize(
    ("raised", "error", "text"),
    [
        (httpx2.ConnectError("refused"), DaemonConnectError, "cannot connect: refused"),
        (httpx2.ReadTimeout("slow"), DaemonTimeoutError, "timed out: slow"),
        (httpx2.RemoteProtocolError("garbage"), DaemonTransportError, "failed: garbage"),
    ],
)
async def test_network_errors_are_wrapped_with_their_request(
    raised: Exception, error: type[DaemonTransportError], text: str
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise raised

    async with DaemonClient("http://daemon", transport=httpx2.MockTransport(handler)) as client:
        with pytest.raises(error) as failed:
            await client.capabilities()
    assert type(failed.value) is error and failed.value.__cause__ is raised
    assert (failed.value.method, failed.value.url) == ("GET", "http://daemon/capabilities")
    assert str(failed.value) == f"GET http://daemon/capabilities {text}".replace(
        "capabilities cannot", "capabilities: cannot"
    )


@pytest.mark.parametrize(
    "body", [{"v": 1}, {"v": 1, "limits": {"maxPendingPromptsPerSession": -1}}, [1], b"nope"], ids=str
)
async def test_malformed_capabilities_are_a_protocol_error(body: Any) -> None:
    scripted = Scripted(answer(200, body))
    async with DaemonClient("http://daemon", transport=scripted.transport) as client:
        with pytest.raises(DaemonProtocolError):
            await client.capabilities()


async def test_events_of_unknown_types_are_kept_and_malformed_ones_are_protocol_errors() -> None:
    frames = (
        b'id: 1\nevent: future_thing\ndata: {"sessionId": "s", "x": 1}\n\nid: 2\nevent: turn_complete\ndata: {}\n\n'
    )
    scripted = Scripted(answer(200, frames, **{"content-type": "text/event-stream"}))
    async with DaemonClient("http://daemon", transport=scripted.transport) as client:
        async with client.events("s") as events:
            unknown = await anext(events)
            assert isinstance(unknown, UnknownEvent) and unknown.event == "future_thing"
            assert unknown.payload == {"sessionId": "s", "x": 1}
            with pytest.raises(DaemonProtocolError, match="promptId"):
                await anext(events)
        assert events.closed
        assert [e async for e in events] == []  # a closed stream ends
        with pytest.raises(DaemonClientClosedError, match="stream is closed"):
            await events.connect()


async def test_an_events_answer_that_is_not_sse_is_a_protocol_error() -> None:
    scripted = Scripted(answer(200, {"not": "sse"}))
    async with DaemonClient("http://daemon", transport=scripted.transport) as client, client.events("s") as events:
        with pytest.raises(DaemonProtocolError, match="text/event-stream"):
            await anext(events)


def test_error_messages_are_readable() -> None:
    limit = DaemonPendingPromptLimitError("s", 2, 2)
    assert (limit.session_id, limit.limit, limit.pending_count) == ("s", 2, 2)
    assert str(limit) == 'Local prompt limit reached for session "s" (2/2 pending); nothing was sent'
