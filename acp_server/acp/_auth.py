"""ACP authentication for an agent whose only credential is its model endpoint: the ``setup`` terminal method.

Invariants: ``initialize`` always advertises the one method (:data:`SETUP_METHOD_ID`, of type ``terminal``: the
client runs the agent with ``args`` in a terminal, i.e. ``acp-server setup``; the ``_meta["terminal-auth"]`` form
older clients read names the agent's own command), whatever the client advertises. While the connection's
:class:`EndpointGate` says no endpoint is usable, every request that opens a session answers ACP's
``auth_required`` (-32000) naming the method, instead of a prompt failing later; ``authenticate`` re-reads the
configuration and succeeds once it is usable, else answers why not. Without a gate (the daemon) every endpoint is
taken as usable: nothing is asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ..errors import InvalidInputError, ServerError

__all__ = [
    "SETUP_METHOD_ID",
    "AuthRequiredError",
    "EndpointGate",
    "EndpointNotUsableError",
    "auth_methods",
    "check_method",
]

SETUP_METHOD_ID = "setup"

_NAME = "Set up the model endpoint"
_DESCRIPTION = (
    "Runs acp-server setup in a terminal: choose the OpenAI-compatible endpoint (Ollama, LM Studio, llama.cpp, "
    "vLLM, OpenAI, OpenRouter...), its key and model; it checks them and writes the configuration file"
)


class EndpointGate(Protocol):
    """Whether the agent has a model endpoint it can use, and the re-reading of its configuration."""

    def usable(self) -> bool:
        """An endpoint is configured (a base URL, or a key for the default hosted one, or the offline model)."""
        ...

    async def reload(self) -> str | None:
        """Re-read the configuration and use it: None once an endpoint is usable, else why not (no secret)."""
        ...


class AuthRequiredError(ServerError):
    """A session was asked for while no model endpoint is usable: ACP's ``auth_required`` (-32000)."""

    error_kind: ClassVar[str] = "auth_required"

    def __init__(self) -> None:
        super().__init__(
            "Authentication required: no model endpoint is configured. Run acp-server setup (the "
            f"{SETUP_METHOD_ID!r} auth method), or start the agent with --base-url (and --api-key), or --offline"
        )

    def details(self) -> Mapping[str, object]:
        return {"authMethods": [SETUP_METHOD_ID]}


class EndpointNotUsableError(ServerError):
    """``authenticate`` re-read the configuration and it still names no usable endpoint: still ``auth_required``
    (-32000), the message saying why (a bad file names its line)."""

    error_kind: ClassVar[str] = "auth_required"

    def details(self) -> Mapping[str, object]:
        return {"authMethods": [SETUP_METHOD_ID]}


def auth_methods(command: Sequence[str]) -> list[dict[str, Any]]:
    """``authMethods`` of ``initialize``: the ``setup`` terminal method; ``command`` is how this agent is run (its
    executable and the arguments before its own, e.g. ``python -m acp_server``), for the ``_meta`` form."""
    return [
        {
            "id": SETUP_METHOD_ID,
            "name": _NAME,
            "description": _DESCRIPTION,
            "type": "terminal",
            "args": ["setup"],
            "_meta": {
                "terminal-auth": {"command": command[0], "args": [*command[1:], "setup"], "label": "acp-server setup"}
            },
        }
    ]


def check_method(method_id: str) -> None:
    """Only :data:`SETUP_METHOD_ID` is a method of this agent."""
    if method_id != SETUP_METHOD_ID:
        raise InvalidInputError.for_field(
            "methodId",
            "unknown auth method",
            f"Invalid params for authenticate: unknown auth method {method_id!r} (this agent's: {SETUP_METHOD_ID!r})",
        )
