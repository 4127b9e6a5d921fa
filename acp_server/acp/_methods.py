"""The ACP method table: one line per method with the ``acp.schema`` model its params must pass, and its handler.

:func:`bind` turns the table into the callables a dispatcher registers: each validates its params first (a failure
is -32602 with the field errors) and only then calls the handler with the typed request and the :class:`Peer`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._agent import REWIND_METHOD, SET_TITLE_METHOD, AcpAgent, Peer
from ._elicitation import opened, session_elicitor
from ._params import check_session_sent
from ._providers import PROVIDER_METHODS, disable_provider, list_providers, set_provider
from ._schema import model, validate

__all__ = ["METHODS", "NOTIFICATIONS", "Method", "Notification", "bind"]

RequestHandler = Callable[[Any, Peer], Awaitable[Any]]
NotificationHandler = Callable[[Any, Peer], None]


@dataclass(frozen=True, slots=True)
class Method:
    """A request: its schema model (None: the handler checks raw params itself) and handler.

    ``params_optional``: absent params validate as ``{}``; ``check``: what is checked of the params as sent, once
    the model has validated them (before the handler; what it returns, unless None, is the handler's last argument).
    """

    model: str | None
    handler: Callable[..., Awaitable[Any]]
    params_optional: bool = False
    check: Callable[[Any, str], Any] | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification: its schema model and its (synchronous) handler; it has no reply."""

    model: str
    handler: Callable[[AcpAgent, Any, Peer], None]


_DIRECTORIES = check_session_sent  # additionalDirectories, and the systemPrompt handed to the handler

METHODS: Mapping[str, Method] = {
    "initialize": Method(None, AcpAgent.initialize),  # checked by hand: its reply must not wait for the schema
    "authenticate": Method("AuthenticateRequest", AcpAgent.authenticate),
    "session/new": Method("NewSessionRequest", AcpAgent.new_session, check=_DIRECTORIES),
    "session/load": Method("LoadSessionRequest", AcpAgent.load_session, check=_DIRECTORIES),
    "session/resume": Method("ResumeSessionRequest", AcpAgent.resume_session, check=_DIRECTORIES),
    "session/list": Method("ListSessionsRequest", AcpAgent.list_sessions, params_optional=True),
    "session/close": Method("CloseSessionRequest", AcpAgent.close_session),
    "session/delete": Method("DeleteSessionRequest", AcpAgent.delete_session),
    "session/prompt": Method("PromptRequest", AcpAgent.prompt),
    "session/fork": Method("ForkSessionRequest", AcpAgent.fork_session, check=_DIRECTORIES),
    "session/set_mode": Method("SetSessionModeRequest", AcpAgent.set_mode),
    "session/set_config_option": Method("SetSessionConfigOptionSelectRequest", AcpAgent.set_config_option),
    "session/set_title": Method(None, AcpAgent.set_session_title),  # unstable: no schema model, checked by hand
    "session/status": Method(None, AcpAgent.session_status),  # unstable: no schema model, checked by hand
    SET_TITLE_METHOD: Method(None, AcpAgent.set_title),  # the extension it was before: still answered
    REWIND_METHOD: Method(None, AcpAgent.rewind),  # an extension, checked by hand (acp/_rewind.py)
    # ACP's unstable provider methods, only where the agent has a ProviderControl (see bind)
    "providers/list": Method("ListProvidersRequest", list_providers, params_optional=True),
    "providers/set": Method(None, set_provider),  # checked by hand: apiType may be any string (see _providers.py)
    "providers/disable": Method("DisableProviderRequest", disable_provider),
}

NOTIFICATIONS: Mapping[str, Notification] = {
    "session/cancel": Notification("CancelNotification", AcpAgent.cancel),
    "$/cancel_request": Notification("CancelRequestNotification", AcpAgent.cancel_request),
}


def _request(agent: AcpAgent, name: str, method: Method) -> RequestHandler:
    async def call(params: Any, peer: Peer) -> Any:
        # a session this request opens: its MCP servers' elicitations go to this connection's client, if it can
        timeout_ms = agent._options.fs_request_timeout_ms
        return await opened(session_elicitor(peer, agent._client_caps.elicitation, timeout_ms), handle(params, peer))

    async def handle(params: Any, peer: Peer) -> Any:
        if method.model is None:
            return await method.handler(agent, params, peer)
        if params is None and method.params_optional:
            params = {}
        request = validate(model(method.model), params, name)
        sent = None if method.check is None else method.check(params, name)
        if sent is not None:
            return await method.handler(agent, request, peer, sent)
        return await method.handler(agent, request, peer)

    return call


def _notification(agent: AcpAgent, name: str, notification: Notification) -> NotificationHandler:
    def call(params: Any, peer: Peer) -> None:
        notification.handler(agent, validate(model(notification.model), params, name), peer)

    return call


def bind(agent: AcpAgent) -> tuple[dict[str, RequestHandler], dict[str, NotificationHandler]]:
    """The request and notification handlers of one connection's agent, by method name."""
    unserved = PROVIDER_METHODS if agent.provider_control is None else frozenset()
    requests = {name: _request(agent, name, method) for name, method in METHODS.items() if name not in unserved}
    notifications = {name: _notification(agent, name, entry) for name, entry in NOTIFICATIONS.items()}
    return requests, notifications
