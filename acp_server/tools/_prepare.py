"""The entry point of a built-in tool call: from the model's name and raw JSON arguments to a :class:`PreparedCall`.

Everything that can be checked before the user is shown or asked anything is checked here, and fails with a
:class:`ToolCallError` whose message the model gets: the tool is known and offered; the arguments are at most
1 MiB, JSON, an object, and match the tool's schema (``_validate``), their strings valid Unicode (no lone
surrogate); the paths are confined; an edit applies. A session with more tools than the built-ins prepares its
calls through its own :class:`~acp_server.tools.registry.ToolSet`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ._types import PreparedCall, ToolClient
from ._validate import MAX_ARGUMENTS_BYTES
from .builtin import BUILTIN

__all__ = ["MAX_ARGUMENTS_BYTES", "prepare_call"]


async def prepare_call(
    name: str,
    arguments: str,
    *,
    cwd: str,
    client: ToolClient | None,
    offered: Collection[str],
    additional: Sequence[str] = (),
    sandboxed: bool = False,
) -> PreparedCall:
    """The call of built-in tool ``name`` with the model's raw JSON ``arguments``, in the project directory
    ``cwd`` (and the ``additional`` directories), validated, confined and announced (see :meth:`ToolSet.prepare`)."""
    return await BUILTIN.prepare(
        name, arguments, cwd=cwd, client=client, offered=offered, additional=additional, sandboxed=sandboxed
    )
