"""What an ACP handler needs of the connection it serves, for the one message it handles."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["Peer"]


class Peer(Protocol):
    """What a handler needs of the connection, for the one message it handles."""

    @property
    def request_id(self) -> str | int | None:
        """The id of the request being handled (None for a notification)."""
        ...

    def admitted(self) -> None:
        """The request passed admission and will stream (transports that choose a reply format wait for this)."""
        ...

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Send a notification to the client, in order; waits while the client is not reading (backpressure)."""
        ...

    def after_reply(self, method: str, params: Mapping[str, Any]) -> None:
        """Queue a notification to follow this request's answer at once, in order, when the answer is a result (an
        error or a cancellation drops it): news a client must not get before the answer it depends on."""
        ...

    async def request(
        self, method: str, params: Mapping[str, Any], on_late: Callable[[Any], None] | None = None
    ) -> Any:
        """Send a request to the client (``fs/read_text_file``, ``session/request_permission``…), in order with this
        handler's notifications, and return the ``result`` of its response. Raises
        :class:`~acp_server.errors.RemoteError` when the client answers an error (its ``code``) or the connection
        closes first (``code`` None); cancelling the caller abandons the request — then a result that still comes
        goes to ``on_late``, when given (to undo what the client did: a terminal it created)."""
        ...

    def post_request(self, method: str, params: Mapping[str, Any]) -> None:
        """Send a request at once whose answer nobody waits for (a clean-up from a callback); never waits."""
        ...

    def cancel_request(self, request_id: str | int) -> bool:
        """Cancel another in-flight request of this connection (it answers -32800); False if there is none."""
        ...
