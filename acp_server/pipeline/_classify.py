"""Retry classification: what kind of failure an exception is, and whether retrying can help.

``classify_retry_error(exc)`` looks at, in this order (first match wins):

1. an abort / cancellation (anyio's cancel exception, either backend) → ``abort``, fail-fast: never retried;
2. HTTP 429 → ``rate_limit``, retryable;
3. a transport code on the error or its ``__cause__`` / ``__context__`` chain (at most 4 links deep), when the
   error has no HTTP status or a status >= 500 → ``transport``, retryable, with ``transport_code``. Codes come
   from an explicit ``code`` attribute (our watchdog errors say ``ETIMEDOUT``), an ``OSError`` errno or a
   ``socket.gaierror``, and, when nothing explicit is found, from the exception's type (openai, httpx2,
   httpcore2, anyio, builtins);
4. 401 / 403 → ``http``, fail-fast (credentials will not fix themselves);
5. any other 4xx → ``http``, fail-fast;
6. a 5xx whose body says the request itself is invalid (:func:`says_invalid_request`: a validation error, an
   ``invalid_request_error``, a ``param`` named) → ``http``, fail-fast: the same request fails the same way again;
7. any other 5xx → ``http``, retryable;
8. an unusable stream (:class:`StreamContentError`) → ``stream_content``, retryable unless it is not SSE;
9. anything else → ``unknown``.

Pure and synchronous: it never awaits and never raises.
"""

from __future__ import annotations

import errno
import inspect
import socket
from dataclasses import dataclass
from typing import Literal, TypeAlias

import anyio

from ._exceptions import StreamContentError

__all__ = [
    "TRANSPORT_CODES",
    "Diagnosis",
    "RetryClassification",
    "RetryKind",
    "classify_retry_error",
    "says_invalid_request",
    "transport_code_of",
]

RetryKind: TypeAlias = Literal["abort", "transport", "rate_limit", "http", "stream_content", "unknown"]
Diagnosis: TypeAlias = Literal["fail-fast", "retryable", "unknown"]

TRANSPORT_CODES = frozenset(
    {
        "ETIMEDOUT",
        "ECONNRESET",
        "ECONNREFUSED",
        "EPIPE",
        "ECONNABORTED",
        "ENOTFOUND",
        "EAI_AGAIN",
        "EHOSTUNREACH",
        "ENETUNREACH",
    }
)
"""The Node-style transport codes the classification recognises (the reference implementation's list)."""

_CHAIN_DEPTH = 4

_ERRNO_CODES: dict[int, str] = {
    errno.ETIMEDOUT: "ETIMEDOUT",
    errno.ECONNRESET: "ECONNRESET",
    errno.ECONNREFUSED: "ECONNREFUSED",
    errno.EPIPE: "EPIPE",
    errno.ECONNABORTED: "ECONNABORTED",
    errno.EHOSTUNREACH: "EHOSTUNREACH",
    errno.ENETUNREACH: "ENETUNREACH",
}

_GAI_CODES: dict[int, str] = {
    code: name
    for attr, name in (
        ("EAI_NONAME", "ENOTFOUND"),
        ("EAI_NODATA", "ENOTFOUND"),
        ("EAI_FAIL", "ENOTFOUND"),
        ("EAI_AGAIN", "EAI_AGAIN"),
    )
    if (code := getattr(socket, attr, None)) is not None
}

# Type-based fallbacks, most specific first; matched by (top-level module, class name) along the MRO so that
# neither openai nor httpx2/httpcore2 has to be imported here. Timeouts before generic network errors.
_TYPE_CODES: tuple[tuple[str, str, str], ...] = (
    ("builtins", "TimeoutError", "ETIMEDOUT"),
    ("builtins", "ConnectionResetError", "ECONNRESET"),
    ("builtins", "ConnectionRefusedError", "ECONNREFUSED"),
    ("builtins", "ConnectionAbortedError", "ECONNABORTED"),
    ("builtins", "BrokenPipeError", "EPIPE"),
    ("openai", "APITimeoutError", "ETIMEDOUT"),
    ("httpx2", "TimeoutException", "ETIMEDOUT"),  # ConnectTimeout, ReadTimeout, WriteTimeout, PoolTimeout
    ("httpcore2", "TimeoutException", "ETIMEDOUT"),
    ("httpx2", "ConnectError", "ECONNREFUSED"),
    ("httpcore2", "ConnectError", "ECONNREFUSED"),
    ("httpx2", "WriteError", "EPIPE"),
    ("httpcore2", "WriteError", "EPIPE"),
    ("httpx2", "ReadError", "ECONNRESET"),  # a reset or an abrupt close while reading the body
    ("httpcore2", "ReadError", "ECONNRESET"),
    ("httpx2", "RemoteProtocolError", "ECONNRESET"),  # peer closed without completing the message
    ("httpcore2", "RemoteProtocolError", "ECONNRESET"),
    ("httpx2", "CloseError", "ECONNRESET"),
    ("anyio", "BrokenResourceError", "ECONNRESET"),
    ("anyio", "IncompleteRead", "ECONNRESET"),
    ("openai", "APIConnectionError", "ECONNRESET"),  # "Connection error." with no recognisable cause
)


INVALID_REQUEST_MARKERS = ("validation error", "input should be", "invalid_request_error", "field required")
"""What an error body's message says when the server refused the request itself (pydantic's validation errors, as
llama-cpp-python's server answers them with HTTP 500; OpenAI's and llama-server's error type), lower-case."""


@dataclass(frozen=True, slots=True)
class RetryClassification:
    """What a failure is: ``kind``, whether retrying can help (``diagnosis``), a short ``reason`` for logs."""

    kind: RetryKind
    diagnosis: Diagnosis
    reason: str
    transport_code: str | None = None
    status: int | None = None


def _is_cancellation(exc: BaseException) -> bool:
    try:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            return True
    except Exception:  # no event loop running: fall back to the class names of both backends
        pass
    if isinstance(exc, Exception):
        return False
    return any(
        (cls.__name__, cls.__module__.split(".")[0]) in {("CancelledError", "asyncio"), ("Cancelled", "trio")}
        for cls in type(exc).__mro__
    )


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """The error and up to ``_CHAIN_DEPTH`` causes (explicit ``__cause__`` first, else ``__context__``)."""
    chain = [exc]
    current = exc
    for _ in range(_CHAIN_DEPTH):
        nxt = current.__cause__ or current.__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
        current = nxt
    return chain


def _explicit_code(exc: BaseException) -> str | None:
    for attr in ("code", "transport_code"):
        # read without running descriptors: another library's ``code`` may be a property that warns (aiohttp's
        # deprecated ``ClientResponseError.code``) or raises, and classifying must never raise
        value = inspect.getattr_static(exc, attr, None)
        if isinstance(value, str) and value in TRANSPORT_CODES:
            return value
    if isinstance(exc, socket.gaierror):
        return _GAI_CODES.get(exc.errno) if isinstance(exc.errno, int) else None
    if isinstance(exc, OSError) and isinstance(exc.errno, int):
        return _ERRNO_CODES.get(exc.errno)
    return None


def _type_code(exc: BaseException) -> str | None:
    names = {(cls.__module__.split(".")[0], cls.__name__) for cls in type(exc).__mro__}
    for module, name, code in _TYPE_CODES:
        if (module, name) in names:
            return code
    return None


def transport_code_of(exc: BaseException) -> str | None:
    """The transport code of ``exc`` or its cause chain.

    Explicit codes (``code`` attribute, errno) win, nearest first; else the type of the deepest recognised
    link decides.
    """
    chain = _chain(exc)
    for link in chain:
        if (code := _explicit_code(link)) is not None:
            return code
    for link in reversed(
        chain
    ):  # the deepest cause is the most specific (ConnectError under APIConnectionError)
        if (code := _type_code(link)) is not None:
            return code
    return None


def says_invalid_request(exc: BaseException) -> bool:
    """The error's body (the SDK's ``body``: the ``error`` object, or the whole JSON) or message says that the
    request itself is invalid: an ``invalid_request_error`` type, a ``param`` named, or a validation error's
    wording (:data:`INVALID_REQUEST_MARKERS`). Never raises."""
    attributes = getattr(exc, "__dict__", {})  # instance attributes only: no descriptor runs
    body = attributes.get("body")
    texts: list[str] = []
    if isinstance(body, dict):
        if body.get("type") == "invalid_request_error" or (isinstance(body.get("param"), str) and body["param"]):
            return True
        texts.extend(value for key in ("message", "detail") if isinstance(value := body.get(key), str))
        if isinstance(body.get("detail"), list):  # FastAPI's validation errors
            return True
    message = attributes.get("message")
    if isinstance(message, str):
        texts.append(message)
    lowered = " ".join(texts)[:4096].lower()
    return any(marker in lowered for marker in INVALID_REQUEST_MARKERS)


def classify_retry_error(exc: BaseException) -> RetryClassification:
    """Classify ``exc`` for the retry policies (order in the module docstring)."""
    if _is_cancellation(exc):
        return RetryClassification("abort", "fail-fast", "cancelled by the caller")
    status = _status_of(exc)
    if status == 429:
        return RetryClassification("rate_limit", "retryable", "rate limited (HTTP 429)", status=429)
    if status is None or status >= 500:
        code = transport_code_of(exc)
        if code is not None:
            return RetryClassification(
                "transport", "retryable", f"transport error {code}", transport_code=code, status=status
            )
    if status in (401, 403):
        return RetryClassification("http", "fail-fast", f"not authorised (HTTP {status})", status=status)
    if status is not None and 400 <= status < 500:
        return RetryClassification("http", "fail-fast", f"client error (HTTP {status})", status=status)
    if status is not None and status >= 500:
        if says_invalid_request(exc):
            return RetryClassification("http", "fail-fast", f"invalid request (HTTP {status})", status=status)
        return RetryClassification("http", "retryable", f"server error (HTTP {status})", status=status)
    if isinstance(exc, StreamContentError):
        diagnosis: Diagnosis = "retryable" if exc.retryable else "fail-fast"
        return RetryClassification("stream_content", diagnosis, exc.reason.replace("_", " "))
    return RetryClassification("unknown", "unknown", type(exc).__name__)
