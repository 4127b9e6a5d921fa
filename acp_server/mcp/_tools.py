"""An MCP server's tools as registry :class:`Tool` values: their names, nature, and what a call's result becomes.

- Name: ``mcp__<server>__<tool>``, each part with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``;
  a name over 64 characters, or one that another tool already has, is cut and ends with 8 hex digits of a hash of
  the server's and tool's real names. The same server name and tool name always give the same name. Within a
  session a name, once handed out, stays its tool's (:class:`ToolNames`): a re-listing in another order never
  hands it to another tool.
- Shown: a call's title is ``<server>: <title>`` (``annotations.title``, else ``title``, else the tool's name) as one
  line of plain text of at most 128 characters (:func:`~._text.one_line`), wherever it appears (``tool_call``, the
  permission request, the stored step and its replay); the description the model is sent, with the server and tool
  it comes from, is at most :data:`MAX_DESCRIPTION` characters, the tool's name in it at most 64.
- Nature: ``readOnlyHint: true`` makes a read tool (kind ``read``, offered in ``read-only`` mode, never asks);
  any other is kind ``other`` and needs permission (the mode decides; an "always" answer is kept per tool: its rule
  names the server and the tool's remote name, never the name it is offered under).
  Annotations are the server's claims: trusted as far as the user trusts the server they configured.
- Result: text parts (and embedded text resources) go to the model, joined by newlines; structured content with no
  text goes as JSON; capped like every tool output (:data:`~acp_server.tools.OUTPUT_LIMIT_BYTES`, a note of what
  was cut), and that capped text is also what the editor is shown and the step stores: no part of a result reaches
  the editor or the store whole. Structured content is the call's ``rawOutput`` only when its JSON fits the same
  cap. Images go to the model and the editor as images (the text
  gets a note where each was) — at most :data:`MAX_IMAGES` per result, :data:`MAX_IMAGE_DATA` characters of base64
  in all, valid base64 of a type in :data:`IMAGE_TYPES`; any other image, audio and binary resources are a one-line
  note "not shown to the model". ``isError: true`` ends the call ``failed`` with the server's text.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import re
from collections.abc import Callable, Collection, Container
from typing import TYPE_CHECKING, Any

from ..domain import ImageContent, ImagePart, TextContent, ToolContent, ToolKind, base64_size
from ..tools import (
    OUTPUT_LIMIT_BYTES,
    ContentSink,
    PreparedCall,
    ToolCallError,
    ToolClient,
    ToolResult,
    Workspace,
    cap_text,
    failure,
    guarded_run,
    schema_check,
)
from ..tools.registry import Tool
from ._text import one_line

if TYPE_CHECKING:
    from mcp import types

    from ._connection import McpConnection

__all__ = [
    "IMAGE_TYPES",
    "MAX_DESCRIPTION",
    "MAX_IMAGES",
    "MAX_IMAGE_DATA",
    "MAX_TOOL_NAME",
    "ToolNames",
    "image_problem",
    "mcp_tool_name",
    "mcp_tools",
    "permission_rule",
    "result_of",
]

MAX_TOOL_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
MAX_DESCRIPTION = 4096
"""Characters of a tool's whole description the model is sent (the server's text, then which server and tool)."""
_MAX_TITLE = 128  # a call's title as shown: "<server>: " and this much of the tool's title (or name)

MAX_IMAGES = 4
"""Images of one result the model and the editor are shown; the others are a note."""
MAX_IMAGE_DATA = 5 * 1024 * 1024
"""Characters of base64 the shown images of one result may hold together (an image past it is a note)."""
IMAGE_TYPES: frozenset[str] = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types OpenAI's vision models take; an image of another type is a note."""


def mcp_tool_name(server: str, tool: str, taken: Container[str] = ()) -> str:
    """The name the model knows ``server``'s ``tool`` by (valid for OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``), not in
    ``taken``."""
    name = f"mcp__{_INVALID.sub('_', server)}__{_INVALID.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME and name not in taken:
        return name
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()
    for n in range(100):
        suffix = f"_{digest[n : n + 8]}"
        candidate = name[: MAX_TOOL_NAME - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    raise ValueError("no free name")  # pragma: no cover - 100 colliding hashes


class ToolNames:
    """The names a session's MCP tools are offered under, for the session's life: one per (server, remote name),
    and a name never given to two tools (the taken ones stay taken when their tool goes)."""

    __slots__ = ("_given", "_names")

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}
        self._given: set[str] = set()

    def name(self, server: str, tool: str, taken: Collection[str]) -> str:
        """``server``'s ``tool``'s name: the one it was given before, else a new one not in ``taken`` nor given."""
        key = (server, tool)
        known = self._names.get(key)
        if known is not None:
            return known
        name = mcp_tool_name(server, tool, _Either(self._given, taken))
        self._names[key] = name
        self._given.add(name)
        return name


class _Either:
    """Membership in either of two collections (no union built per name)."""

    __slots__ = ("_a", "_b")

    def __init__(self, a: Container[str], b: Container[str]) -> None:
        self._a, self._b = a, b

    def __contains__(self, item: object) -> bool:
        return item in self._a or item in self._b


def permission_rule(server: str, tool: str) -> str:
    """The key of an "always" answer for ``server``'s ``tool``: its server and remote name, whatever it is offered
    as (two tools never share one, and a tool keeps its own across re-listings)."""
    return "mcp:" + json.dumps([server, tool])


def _parameters(tool: types.Tool) -> dict[str, Any]:
    schema = dict(tool.inputSchema) if isinstance(tool.inputSchema, dict) else {}
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


def image_problem(image: ImageContent, images: list[ImagePart], held: int) -> str | None:
    """Why ``image`` is not shown beside ``images`` (``held`` characters of base64); None: it is."""
    if image.mime_type not in IMAGE_TYPES:
        return "unsupported type"
    if len(images) >= MAX_IMAGES:
        return f"more than {MAX_IMAGES} images"
    if held + len(image.data) > MAX_IMAGE_DATA:
        return f"more than {MAX_IMAGE_DATA // (1024 * 1024)} MiB of images"
    try:
        binascii.a2b_base64(image.data, strict_mode=True)
    except (binascii.Error, ValueError):
        return "not valid base64"
    return None


def result_of(result: types.CallToolResult, server: str) -> ToolResult:
    """What the model and the editor get of an MCP call's result: the text (a note where each image, audio or
    binary resource was), and the images shown, in order, within the bounds (the same images for both)."""
    from mcp import types

    parts: list[str] = []
    images: list[ImagePart] = []
    held = 0
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            image = ImageContent(block.data, block.mimeType)
            why = image_problem(image, images, held)
            if why is None:
                images.append(ImagePart(image.data, image.mime_type))
                held += len(image.data)
                parts.append(image.note)
            else:
                parts.append(f"{image.note[:-1]}: not shown to the model, {why}]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[audio ({block.mimeType}, {base64_size(block.data)} bytes): not shown to the model]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri}: not shown to the model]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}{f': {block.name}' if block.name else ''}]")
    if result.structuredContent is not None and not any(parts):
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = cap_text("\n".join(parts), "the rest was cut")
    if result.isError:
        return failure(text or f"the MCP server '{server}' reported an error without a message")
    raw = _bounded_raw(result.structuredContent)
    content: tuple[ToolContent, ...] = (TextContent(text),) if text else ()
    content += tuple(ImageContent(i.data, i.mime_type) for i in images)
    return ToolResult(output=text or "(no output)", content=content, raw_output=raw, images=tuple(images))


def _bounded_raw(value: object) -> object:
    """``value`` when its JSON fits :data:`OUTPUT_LIMIT_BYTES` (or it is None), else None."""
    if value is None:
        return None
    return value if len(json.dumps(value)) <= OUTPUT_LIMIT_BYTES else None  # ASCII JSON: characters are bytes


def _preparer(
    connection: McpConnection,
    remote: str,
    title: str,
    kind: Any,
    read_only: bool,
    name: str,
    timeout_s: Callable[[], float],
) -> Any:
    async def prepare(args: Any, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        arguments: dict[str, Any] = args

        async def run(sink: ContentSink) -> ToolResult:
            try:
                return result_of(await connection.call(remote, arguments, timeout_s()), connection.name)
            except ToolCallError as exc:
                return failure(str(exc))

        rule = permission_rule(connection.name, remote)
        return PreparedCall(name, title, kind, (), (), not read_only, guarded_run(run), rule=rule)

    return prepare


def mcp_tools(
    connection: McpConnection, taken: Collection[str], timeout_s: Callable[[], float], names: ToolNames
) -> list[Tool]:
    """The connection's listed tools as :class:`Tool` values, named by ``names`` (not in ``taken``, nor each
    other's). A tool whose schema is not a valid JSON Schema is left out (logged by the caller's summary)."""
    import logging

    tools: list[Tool] = []
    used = set(taken)
    server = connection.name
    for remote in connection.tools:
        name = names.name(server, remote.name, used)
        if name in used:
            continue  # listed twice by its server: the first stands
        parameters = _parameters(remote)
        try:
            check = schema_check(parameters)
        except ValueError as exc:
            shown_name = one_line(remote.name, MAX_TOOL_NAME)
            logging.getLogger("acp_server.mcp").warning("mcp %s: tool %r left out: %s", server, shown_name, exc)
            continue
        used.add(name)
        annotations = remote.annotations
        read_only = bool(annotations is not None and annotations.readOnlyHint is True)
        kind: ToolKind = "read" if read_only else "other"
        shown = (annotations.title if annotations is not None and annotations.title else None) or remote.title
        remote_shown = one_line(remote.name, MAX_TOOL_NAME)
        title = f"{server}: {one_line(shown or '', _MAX_TITLE) or remote_shown}"
        suffix = f"\n\n(MCP server '{server}', tool '{remote_shown}')"
        description = remote.description or f"The {remote_shown} tool of the MCP server '{server}'."
        tools.append(
            Tool(
                name,
                description[: MAX_DESCRIPTION - len(suffix)] + suffix,
                parameters,
                kind,
                read_only=read_only,
                prepare=_preparer(connection, remote.name, title, kind, read_only, name, timeout_s),
                check=check,
                source=server,
                title=title,
            )
        )
    return tools
