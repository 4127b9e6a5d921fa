"""A small MCP server on the official ``mcp`` SDK (FastMCP), for the tests: ``python py_server.py`` serves stdio,
``python py_server.py --http PORT`` Streamable HTTP on 127.0.0.1 (``/mcp``), ``--sse PORT`` HTTP+SSE (``/sse``).

Tools: ``echo`` and ``env`` (read-only), ``write_note`` (changes the project: needs permission), ``hang`` (writes
``started.txt`` in its cwd, waits until cancelled, then writes ``cancelled.txt``), ``fail`` (``isError``), ``pid``,
``big`` (a result of N bytes), ``grow`` (adds the tool ``late`` and sends ``tools/list_changed``), ``header`` (an
HTTP request header), ``image`` (a text and N copies of a 1×1 PNG, sent with the given mime type), ``add_prompt``
(adds the prompt ``late`` and sends ``prompts/list_changed``). With ``PY_SERVER_FLOOD=1`` also ``flap`` (changes
the prompt ``flapping``, sends ``prompts/list_changed``), ``touch_tools`` (sends ``tools/list_changed``) and
``listings`` (how many ``prompts/list`` or ``tools/list`` requests it was sent).

Prompts: ``review(code, style="concise")`` (one user text), ``context`` (no arguments: a text, an embedded text
resource, an assistant's text and a 1×1 PNG), ``slow`` (writes ``prompt_started.txt``, waits until cancelled, then
writes ``prompt_cancelled.txt``). Environment: ``PY_SERVER_NO_PROMPTS=1`` serves no prompts (the capability is not
advertised); ``PY_SERVER_HANG_PROMPTS=<path>`` makes ``prompts/list`` wait until the file ``<path>`` exists.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts import base
from mcp.types import (
    EmbeddedResource,
    ImageContent,
    ListPromptsRequest,
    ListToolsRequest,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

READ = ToolAnnotations(readOnlyHint=True)

server = FastMCP("py-test", host="127.0.0.1")

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1×1 PNG, base64."""


@server.tool(annotations=READ)
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool(annotations=READ)
def env(name: str) -> str:
    """The value of an environment variable of the server ('<unset>' when it has none)."""
    return os.environ.get(name, "<unset>")


@server.tool()
def write_note(text: str) -> str:
    """Write note.txt in the server's working directory."""
    Path("note.txt").write_text(text)
    return "written"


async def _hang_until_cancelled(prefix: str) -> str:
    """Write ``<prefix>started.txt``, never answer; when cancelled, write ``<prefix>cancelled.txt``."""
    Path(f"{prefix}started.txt").write_text("started")  # noqa: ASYNC240 - a tiny marker file
    try:
        await anyio.sleep_forever()
    finally:
        Path(f"{prefix}cancelled.txt").write_text("cancelled")  # noqa: ASYNC240 - a tiny marker file
    return "unreachable"


@server.tool(annotations=READ)
async def hang() -> str:
    """Writes started.txt, then never answers; when the client cancels it, writes cancelled.txt."""
    return await _hang_until_cancelled("")


@server.tool(annotations=READ)
def fail() -> str:
    """Always fails."""
    raise ValueError("the tool failed on purpose")


@server.tool(annotations=READ)
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool(annotations=READ)
def big(size: int) -> str:
    """A result of `size` bytes."""
    return "x" * size


@server.tool(annotations=READ)
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add the tool 'late' and tell the client."""

    def late() -> str:
        """A tool added later."""
        return "late tool"

    server.add_tool(late, annotations=READ)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(annotations=READ)
def header(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """A header of the HTTP request that called this tool."""
    request = ctx.request_context.request
    return str(request.headers.get(name, "<none>")) if request is not None else "<no request>"


@server.tool(annotations=READ)
def image(count: int = 1, mime_type: str = "image/png") -> list[TextContent | ImageContent]:
    """A text, then `count` images."""
    images = [ImageContent(type="image", data=PNG, mimeType=mime_type) for _ in range(count)]
    return [TextContent(type="text", text=f"{count} image(s)"), *images]


@server.prompt()
def review(code: str, style: str = "concise") -> str:
    """Review a piece of code."""
    return f"Review this code ({style}):\n{code}"


@server.prompt()
def context() -> list[base.Message]:
    """The project's context, in several parts."""
    resource = TextResourceContents(uri="file:///notes.md", text="the notes", mimeType="text/markdown")  # type: ignore[arg-type]
    return [
        base.UserMessage("Here is the context."),
        base.UserMessage(EmbeddedResource(type="resource", resource=resource)),
        base.AssistantMessage("Understood."),
        base.UserMessage(ImageContent(type="image", data=PNG, mimeType="image/png")),
    ]


@server.prompt()
async def slow() -> str:
    """Writes prompt_started.txt, then never answers; when the client cancels it, writes prompt_cancelled.txt."""
    return await _hang_until_cancelled("prompt_")


@server.tool(annotations=READ)
async def add_prompt(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add the prompt 'late' and tell the client."""

    def late(topic: str) -> str:
        """A prompt added later."""
        return f"late prompt about {topic}"

    server.prompt()(late)
    await ctx.session.send_prompt_list_changed()
    return "added"


def _serve_flood_tools() -> None:
    """``flap``, ``listings`` and ``touch_tools``, and the counts of the listings (``PY_SERVER_FLOOD=1``)."""
    counts = {"prompts": 0, "tools": 0, "flaps": 0}

    @server.tool(annotations=READ)
    async def flap(ctx: Context) -> str:  # type: ignore[type-arg]
        """Change the prompt 'flapping' (its description counts the changes) and tell the client."""
        counts["flaps"] += 1
        server._prompt_manager._prompts.pop("flapping", None)

        def flapping() -> str:
            return "flapping"

        server.prompt(description=f"changed {counts['flaps']} times")(flapping)
        await ctx.session.send_prompt_list_changed()
        return str(counts["flaps"])

    @server.tool(annotations=READ)
    def listings(what: str = "prompts") -> str:
        """How many prompts/list (or, with what='tools', tools/list) requests this server has been sent."""
        return str(counts[what])

    @server.tool(annotations=READ)
    async def touch_tools(ctx: Context) -> str:  # type: ignore[type-arg]
        """Send tools/list_changed (the tools stay the same)."""
        await ctx.session.send_tool_list_changed()
        return "told"

    handlers = server._mcp_server.request_handlers
    for request_type, what in ((ListPromptsRequest, "prompts"), (ListToolsRequest, "tools")):
        handler = handlers[request_type]

        async def counting(request: object, handler: Any = handler, what: str = what) -> object:
            counts[what] += 1
            return await handler(request)

        handlers[request_type] = counting


if os.environ.get("PY_SERVER_FLOOD") == "1":
    _serve_flood_tools()

if os.environ.get("PY_SERVER_NO_PROMPTS") == "1":
    del server._mcp_server.request_handlers[ListPromptsRequest]
elif os.environ.get("PY_SERVER_HANG_PROMPTS"):
    _listing = server._mcp_server.request_handlers[ListPromptsRequest]
    _release = Path(os.environ["PY_SERVER_HANG_PROMPTS"])

    async def _hanging_listing(request: ListPromptsRequest) -> object:
        while not _release.exists():  # noqa: ASYNC110, ASYNC240 - another process creates it
            await anyio.sleep(0.01)
        return await _listing(request)

    server._mcp_server.request_handlers[ListPromptsRequest] = _hanging_listing  # type: ignore[assignment]


if __name__ == "__main__":
    print("py-test MCP server starting", file=sys.stderr)
    if len(sys.argv) > 2 and sys.argv[1] in ("--http", "--sse"):
        server.settings.port = int(sys.argv[2])
        server.run("streamable-http" if sys.argv[1] == "--http" else "sse")
    else:
        server.run("stdio")
