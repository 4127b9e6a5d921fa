"""Construct the one openai SDK client the pipeline streams through."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx2
    import openai

__all__ = [
    "OFFLINE_API_KEY",
    "OPENAI_API_BASE_URL",
    "import_client_modules",
    "make_openai_client",
    "missing_version_hint",
    "public_endpoint",
]

OPENAI_API_BASE_URL = "https://api.openai.com/v1"
"""Where the SDK sends requests when no base URL is given: a key alone means the OpenAI API."""

OFFLINE_API_KEY = "offline"
"""Key sent to a ``base_url`` given without one: local endpoints need none, but the SDK insists on one."""

_READ_TIMEOUT_S = 600.0  # a backstop only: the pipeline's watchdog decides when a stream has stalled
_WRITE_TIMEOUT_S = 60.0

MODEL_POOL_MAX_CONNECTIONS: int | None = None
"""Concurrent model requests: not capped by the pool. Each running turn holds one connection, and running turns are
bounded only by admission (one per attached session — sessions are unbounded), so any pool cap would make turns over
it wait for a slot and fail as ``model_transport_error`` against a healthy model (the SDK's default is 1,000). The
real bounds are the bridge's admission, the open-file limit (``serve`` raises it to the hard limit) and the model."""
MODEL_POOL_MAX_KEEPALIVE = 100
"""Idle connections kept for reuse by httpx2's transport (the rest are closed when their turn ends); aiohttp's keeps
each until it expires."""
MODEL_POOL_KEEPALIVE_EXPIRY_S = 5.0


def import_client_modules() -> None:
    """Import what :func:`make_openai_client` needs (the SDK, the aiohttp transport). Costly (~0.5 s of CPU), and it
    blocks for as long as another thread's import of the same module (the warm-up's): call it in a worker thread,
    never on an event loop — a loop waiting on an import answers nothing, admission included."""
    import openai  # noqa: F401

    from . import _aiohttp  # noqa: F401


def make_openai_client(
    *,
    base_url: str | None,
    api_key: str | None,
    connect_timeout_s: float = 10.0,
    headers: Mapping[str, str] | None = None,
) -> openai.AsyncOpenAI:
    """Return an ``AsyncOpenAI`` that never retries (the pipeline owns retries), only times out on connect, and whose
    connection pool never makes a turn wait (see :data:`MODEL_POOL_MAX_CONNECTIONS`).

    Made inside a running asyncio loop, it streams through the SDK's aiohttp transport (``_aiohttp.py``: about half
    the CPU per streamed chunk), elsewhere (trio, or no loop) through httpx2's own. Both raise the same httpx2
    exception classes for the same failures.

    With neither ``base_url`` nor ``api_key`` the SDK falls back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``
    and raises ``openai.OpenAIError`` when no key is found. ``headers`` go with every request, over the SDK's own
    (an ``Authorization`` among them replaces the key's): secrets, never logged.
    """
    import openai  # lazily: the SDK costs ~0.4 s of start-up

    if api_key is None and base_url is not None:
        api_key = OFFLINE_API_KEY
    timeout = openai.Timeout(
        connect=connect_timeout_s, read=_READ_TIMEOUT_S, write=_WRITE_TIMEOUT_S, pool=connect_timeout_s
    )
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        max_retries=0,
        timeout=timeout,
        http_client=_http_client(timeout),
        default_headers=dict(headers) if headers else None,
    )


def _http_client(timeout: openai.Timeout) -> httpx2.AsyncClient:
    import asyncio

    import httpx2  # the SDK's HTTP library
    import openai

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no asyncio loop in this thread: trio, or none at all
        pass
    else:
        from ._aiohttp import AioHttpModelClient

        limits = httpx2.Limits(keepalive_expiry=MODEL_POOL_KEEPALIVE_EXPIRY_S)  # no cap: see _aiohttp._session
        return AioHttpModelClient(limits=limits, timeout=timeout)
    limits = httpx2.Limits(
        max_connections=MODEL_POOL_MAX_CONNECTIONS,
        max_keepalive_connections=MODEL_POOL_MAX_KEEPALIVE,
        keepalive_expiry=MODEL_POOL_KEEPALIVE_EXPIRY_S,
    )
    return openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout)


_DEFAULT_PORTS = {"http": 80, "https": 443}
_VERSION_SEGMENT = re.compile(r"v\d+\w*", re.ASCII)  # v1, v2, v1beta ...


def public_endpoint(base_url: str | None) -> str:
    """``scheme://host:port/path`` of ``base_url`` (the OpenAI API when None), safe to show anywhere.

    Invariant: never contains userinfo, query or fragment (where credentials hide), so never a key.
    """
    url = OPENAI_API_BASE_URL if base_url is None else str(base_url)
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an unparsable base URL)"
    scheme = parts.scheme.lower()
    if not scheme or not host:
        return "(an unparsable base URL)"
    if ":" in host:
        host = f"[{host}]"
    if port is None:
        port = _DEFAULT_PORTS.get(scheme)
    authority = host if port is None else f"{host}:{port}"
    return f"{scheme}://{authority}{parts.path.rstrip('/')}"


def missing_version_hint(endpoint: str) -> str | None:
    """For a 404: the hint that an OpenAI-compatible API lives under ``/v1``, when ``endpoint``'s path has no
    version segment (``/v1``, ``/v1beta`` ...); None when it has one."""
    _, sep, rest = endpoint.partition("://")
    if not sep or ("/" in rest and any(_VERSION_SEGMENT.fullmatch(s) for s in rest.split("/")[1:])):
        return None
    return (
        "the base URL's path has no /v1, under which OpenAI-compatible servers serve their API: "
        f"try --base-url {endpoint}/v1"
    )
