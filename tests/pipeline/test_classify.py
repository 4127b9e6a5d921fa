"""``classify_retry_error``: one table row per rule and per mapped exception type."""

from __future__ import annotations

import asyncio
import errno
import socket
from itertools import pairwise
from typing import Any

import anyio
import httpcore2
import httpx2
import pytest
import trio

from acp_server.pipeline import (
    RetryClassification,
    StreamContentError,
    StreamInactivityTimeoutError,
    StreamLifetimeExceededError,
    classify_retry_error,
)
from acp_server.pipeline._classify import TRANSPORT_CODES, transport_code_of

from ._mocks import connection_error, status_error, timeout_error


def chained(*excs: BaseException) -> BaseException:
    """``excs[0]`` raised from ``excs[1]`` raised from ... (``__cause__`` links, outermost first)."""
    for outer, inner in pairwise(excs):
        outer.__cause__ = inner
    return excs[0]


def oserror(code: int) -> OSError:
    return OSError(code, errno.errorcode[code])


R = RetryClassification
TABLE: list[tuple[str, BaseException, RetryClassification]] = [
    # 1. abort / cancel first, never retried
    ("asyncio cancel", asyncio.CancelledError(), R("abort", "fail-fast", "cancelled by the caller")),
    # 2. 429
    ("429", status_error(429), R("rate_limit", "retryable", "rate limited (HTTP 429)", status=429)),
    (
        "429 with a reset cause",
        chained(status_error(429), ConnectionResetError()),
        R("rate_limit", "retryable", "rate limited (HTTP 429)", status=429),
    ),
    # 3. transport codes, explicit first
    (
        "watchdog idle",
        StreamInactivityTimeoutError(1000, 0, 1000),
        R("transport", "retryable", "transport error ETIMEDOUT", transport_code="ETIMEDOUT"),
    ),
    (
        "watchdog lifetime",
        StreamLifetimeExceededError(9000, 3, 9000),
        R("transport", "retryable", "transport error ETIMEDOUT", transport_code="ETIMEDOUT"),
    ),
    *[
        (
            f"errno {name}",
            connection_error(
                chained(httpx2.ConnectError("x"), httpcore2.ConnectError("y"), oserror(getattr(errno, name)))
            ),
            R("transport", "retryable", f"transport error {name}", transport_code=name),
        )
        for name in (
            "ETIMEDOUT",
            "ECONNRESET",
            "ECONNREFUSED",
            "EPIPE",
            "ECONNABORTED",
            "EHOSTUNREACH",
            "ENETUNREACH",
        )
    ],
    (
        "gaierror EAI_NONAME",
        connection_error(
            chained(httpx2.ConnectError("x"), socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
        ),
        R("transport", "retryable", "transport error ENOTFOUND", transport_code="ENOTFOUND"),
    ),
    (
        "gaierror EAI_AGAIN",
        connection_error(
            chained(
                httpx2.ConnectError("x"),
                socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
            )
        ),
        R("transport", "retryable", "transport error EAI_AGAIN", transport_code="EAI_AGAIN"),
    ),
    # 3. transport codes from types (no errno available)
    (
        "APITimeoutError",
        timeout_error(),
        R("transport", "retryable", "transport error ETIMEDOUT", transport_code="ETIMEDOUT"),
    ),
    *[
        (
            f"APIConnectionError <- httpx2.{cls.__name__}",
            connection_error(cls("x")),
            R("transport", "retryable", f"transport error {code}", transport_code=code),
        )
        for cls, code in (
            (httpx2.ConnectTimeout, "ETIMEDOUT"),
            (httpx2.ReadTimeout, "ETIMEDOUT"),
            (httpx2.WriteTimeout, "ETIMEDOUT"),
            (httpx2.PoolTimeout, "ETIMEDOUT"),
            (httpx2.ConnectError, "ECONNREFUSED"),
            (httpx2.ReadError, "ECONNRESET"),
            (httpx2.WriteError, "EPIPE"),
            (httpx2.RemoteProtocolError, "ECONNRESET"),
        )
    ],
    *[
        (
            f"httpcore2.{cls.__name__}",
            chained(httpx2.TransportError("x"), cls("y")),
            R("transport", "retryable", f"transport error {code}", transport_code=code),
        )
        for cls, code in (
            (httpcore2.ReadTimeout, "ETIMEDOUT"),
            (httpcore2.ConnectError, "ECONNREFUSED"),
            (httpcore2.ReadError, "ECONNRESET"),
            (httpcore2.WriteError, "EPIPE"),
            (httpcore2.RemoteProtocolError, "ECONNRESET"),
        )
    ],
    (
        "bare APIConnectionError",
        connection_error(ValueError("no transport cause")),
        R("transport", "retryable", "transport error ECONNRESET", transport_code="ECONNRESET"),
    ),
    (
        "builtin TimeoutError",
        TimeoutError(),
        R("transport", "retryable", "transport error ETIMEDOUT", transport_code="ETIMEDOUT"),
    ),
    (
        "BrokenPipeError",
        BrokenPipeError(),
        R("transport", "retryable", "transport error EPIPE", transport_code="EPIPE"),
    ),
    (
        "anyio BrokenResourceError",
        anyio.BrokenResourceError(),
        R("transport", "retryable", "transport error ECONNRESET", transport_code="ECONNRESET"),
    ),
    (
        "503 with a reset cause",
        chained(status_error(503), ConnectionResetError()),
        R("transport", "retryable", "transport error ECONNRESET", transport_code="ECONNRESET", status=503),
    ),
    # 4. 401 / 403 fail fast (a transport cause does not make a 4xx retryable)
    ("401", status_error(401), R("http", "fail-fast", "not authorised (HTTP 401)", status=401)),
    ("403", status_error(403), R("http", "fail-fast", "not authorised (HTTP 403)", status=403)),
    (
        "401 with a reset cause",
        chained(status_error(401), ConnectionResetError()),
        R("http", "fail-fast", "not authorised (HTTP 401)", status=401),
    ),
    # 5. other 4xx fail fast
    *[
        (str(s), status_error(s), R("http", "fail-fast", f"client error (HTTP {s})", status=s))
        for s in (400, 404, 408, 409, 413, 422)
    ],
    # 6. a 5xx that says the request is invalid fails fast
    *[
        (name, status_error(500, error=error), R("http", "fail-fast", "invalid request (HTTP 500)", status=500))
        for name, error in (
            (
                "500 pydantic validation error (llama-cpp-python)",
                {
                    "message": "1 validation error for CreateChatCompletionRequest\nmessages.2.content\n  "
                    "Input should be a valid string",
                    "type": "internal_server_error",
                    "param": None,
                },
            ),
            ("500 Input should be", {"message": "messages.1: Input should be an object", "type": "server_error"}),
            ("500 invalid_request_error", {"message": "bad", "type": "invalid_request_error"}),
            ("500 naming a param", {"message": "bad", "type": "server_error", "param": "messages"}),
            ("500 FastAPI detail list", {"detail": [{"loc": ["body", "messages"], "msg": "Field required"}]}),
        )
    ],
    # 7. any other 5xx retryable
    *[
        (str(s), status_error(s), R("http", "retryable", f"server error (HTTP {s})", status=s))
        for s in (500, 502, 503, 504, 529)
    ],
    (
        "500 with an empty param",
        status_error(500, error={"message": "out of memory", "type": "server_error", "param": ""}),
        R("http", "retryable", "server error (HTTP 500)", status=500),
    ),
    # 8. content
    (
        "empty stream",
        StreamContentError("x", reason="empty_stream"),
        R("stream_content", "retryable", "empty stream"),
    ),
    (
        "no finish, no content",
        StreamContentError("x", reason="no_finish_no_content"),
        R("stream_content", "retryable", "no finish no content"),
    ),
    ("non-SSE", StreamContentError("x", reason="non_sse"), R("stream_content", "fail-fast", "non sse")),
    # 9. unknown
    ("ValueError", ValueError("x"), R("unknown", "unknown", "ValueError")),
]


@pytest.mark.parametrize(("exc", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_classification_table(exc: BaseException, expected: RetryClassification) -> None:
    assert classify_retry_error(exc) == expected


def test_every_transport_code_is_covered_by_the_table() -> None:
    codes = {row[2].transport_code for row in TABLE}
    assert codes >= TRANSPORT_CODES


def test_cause_chain_is_followed_at_most_four_links_deep() -> None:
    near = chained(ValueError("0"), ValueError("1"), ValueError("2"), ValueError("3"), ConnectionResetError())
    far = chained(
        ValueError("0"),
        ValueError("1"),
        ValueError("2"),
        ValueError("3"),
        ValueError("4"),
        ConnectionResetError(),
    )
    assert transport_code_of(near) == "ECONNRESET"
    assert transport_code_of(far) is None


def test_implicit_context_counts_as_a_cause() -> None:
    try:
        try:
            raise oserror(errno.ECONNRESET)
        except OSError:
            raise RuntimeError("while reading")  # noqa: B904 - the implicit __context__ is the point
    except RuntimeError as exc:
        assert transport_code_of(exc) == "ECONNRESET"


def test_a_cycle_in_the_chain_terminates() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert classify_retry_error(a).kind == "unknown"


def test_an_api_error_body_code_that_is_not_a_transport_code_is_ignored() -> None:
    exc: Any = status_error(400)
    exc.code = "invalid_request_error"
    assert classify_retry_error(exc).kind == "http"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_running_backends_cancellation_is_an_abort(anyio_backend: str) -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.sleep(1)
        except anyio.get_cancelled_exc_class() as exc:
            assert classify_retry_error(exc).kind == "abort"
            raise
    assert scope.cancelled_caught


def test_trio_cancelled_is_an_abort_without_a_running_loop() -> None:
    assert classify_retry_error(trio.Cancelled._create()).kind == "abort"


def test_a_code_property_of_another_library_is_not_run() -> None:
    """aiohttp's ``ClientResponseError.code`` is a deprecated property that warns (an error under ``-W error``); a
    property could raise too. Classifying never raises: such a ``code`` is not read, the rest of the chain is."""

    class Deprecated(Exception):
        @property
        def code(self) -> str:
            raise RuntimeError("code is deprecated")

    try:
        try:
            raise Deprecated("bad status line")
        except Deprecated as inner:
            raise httpx2.RemoteProtocolError("not HTTP") from inner
    except httpx2.RemoteProtocolError as exc:
        outer = exc
    assert classify_retry_error(outer).transport_code == "ECONNRESET"
