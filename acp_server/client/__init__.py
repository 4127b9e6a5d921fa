"""The Python client SDK of the HTTP daemon (``acp-server serve``): async, on anyio and httpx2.

``DaemonClient`` speaks the daemon's REST + SSE routes; ``DaemonSessionClient`` binds one session with one
long-lived event subscription. Both keep a local per-session count of prompts in flight and refuse one more at
the limit *before sending anything* (:class:`DaemonPendingPromptLimitError`); the daemon stays the authority and
answers 503 (:class:`DaemonPromptQueueFullError`) past its own limit. Errors: one tree, in ``_exceptions.py``.
The ids Q1–Q14 cited in its comments are the queue requirements written out in ``docs/requirements.md``.
Tool calls arrive as :class:`ToolCallEvent`, the model's plan as :class:`PlanEvent` (both also given to
``on_update``); a prompt's permission requests
(:class:`PermissionRequestEvent`) are answered by its ``on_permission`` callback — without one, rejected.

    async with DaemonClient("http://127.0.0.1:4170") as client:
        async with await DaemonSessionClient.create_or_attach(client, "/my/project") as session:
            result = await session.prompt("hello", on_update=lambda u: print(u.text or "", end=""))
"""

from ._client import DaemonClient
from ._events import (
    ConfigChangedEvent,
    DaemonEvent,
    ModeChangedEvent,
    PermissionOption,
    PermissionRequestEvent,
    PlanEntry,
    PlanEvent,
    PromptAcceptedEvent,
    ResyncRequiredEvent,
    SessionClosedEvent,
    SessionUpdateEvent,
    ToolCallEvent,
    TurnCompleteEvent,
    TurnErrorEvent,
    UnknownEvent,
)
from ._exceptions import (
    DaemonClientClosedError,
    DaemonClientError,
    DaemonConnectError,
    DaemonEventsLostError,
    DaemonEventStreamEndedError,
    DaemonFeatureUnavailableError,
    DaemonForbiddenError,
    DaemonHTTPError,
    DaemonInvalidRequestError,
    DaemonMethodNotAllowedError,
    DaemonNotFoundError,
    DaemonPayloadTooLargeError,
    DaemonPendingPromptLimitError,
    DaemonPermissionRequestNotFoundError,
    DaemonPromptNotFoundError,
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
)
from ._limits import validate_limit
from ._models import Capabilities, ConfigOption, ModeInfo, PromptInput, PromptResult, SessionConfig
from ._options import DEFAULT_RECONNECT_DELAYS, DEFAULT_TIMEOUT, EVENTS_READ_TIMEOUT_S, TOKEN_ENV
from ._prompting import CANCEL_TIMEOUT_S
from ._session import INHERIT, DaemonSessionClient, Inherit
from ._stream import EventStream
from ._turn import OnPermission, OnUpdate

__all__ = [
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
