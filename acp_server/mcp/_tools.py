"""An MCP server's tools as registry :class:`Tool` values: their names, nature, and what a call's result becomes.

- Name: ``mcp__<server>__<tool>``, each part with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``;
  a name over 64 characters, or one that another tool already has, is cut and ends with 8 hex digits of a hash of
  the server's and tool's real names. The same server name and tool name always give the same name.
- Nature: ``readOnlyHint: true`` makes a read tool (kind ``read``, offered in ``read-only`` mode, never asks);
  any other is kind ``other`` and needs permission (the mode decides; an "always" answer is kept per tool).
  Annotations are the server's claims: trusted as far as the user trusts the server they configured.
- Result: text parts (and embedded text resources) go to the model, joined by newlines; structured content with no
  text goes as JSON; capped like every tool output. Images go to the model and the editor as images (the text
  gets a note where each was) — at most :data:`MAX_IMAGES` per result, :data:`MAX_IMAGE_DATA` characters of base64
  in all, valid base64 of a type in :data:`IMAGE_TYPES`; any other image, audio and binary resources are a one-line
  note "not shown to the model". ``isError: true`` ends the call ``failed`` with the server's text.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from ..domain import ImageContent, ImagePart, TextContent, ToolContent, ToolKind, base64_size
from ..tools import (
    ContentSink,
    PreparedCall,
    ToolCallError,
    ToolClient,
    ToolResult,
    Workspace,
    failure,
    guarded_run,
    schema_check,
)
from ..tools.registry import Tool

if TYPE_CHECKING:
    from mcp import types

    from ._connection import McpConnection

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGES",
    "MAX_IMAGE_DATA",
    "MAX_TOOL_NAME",
    "image_problem",
    "mcp_tool_name",
    "mcp_tools",
    "result_of",
]

MAX_TOOL_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_DESCRIPTION = 4096

MAX_IMAGES = 4
"""Images of one result the model and the editor are shown; the others are a note."""
MAX_IMAGE_DATA = 5 * 1024 * 1024
"""Characters of base64 the shown images of one result may hold together (an image past it is a note)."""
IMAGE_TYPES: frozenset[str] = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types OpenAI's vision models take; an image of another type is a note."""


def mcp_tool_name(server: str, tool: str, taken: Collection[str] = ()) -> str:
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
    text = "\n".join(parts)
    if result.isError:
        return failure(text or f"the MCP server '{server}' reported an error without a message")
    raw: object = result.structuredContent
    content: tuple[ToolContent, ...] = (TextContent(text),) if text else ()
    content += tuple(ImageContent(i.data, i.mime_type) for i in images)
    return ToolResult(output=text or "(no output)", content=content, raw_output=raw, images=tuple(images))


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

        return PreparedCall(name, title, kind, (), (), not read_only, guarded_run(run), rule=name)

    return prepare


def mcp_tools(connection: McpConnection, taken: Collection[str], timeout_s: Callable[[], float]) -> list[Tool]:
    """The connection's listed tools as :class:`Tool` values with names not in ``taken`` (nor each other's).
    A tool whose schema is not a valid JSON Schema is left out (logged by the caller's summary)."""
    import logging

    tools: list[Tool] = []
    used = set(taken)
    server = connection.name
    for remote in connection.tools:
        name = mcp_tool_name(server, remote.name, used)
        parameters = _parameters(remote)
        try:
            check = schema_check(parameters)
        except ValueError as exc:
            logging.getLogger("acp_server.mcp").warning("mcp %s: tool %r left out: %s", server, remote.name, exc)
            continue
        used.add(name)
        annotations = remote.annotations
        read_only = bool(annotations is not None and annotations.readOnlyHint is True)
        kind: ToolKind = "read" if read_only else "other"
        shown = (annotations.title if annotations is not None and annotations.title else None) or remote.title
        title = f"{server}: {shown or remote.name}"
        description = (remote.description or f"The {remote.name} tool of the MCP server '{server}'.")[:_MAX_DESCRIPTION]
        tools.append(
            Tool(
                name,
                f"{description}\n\n(MCP server '{server}', tool '{remote.name}')",
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
