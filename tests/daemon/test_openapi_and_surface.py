"""The OpenAPI document and the running app agree both ways; the package's public surface is deliberate."""

from __future__ import annotations

import re
from types import ModuleType

import jsonschema
import pytest
from starlette.routing import Route

import acp_server.daemon as daemon_pkg
from acp_server.config import SERVE_OPTIONS, option_table
from acp_server.daemon import DaemonOptions, create_app, is_loopback_host
from acp_server.provider.offline import LoopbackModel
from tests.docs_pages import page, rendered

from ._support import OPENAPI, TEXT, assert_documented, running_daemon

pytestmark = pytest.mark.anyio


def _template(path: str) -> str:
    return re.sub(r"\{(\w+?)(?::\w+)?\}", lambda m: "{sessionId}" if m.group(1) == "session_id" else m.group(0), path)


async def test_every_route_is_documented_and_every_documented_route_exists() -> None:
    async with running_daemon(None) as served:
        app = create_app(served.daemon)
        served_routes = {
            (method, _template(route.path))
            for route in app.routes
            if isinstance(route, Route)
            for method in (route.methods or ())
            if method != "HEAD"
        }
        documented = {
            (method.upper(), path)
            for path, item in OPENAPI["paths"].items()
            for method in item
            if method in ("get", "post", "delete", "put", "patch")
        }
        assert served_routes == documented
        # ... and each documented route answers on the running app (not 404 not_found / 405).
        session_id = await served.new_session()
        ends = {("DELETE", "/session/{sessionId}"), ("POST", "/session/{sessionId}/delete")}  # they end it: last
        for method, template in sorted(documented, key=lambda r: (r in ends, r)):
            path = template.replace("{sessionId}", session_id)
            if template.endswith("/events"):
                async with served.client.stream(method, path, params={"lastEventId": "0"}) as response:
                    assert response.status_code == 200
                continue
            kwargs = {"json": {"prompt": TEXT}} if template.endswith("/prompt") else {}
            if template == "/session":
                kwargs = {"json": {"cwd": "/"}}
            if template.endswith("/resume"):
                kwargs = {"json": {}}
            if template.endswith("/mode"):
                kwargs = {"json": {"modeId": "read-only"}}
            if template.endswith("/config"):
                kwargs = {"json": {"configId": "model", "value": "m"}}
            if template.endswith("/permission/{requestId}"):
                kwargs = {"json": {"optionId": "allow_once"}}
            response = await served.client.request(method, path, **kwargs)
            assert response.status_code not in (404, 405) or response.json()["code"] in (
                "session_not_found",
                "prompt_not_found",
                "permission_request_not_found",
            )
            assert_documented(method, template, response)


def test_the_document_is_openapi_3_1_with_valid_schemas() -> None:
    assert OPENAPI["openapi"].startswith("3.1")
    for name, schema in OPENAPI["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert name[0].isupper()
    events = OPENAPI["paths"]["/session/{sessionId}/events"]["get"]["x-sse-events"]
    assert set(events) == {
        "prompt_accepted",
        "session_update",
        "turn_complete",
        "turn_error",
        "resync_required",
        "session_closed",
        "tool_call",
        "plan",
        "permission_request",
        "permission_request_ended",
        "mode_changed",
        "config_changed",
        "context_compacted",
    }
    queue_full = OPENAPI["components"]["schemas"]["PromptQueueFullError"]
    assert set(queue_full["required"]) == {"code", "error", "sessionId", "limit", "pendingCount"}
    assert queue_full["additionalProperties"] is False  # Q8: exactly these, no promptId


async def test_every_event_a_turn_produces_matches_its_schema() -> None:
    # EventReader validates each event against x-sse-events; here a full turn with thoughts and text.
    async with LoopbackModel() as model, running_daemon(model) as served:
        session_id = await served.new_session()
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id)).status_code == 202
            seen = await events.until(lambda e: e.event == "turn_complete")
    kinds = {e.data["update"]["sessionUpdate"] for e in seen if e.event == "session_update"}
    assert kinds == {"agent_thought_chunk", "agent_message_chunk", "usage_update"}


def _daemon_parts() -> dict[str, ModuleType]:
    """The daemon's three parts (one job each), by name."""
    return {"rest": daemon_pkg.rest, "remote": daemon_pkg.remote, "server": daemon_pkg.server}


def test_public_surface_is_pinned() -> None:
    assert daemon_pkg.__all__ == sorted(daemon_pkg.__all__, key=lambda n: (not n.isupper(), n))
    assert set(daemon_pkg.__all__) == {
        "ANNOUNCE_PREFIX",
        "DEFAULT_HOST",
        "DEFAULT_PORT",
        "FEATURES",
        "PERMISSION_OPTIONS",
        "RETRY_AFTER_S",
        "Accepted",
        "AcpOverHttp",
        "Daemon",
        "DaemonError",
        "DaemonOptions",
        "EventLog",
        "ForbiddenHostError",
        "ForbiddenOriginError",
        "InvalidRequestError",
        "ListenError",
        "MethodNotAllowedError",
        "PermissionRequestNotFoundError",
        "PromptNotFoundError",
        "RequestBodyTooLargeError",
        "RequestTimeoutError",
        "RingBudget",
        "RouteNotFoundError",
        "RunningDaemon",
        "Subscription",
        "TooManyConnectionsError",
        "UnauthorizedError",
        "UnsupportedMediaTypeError",
        "bind_socket",
        "create_app",
        "daemon_modes",
        "error_body",
        "error_response",
        "http_status",
        "is_loopback_host",
        "open_daemon",
        "run_daemon",
        "turn_error_payload",
        "url_of",
    }
    assert {part: set(module.__all__) for part, module in _daemon_parts().items()} == {
        "remote": {"ROUTES", "AcpOverHttp", "CONNECTION_HEADER", "SESSION_HEADER", "acp", "acp_websocket"},
        "rest": {
            "FEATURES",
            "ROUTES",
            "SEND_BUFFER_BYTES",
            "Accepted",
            "Daemon",
            "EventLog",
            "EventStreamResponse",
            "RingBudget",
            "SessionChannel",
            "Subscription",
        },
        "server": {
            "ABORT_EXTENSION",
            "EMFILE_LOG_INTERVAL_S",
            "LISTEN_BACKLOG",
            "AcceptErrorLog",
            "bind_socket",
            "fd_limited_connections",
            "guarded_protocol",
            "raise_fd_limit",
            "serve_app",
            "url_of",
        },
    }
    for name in daemon_pkg.__all__:
        assert hasattr(daemon_pkg, name)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_options_refuse_a_public_address_without_a_token_and_bad_values() -> None:
    with pytest.raises(ValueError, match="without a token"):
        DaemonOptions(host="0.0.0.0")
    assert DaemonOptions(host="0.0.0.0", token="t").token == "t"
    assert "t0ken" not in repr(DaemonOptions(token="t0ken"))
    for bad in ({"port": -1}, {"event_ring_size": 0}, {"max_body_bytes": 0}, {"allow_origins": ("x",)}):
        with pytest.raises(ValueError):
            DaemonOptions(**bad)  # type: ignore[arg-type]


def test_the_daemon_page_lists_the_serve_options() -> None:
    assert page("daemon.md").count("<!-- generated: serve-options -->") == 1, "docs/daemon.md lacks its options table"
    assert option_table(SERVE_OPTIONS) in rendered("daemon.md")
