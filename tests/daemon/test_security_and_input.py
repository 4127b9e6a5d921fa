"""Who may call (token, Host, Origin, CORS) and what may be sent (bodies, sizes, routes): refused with JSON bodies."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from acp_server.daemon import DaemonOptions

from ._support import TEXT, assert_documented, running_daemon

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token-0123456789"


async def test_without_a_token_every_route_is_open_on_loopback() -> None:
    async with running_daemon(None) as served:
        assert (await served.client.get("/capabilities")).status_code == 200
        health = (await served.client.get("/health")).json()
        assert health == {"status": "ok", "instance": served.daemon.bridge.store.instance}


async def test_with_a_token_every_route_but_health_needs_the_bearer() -> None:
    async with running_daemon(None, token=TOKEN) as served, httpx2.AsyncClient(base_url=served.url) as anonymous:
        health = await anonymous.get("/health")
        assert health.status_code == 200
        assert_documented("GET", "/health", health)
        session_id = await served.new_session()
        attempts = [
            ("GET", "/capabilities", "/capabilities", {}),
            ("POST", "/session", "/session", {"json": {"cwd": "/tmp"}}),
            ("POST", "/session/{sessionId}/prompt", f"/session/{session_id}/prompt", {"json": {"prompt": TEXT}}),
            ("POST", "/session/{sessionId}/cancel", f"/session/{session_id}/cancel", {}),
            ("GET", "/session/{sessionId}/events", f"/session/{session_id}/events", {}),
            ("DELETE", "/session/{sessionId}", f"/session/{session_id}", {}),
        ]
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            for method, template, path, kwargs in attempts:
                response = await anonymous.request(method, path, headers=headers, **kwargs)
                assert response.status_code == 401, (method, path, headers)
                assert response.json()["code"] == "unauthorized"
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
                assert_documented(method, template, response)
        assert served.bridge.get(session_id).pending_prompt_count == 0  # nothing got through
        good = await anonymous.get("/capabilities", headers={"Authorization": f"bearer {TOKEN}"})
        assert good.status_code == 200


async def test_a_tokenless_daemon_refuses_non_loopback_host_headers() -> None:
    async with running_daemon(None) as served:
        for host in ("localhost:4170", "127.0.0.1", "[::1]:80"):
            assert (await served.client.get("/health", headers={"Host": host})).status_code == 200
        rebound = await served.client.get("/capabilities", headers={"Host": "evil.example:4170"})
        assert rebound.status_code == 403
        assert rebound.json()["code"] == "forbidden_host"
        assert_documented("GET", "/capabilities", rebound)
    async with running_daemon(None, token=TOKEN) as served:  # with a token the Host does not matter
        response = await served.client.get("/capabilities", headers={"Host": "daemon.internal"})
        assert response.status_code == 200


async def test_browser_origins_are_refused_unless_allowed_and_cors_is_off_by_default() -> None:
    async with running_daemon(None) as served:
        response = await served.client.get("/capabilities", headers={"Origin": "https://evil.example"})
        assert response.status_code == 403 and response.json()["code"] == "forbidden_origin"
        assert "access-control-allow-origin" not in response.headers
        preflight = await served.client.options(
            "/session", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in preflight.headers
    async with running_daemon(None, allow_origins=("https://ui.example",)) as served:
        preflight = await served.client.options(
            "/session",
            headers={
                "Origin": "https://ui.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, authorization, last-event-id",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://ui.example"
        response = await served.client.post("/session", json={"cwd": "/"}, headers={"Origin": "https://ui.example"})
        assert response.status_code == 201
        assert response.headers["access-control-allow-origin"] == "https://ui.example"
        other = await served.client.get("/capabilities", headers={"Origin": "https://other.example"})
        assert other.status_code == 403


BAD_PROMPT_BODIES: list[tuple[str, Any, str]] = [
    ("not-json", b"{nope", "(body)"),
    ("not-object", b"[1, 2]", "(body)"),
    ("no-prompt", b"{}", "prompt"),
    ("prompt-not-list", b'{"prompt": "hi"}', "prompt"),
    ("empty-prompt", b'{"prompt": []}', "prompt"),
    ("bad-block", b'{"prompt": [{"type": "text"}]}', "prompt.0.text"),
    ("audio", b'{"prompt": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]}', "prompt"),
    ("unknown-field", b'{"prompt": [{"type": "text", "text": "x"}], "sessionId": "x"}', "sessionId"),
    ("bad-deadline", b'{"prompt": [{"type": "text", "text": "x"}], "deadlineMs": -1}', "deadlineMs"),
    ("bool-deadline", b'{"prompt": [{"type": "text", "text": "x"}], "deadlineMs": true}', "deadlineMs"),
    ("huge-deadline", b'{"prompt": [{"type": "text", "text": "x"}], "deadlineMs": 1' + b"0" * 400 + b"}", "deadlineMs"),
    ("long-deadline", b'{"prompt": [{"type": "text", "text": "x"}], "deadlineMs": 2147483648}', "deadlineMs"),
]


@pytest.mark.parametrize(
    ("body", "field"), [(b, f) for _, b, f in BAD_PROMPT_BODIES], ids=[i for i, _, _ in BAD_PROMPT_BODIES]
)
async def test_bad_prompt_bodies_are_400_naming_the_field_and_admit_nothing(body: bytes, field: str) -> None:
    async with running_daemon(None) as served:
        session_id = await served.new_session()
        response = await served.client.post(
            f"/session/{session_id}/prompt", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400, response.text
        assert_documented("POST", "/session/{sessionId}/prompt", response)
        error = response.json()
        assert error["code"] == "invalid_request"
        assert any(d["field"].startswith(field) for d in error["details"]), error
        assert served.daemon.event_log(session_id).published == 0


async def test_other_bad_requests() -> None:
    async with running_daemon(None) as served:
        session_id = await served.new_session()
        wrong_type = await served.client.post(
            f"/session/{session_id}/prompt", content=b'{"prompt": []}', headers={"Content-Type": "text/plain"}
        )
        assert wrong_type.status_code == 415 and wrong_type.json()["code"] == "unsupported_media_type"
        assert_documented("POST", "/session/{sessionId}/prompt", wrong_type)
        for body in ({}, {"cwd": 3}, {"cwd": "relative/path"}, {"cwd": "/", "mcpServers": {}}, {"cwd": "/", "x": 1}):
            response = await served.client.post("/session", json=body)
            assert response.status_code == 400, body
            assert_documented("POST", "/session", response)
        bad_wait = await served.client.post(
            f"/session/{session_id}/prompt", params={"wait": "maybe"}, json={"prompt": TEXT}
        )
        assert bad_wait.status_code == 400
        unknown = await served.client.post("/session/nope/prompt", json={"prompt": TEXT})
        assert unknown.status_code == 404
        assert unknown.json() == {"code": "session_not_found", "error": 'Session "nope" not found', "sessionId": "nope"}
        assert_documented("POST", "/session/{sessionId}/prompt", unknown)
        cancel_unknown = await served.client.post("/session/nope/cancel")
        assert cancel_unknown.status_code == 404
        assert_documented("POST", "/session/{sessionId}/cancel", cancel_unknown)


async def test_bodies_over_the_cap_are_413_whether_declared_or_streamed() -> None:
    async with running_daemon(None, max_body_bytes=1024) as served:
        session_id = await served.new_session()
        big = b'{"prompt": [{"type": "text", "text": "' + b"x" * 2000 + b'"}]}'
        declared = await served.client.post(
            f"/session/{session_id}/prompt", content=big, headers={"Content-Type": "application/json"}
        )
        assert declared.status_code == 413
        assert declared.json() == {
            "code": "payload_too_large",
            "error": "Request body exceeds the 1024-byte limit",
            "limit": 1024,
        }
        assert_documented("POST", "/session/{sessionId}/prompt", declared)

        async def chunks() -> Any:
            for i in range(0, len(big), 256):
                yield big[i : i + 256]

        streamed = await served.client.post(
            f"/session/{session_id}/prompt", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert streamed.status_code == 413 and streamed.json()["code"] == "payload_too_large"
        assert served.daemon.event_log(session_id).published == 0
        assert (await served.client.get("/health")).status_code == 200  # the daemon is fine


async def test_a_huge_body_is_refused_without_being_read() -> None:
    async with running_daemon(None, max_body_bytes=64 * 1024) as served:
        huge = b"x" * (32 * 1024 * 1024)
        try:
            response = await served.client.post("/session", content=huge, headers={"Content-Type": "application/json"})
        except httpx2.WriteError:  # the server answered 413 and closed before the client finished writing
            response = None
        if response is not None:
            assert response.status_code == 413
        assert (await served.client.get("/health")).status_code == 200


async def test_unknown_routes_and_methods() -> None:
    async with running_daemon(None) as served:
        missing = await served.client.get("/nope")
        assert missing.status_code == 404
        assert missing.json() == {"code": "not_found", "error": "No route for /nope", "path": "/nope"}
        for path in ("/session/abc/unknown", "/sessions", "/session/a/b/c"):
            assert (await served.client.get(path)).json()["code"] == "not_found"
        wrong = await served.client.put("/session")
        assert wrong.status_code == 405
        assert wrong.json()["code"] == "method_not_allowed" and wrong.json()["allowed"] == ["POST"]
        assert wrong.headers["Allow"] == "POST"
        acp = await served.client.put("/acp")  # /acp serves GET (and HEAD), POST and DELETE: a 405 says them all
        assert acp.status_code == 405
        assert sorted(m.strip() for m in acp.headers["Allow"].split(",")) == ["DELETE", "GET", "HEAD", "POST"]
        assert sorted(acp.json()["allowed"]) == ["DELETE", "GET", "HEAD", "POST"]


BAD_EVENT_IDS: list[tuple[str, str, str]] = [
    ("superscript-two", "\u00b2", "not an event id"),
    ("arabic-indic", "\u0661\u0662", "not an event id"),
    ("5000-digits", "1" * 5000, "event id out of range"),
    ("2-to-the-53", str(2**53), "event id out of range"),
    ("negative", "-1", "not an event id"),
    ("fraction", "1.5", "not an event id"),
]


@pytest.mark.parametrize(
    ("value", "message"), [(v, m) for _, v, m in BAD_EVENT_IDS], ids=[i for i, _, _ in BAD_EVENT_IDS]
)
async def test_a_bad_event_cursor_is_400_naming_it_in_the_header_or_the_query(value: str, message: str) -> None:
    async with running_daemon(None) as served:
        session_id = await served.new_session()
        path = f"/session/{session_id}/events"
        if all(ord(c) < 256 for c in value):  # what a header can carry (as latin-1 bytes)
            header = await served.client.get(path, headers={"Last-Event-ID": value.encode("latin-1")})
            assert header.status_code == 400, header.text
            assert_documented("GET", "/session/{sessionId}/events", header)
            assert header.json()["details"] == [{"field": "Last-Event-ID", "message": message}]
        query = await served.client.get(path, params={"lastEventId": value})
        assert query.status_code == 400, query.text
        assert_documented("GET", "/session/{sessionId}/events", query)
        assert query.json()["details"] == [{"field": "lastEventId", "message": message}]


async def test_the_largest_event_cursor_is_accepted() -> None:
    async with running_daemon(None) as served:
        session_id = await served.new_session()
        path = f"/session/{session_id}/events"
        async with served.client.stream("GET", path, headers={"Last-Event-ID": str(2**53 - 1)}) as response:
            assert response.status_code == 200


# -- unsafe configuration ---------------------------------------------------------------------------------------


def test_any_origin_needs_a_token() -> None:
    with pytest.raises(ValueError, match=r"refusing --allow-origin '\*' without a token"):
        DaemonOptions(allow_origins=("*",))
    assert DaemonOptions(allow_origins=("*",), token=TOKEN).allow_origins == ("*",)
    assert DaemonOptions(allow_origins=("https://ui.example",)).token is None  # a named origin is the operator's


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_a_blank_token_is_refused_and_a_token_is_stripped(blank: str) -> None:
    with pytest.raises(ValueError, match="must not be empty or blank"):
        DaemonOptions(token=blank)
    with pytest.raises(ValueError, match="must not be empty or blank"):
        DaemonOptions(host="0.0.0.0", token=blank)
    assert DaemonOptions(host="0.0.0.0", token=f"{blank}{TOKEN}{blank}").token == TOKEN


async def test_a_stripped_token_is_the_one_required() -> None:
    async with running_daemon(None, token=f"  {TOKEN}\n") as served, httpx2.AsyncClient(base_url=served.url) as other:
        stripped = await other.get("/capabilities", headers={"Authorization": f"Bearer {TOKEN}"})
        assert stripped.status_code == 200
