"""ACP's unstable ``providers/*`` methods (the "Configurable LLM Providers" RFD): an editor routes the agent's model
requests to its own OpenAI-compatible endpoint, with its headers.

Invariants: the agent has one provider, :data:`PROVIDER_ID`, speaking only ``openai``; any other ``apiType``, an
unknown provider id, a base URL that is not an absolute http(s) URL or headers HTTP cannot carry are refused with
-32602 naming the field, nothing changed. What ``providers/set`` gives lives in the process only (never written to
disk) and applies to the next model requests; the headers are secrets — never answered, logged or echoed (only
their names may be counted). ``providers/list`` answers the endpoint in use, without its headers. The methods, and
``agentCapabilities.providers``, exist only where the agent has a :class:`ProviderControl` (the stdio agent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from acp.schema import DisableProviderRequest, ListProvidersRequest

    from ._peer import Peer

__all__ = [
    "API_TYPE",
    "MAX_HEADERS",
    "MAX_HEADERS_BYTES",
    "PROVIDER_ID",
    "PROVIDER_METHODS",
    "ProviderControl",
    "ServedAgent",
    "disable_provider",
    "list_providers",
    "set_provider",
]

PROVIDER_ID = "main"
"""The one provider: where every model request of the agent goes."""
API_TYPE = "openai"
"""The one protocol the agent speaks (OpenAI's chat completions)."""
MAX_HEADERS = 64
MAX_HEADERS_BYTES = 16 * 1024
"""Bounds of ``providers/set``'s headers: their count, and their names' and values' UTF-8 bytes together."""
PROVIDER_METHODS = frozenset({"providers/list", "providers/set", "providers/disable"})

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110's header field name
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a field value: no control character but tab


class ProviderControl(Protocol):
    """The agent's model endpoint as an editor may set it."""

    def current(self) -> str | None:
        """The base URL model requests go to (None: none configured: the provider is disabled)."""
        ...

    async def set(self, base_url: str, headers: Mapping[str, str]) -> None:
        """Send the next model requests to ``base_url`` with ``headers`` (and never the configured key)."""
        ...

    async def disable(self) -> None:
        """Drop what :meth:`set` gave: the agent's own configuration again (none: no endpoint)."""
        ...


class ServedAgent(Protocol):
    """What the handlers need of the connection's agent (``AcpAgent``)."""

    @property
    def provider_control(self) -> ProviderControl | None: ...


def _control(agent: ServedAgent) -> ProviderControl:
    control = agent.provider_control
    assert control is not None  # bound only where there is one (_methods.bind)
    return control


def _check_id(provider_id: str) -> None:
    if provider_id != PROVIDER_ID:
        problem = f"unknown provider {provider_id[:64]!r} (this agent's: {PROVIDER_ID!r})"
        raise InvalidInputError.for_field("providerId", problem)


def _check_base_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host, parts = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise InvalidInputError.for_field("baseUrl", "not an absolute http:// or https:// URL")


def _check_headers(headers: Mapping[str, str]) -> None:
    if len(headers) > MAX_HEADERS:
        raise InvalidInputError.for_field("headers", f"{len(headers)} headers: at most {MAX_HEADERS}")
    size = sum(len(name.encode()) + len(value.encode()) for name, value in headers.items())
    if size > MAX_HEADERS_BYTES:
        raise InvalidInputError.for_field("headers", f"{size} bytes of headers: at most {MAX_HEADERS_BYTES}")
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise InvalidInputError.for_field("headers", f"{name[:64]!r} is not a valid header name")
        if _BAD_VALUE.search(value):  # the value is a secret: never quoted
            raise InvalidInputError.for_field("headers", f"the value of {name!r} holds a control character")


async def list_providers(agent: ServedAgent, request: ListProvidersRequest, peer: Peer) -> dict[str, Any]:
    """The one provider, its endpoint in use (``current`` null when none is configured)."""
    base_url = _control(agent).current()
    current = None if base_url is None else {"apiType": API_TYPE, "baseUrl": base_url}
    return {"providers": [{"providerId": PROVIDER_ID, "supported": [API_TYPE], "required": False, "current": current}]}


def _field(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        problem = "required" if value is None else "expected a string"
        raise InvalidInputError.for_field(name, problem, f"Invalid params for providers/set: {name}: {problem}")
    return value


def _headers(params: Mapping[str, Any]) -> dict[str, str]:
    headers = params.get("headers")
    if headers is None:
        return {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise InvalidInputError.for_field("headers", "expected an object of strings")
    return headers


async def set_provider(agent: ServedAgent, params: Any, peer: Peer) -> dict[str, Any]:
    """Route the next model requests to the editor's endpoint (all checked first: a refusal changes nothing).

    Checked by hand, not by ``acp.schema``: the schema lets ``apiType`` be any string (a name it does not know is
    refused here as unsupported, precisely), which the SDK's model refuses with a union's noise."""
    if not isinstance(params, dict):
        raise InvalidInputError("Invalid params for providers/set: expected an object")
    _check_id(_field(params, "providerId"))
    api_type = _field(params, "apiType")
    if api_type != API_TYPE:
        raise InvalidInputError.for_field(
            "apiType", f"{api_type[:64]!r} is not supported: this agent speaks the OpenAI API only ({API_TYPE!r})"
        )
    base_url = _field(params, "baseUrl")
    _check_base_url(base_url)
    headers = _headers(params)
    _check_headers(headers)
    await _control(agent).set(base_url, headers)
    return {}


async def disable_provider(agent: ServedAgent, request: DisableProviderRequest, peer: Peer) -> dict[str, Any]:
    """Forget the editor's endpoint: the agent's own configuration applies again."""
    _check_id(request.provider_id)
    await _control(agent).disable()
    return {}
