"""The one rule of how a tool call's ``run`` ends.

``run`` never raises for a tool failure: a :class:`ToolCallError` (or a :class:`RemoteError` from the client, or
an ``OSError`` no tool explained) raised while running becomes ``ToolResult(failed=True)`` whose ``output`` is
``Error: <message>`` for the model (and whose content shows the message). Cancellation, and bugs, propagate.
Every ``output`` is capped at 64 KiB.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable

from ..domain import TextContent
from ..errors import RemoteError
from ._exceptions import ToolCallError
from ._output import OUTPUT_LIMIT_BYTES, cap_text, utf8_len
from ._types import ContentSink, ToolResult

__all__ = ["Run", "failure"]

logger = logging.getLogger(__name__)

Run = Callable[[ContentSink], Awaitable[ToolResult]]


def failure(message: str) -> ToolResult:
    """A failed call: the model is told ``Error: <message>`` (as the turn tells it a refused call), the editor
    shows the message."""
    message = cap_text(message, "the message was cut", OUTPUT_LIMIT_BYTES - 16)
    return ToolResult(output=f"Error: {message}", content=(TextContent(message),), failed=True)


def _guarded(run: Run) -> Run:
    async def guarded(sink: ContentSink) -> ToolResult:
        try:
            result = await run(sink)
        except ToolCallError as exc:
            return failure(str(exc))
        except RemoteError as exc:
            return failure(f"the editor answered an error: {exc}")
        except OSError as exc:
            logger.debug("tool call failed with an OS error", exc_info=True)
            return failure(f"the tool failed: {exc.strerror or exc}")
        if len(result.output) > OUTPUT_LIMIT_BYTES // 4 and utf8_len(result.output) > OUTPUT_LIMIT_BYTES:
            return dataclasses.replace(result, output=cap_text(result.output, "the rest was cut"))
        return result

    return guarded
