"""The ACP method table: every entry names a real ``acp.schema`` model, and params are validated before any
handler runs (a failure is ``InvalidInputError`` with field errors, the handler not called, the bridge unchanged)."""

from __future__ import annotations

import inspect
import typing
from typing import Any, cast

import acp.interfaces
import acp.router
import acp.schema
import pytest
from acp.agent.router import build_agent_router
from pydantic import BaseModel

from acp_server.acp import METHODS, NOTIFICATIONS, Method, Notification
from acp_server.errors import InvalidInputError

from ._support import bound

pytestmark = pytest.mark.anyio


def _names(model: Any) -> set[str]:
    """The model's name, or each member's of a union (``a | b``)."""
    members = typing.get_args(model) or (model,)
    return {member.__name__ for member in members}


def acp_routed_models(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """The request/notification models acp's own agent router validates each method with: in the 1.0 line, the
    route metadata of its ``Agent`` protocol (only its stable methods); in 0.12, what ``build_agent_router``
    registers."""
    seen: dict[str, set[str]] = {}
    if hasattr(acp.router.MessageRouter, "from_protocol"):  # 1.0: routes are declared on the protocol's members
        for _attr, member in inspect.getmembers(acp.interfaces.Agent):
            route = getattr(member, "__route__", None)
            if route is not None and not route.unstable:
                seen[route.method] = _names(route.request_type)
        return seen
    original_request = acp.router.MessageRouter.route_request
    original_notification = acp.router.MessageRouter.route_notification

    def route_request(self: Any, method: str, model: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
        seen[method] = _names(model)
        return original_request(self, method, model, *args, **kwargs)

    def route_notification(self: Any, method: str, model: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
        seen[method] = _names(model)
        return original_notification(self, method, model, *args, **kwargs)

    monkeypatch.setattr(acp.router.MessageRouter, "route_request", route_request)
    monkeypatch.setattr(acp.router.MessageRouter, "route_notification", route_notification)
    build_agent_router(cast(Any, object()))
    return seen


ENTRIES: list[tuple[str, Method | Notification]] = [*METHODS.items(), *NOTIFICATIONS.items()]


def test_every_table_entry_names_a_real_acp_schema_model() -> None:
    for name, entry in ENTRIES:
        if entry.model is None:
            # hand-checked: fast, an extension, an apiType the SDK refuses, or newer than the Python SDK's schema
            names = ("initialize", "_acp-server/set_title", "_acp-server/rewind", "providers/set", "session/set_title")
            assert name in (*names, "session/status")
            continue
        found = getattr(acp.schema, entry.model, None)
        assert isinstance(found, type) and issubclass(found, BaseModel), (name, entry.model)


def test_each_method_uses_the_model_acp_itself_routes_it_with(monkeypatch: pytest.MonkeyPatch) -> None:
    routed = acp_routed_models(monkeypatch)
    assert routed, "acp's agent router routed nothing: the introspection broke"
    for name, entry in ENTRIES:
        if entry.model is not None and name in routed:
            assert entry.model in routed[name], name
    assert NOTIFICATIONS["$/cancel_request"].model == "CancelRequestNotification"
    assert acp.schema.CancelRequestNotification.model_validate({"requestId": 3}).request_id == 3


def test_the_table_covers_what_initialize_advertises() -> None:
    for name in ("session/load", "session/list", "session/resume", "session/close", "session/fork", "session/delete"):
        assert name in METHODS
    assert "session/cancel" in NOTIFICATIONS


BAD_REQUESTS = [
    ("session/new", {}, "cwd"),
    ("session/new", {"cwd": 5, "mcpServers": []}, "cwd"),
    ("session/prompt", {"sessionId": "s"}, "prompt"),
    ("session/prompt", {"sessionId": "s", "prompt": "hello"}, "prompt"),
    ("session/prompt", {"sessionId": "s", "prompt": [{"type": "text"}]}, "prompt.0"),
    ("session/load", {"sessionId": 3, "cwd": "/tmp", "mcpServers": []}, "sessionId"),
    ("session/close", {}, "sessionId"),
    ("session/delete", {"sessionId": 7}, "sessionId"),
    ("session/fork", {"cwd": "/tmp"}, "sessionId"),
    ("session/resume", {"sessionId": "s"}, "cwd"),
    ("authenticate", {}, "methodId"),
]


@pytest.mark.parametrize(("method", "params", "field"), BAD_REQUESTS)
async def test_bad_params_are_refused_with_field_errors_before_the_handler_runs(
    monkeypatch: pytest.MonkeyPatch, method: str, params: dict[str, Any], field: str
) -> None:
    called: list[Any] = []

    async def spy(agent: Any, request: Any, peer: Any) -> Any:
        called.append(request)
        return {}

    entry = METHODS[method]
    monkeypatch.setitem(METHODS, method, Method(entry.model, spy, entry.params_optional))
    async with bound() as b:
        sessions_before = b.bridge.sessions
        page_before = await b.bridge.list_sessions()
        peer = b.peer()
        with pytest.raises(InvalidInputError) as caught:
            await b.requests[method](params, peer)
        assert called == []
        assert peer.log == []
        assert b.bridge.sessions == sessions_before
        assert (await b.bridge.list_sessions()) == page_before
        assert b.runner.started == []
    error = caught.value
    assert str(error).startswith(f"Invalid params for {method}: ")
    assert error.errors, "the field errors are listed"
    assert any(str(e["field"]).startswith(field) for e in error.errors), error.errors
    assert all(set(e) == {"field", "message"} for e in error.errors)
    assert error.error_kind == "invalid_params"


async def test_params_that_are_not_an_object_are_refused_before_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[Any] = []

    async def spy(agent: Any, request: Any, peer: Any) -> Any:
        called.append(request)

    monkeypatch.setitem(METHODS, "session/new", Method("NewSessionRequest", spy))
    async with bound() as b:
        params: Any
        for params in (None, [], "x", 3):
            with pytest.raises(InvalidInputError, match="expected an object"):
                await b.requests["session/new"](params, b.peer())
    assert called == []


async def test_valid_params_reach_the_handler_as_the_typed_model(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[Any] = []

    async def spy(agent: Any, request: Any, peer: Any) -> Any:
        called.append((agent, request, peer))
        return {"ok": True}

    monkeypatch.setitem(METHODS, "session/new", Method("NewSessionRequest", spy))
    async with bound() as b:
        peer = b.peer(8)
        assert await b.requests["session/new"]({"cwd": "/w", "mcpServers": []}, peer) == {"ok": True}
        [(agent, request, got_peer)] = called
        assert agent is b.agent
        assert isinstance(request, acp.schema.NewSessionRequest)
        assert request.cwd == "/w"
        assert got_peer is peer


async def test_optional_params_validate_as_an_empty_object(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[Any] = []

    async def spy(agent: Any, request: Any, peer: Any) -> Any:
        called.append(request)
        return {}

    monkeypatch.setitem(
        METHODS,
        "session/list",
        Method("ListSessionsRequest", spy, params_optional=True),
    )
    async with bound() as b:
        await b.requests["session/list"](None, b.peer())
    assert isinstance(called[0], acp.schema.ListSessionsRequest)


@pytest.mark.parametrize(
    ("name", "params"),
    [("session/cancel", {}), ("session/cancel", {"sessionId": 1}), ("$/cancel_request", {}), ("$/cancel_request", [])],
)
async def test_bad_notification_params_are_refused_before_the_handler(
    monkeypatch: pytest.MonkeyPatch, name: str, params: Any
) -> None:
    called: list[Any] = []
    entry = NOTIFICATIONS[name]
    monkeypatch.setitem(
        NOTIFICATIONS,
        name,
        Notification(entry.model, lambda agent, request, peer: called.append(request)),
    )
    async with bound() as b:
        with pytest.raises(InvalidInputError):
            b.notifications[name](params, b.peer(None))
    assert called == []


@pytest.mark.parametrize(
    "params",
    [None, [], {}, {"protocolVersion": True}, {"protocolVersion": 70000}, {"protocolVersion": 1, "clientInfo": 3}],
)
async def test_initialize_is_checked_by_hand_with_field_errors(params: Any) -> None:
    async with bound() as b:
        with pytest.raises(InvalidInputError) as caught:
            await b.requests["initialize"](params, b.peer())
    assert caught.value.errors


async def test_session_new_through_the_table_opens_a_journaled_session() -> None:
    async with bound() as b:
        session_id = await b.new_session()
        assert [s.session_id for s in b.bridge.sessions] == [session_id]
        page = await b.bridge.list_sessions()
        assert [r.session_id for r in page.sessions] == [session_id]


def test_the_provider_methods_exist_only_where_the_agent_has_a_provider_control() -> None:
    """The daemon's agents (no ProviderControl) answer providers/* -32601, as any unknown method; the stdio agent's
    serve them (tests/e2e/test_providers.py)."""
    from acp_server.acp import AcpAgent, AgentOptions, ProviderControl, bind

    provider_methods = {"providers/list", "providers/set", "providers/disable"}
    bridge = cast(Any, object())  # bind only builds the handlers
    assert not provider_methods & set(bind(AcpAgent(bridge, AgentOptions()))[0])
    served = bind(AcpAgent(bridge, AgentOptions(providers=cast(ProviderControl, object()))))[0]
    assert provider_methods <= set(served)
