"""The one disconnect listener of the HTTP face."""

from __future__ import annotations

from starlette.types import Receive

from .._exceptions import RequestTimeoutError

__all__ = ["wait_disconnected"]


async def wait_disconnected(receive: Receive) -> None:
    """Return once the client has gone (ASGI ``http.disconnect``) or has not finished its request body in time (it is
    treated as gone: the connection closes); any other message (a late body part) is skipped."""
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except RequestTimeoutError:
        return
