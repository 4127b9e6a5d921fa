"""What the loopback model saw: requests and premature client disconnects (plain records, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One complete HTTP request (any path, chat or not), in arrival order.

    ``body`` is the parsed JSON (None when empty or not JSON); header names are lower-case; ``received_at``
    is ``anyio.current_time()`` when the request was complete; ``connection`` numbers the TCP connections
    from 0, so kept-alive requests share it.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    connection: int

    def _body_list(self, key: str) -> list[dict[str, Any]]:
        value = self.body.get(key) if isinstance(self.body, dict) else None
        return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat body's ``messages`` as sent (assistant ``tool_calls`` and ``tool`` messages included);
        ``[]`` for a request without them."""
        return self._body_list("messages")

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The chat body's ``tools`` as sent; ``[]`` when it offered none."""
        return self._body_list("tools")

    @property
    def tool_names(self) -> list[str]:
        """The names of the functions in ``tools``, in order."""
        names = (tool.get("function", {}).get("name") for tool in self.tools if tool.get("type") == "function")
        return [name for name in names if isinstance(name, str)]


@dataclass(frozen=True, slots=True)
class Disconnect:
    """The client closed or reset the connection before the response to ``requests[request_index]`` ended.

    ``chunks_sent`` counts the ``chat.completion.chunk`` events written before; ``at`` is when it was seen.
    """

    request_index: int
    at: float
    chunks_sent: int
