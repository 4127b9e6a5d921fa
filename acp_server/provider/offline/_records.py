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


@dataclass(frozen=True, slots=True)
class Disconnect:
    """The client closed or reset the connection before the response to ``requests[request_index]`` ended.

    ``chunks_sent`` counts the ``chat.completion.chunk`` events written before; ``at`` is when it was seen.
    """

    request_index: int
    at: float
    chunks_sent: int
