"""The one disconnect listener of the HTTP face."""

from __future__ import annotations

from starlette.types import Receive

__all__ = ["wait_disconnected"]


async def wait_disconnected(receive: Receive) -> None:
    """Return once the client has gone (ASGI ``http.disconnect``); any other message (a late body part) is skipped."""
    while (await receive())["type"] != "http.disconnect":
        pass
