"""A small MCP server on the official ``mcp`` SDK (FastMCP), for the tests: ``python py_server.py`` serves stdio,
``python py_server.py --http PORT`` Streamable HTTP on 127.0.0.1 (``/mcp``), ``--sse PORT`` HTTP+SSE (``/sse``).

Tools: ``echo`` and ``env`` (read-only), ``write_note`` (changes the project: needs permission), ``hang`` (writes
``started.txt`` in its cwd, waits until cancelled, then writes ``cancelled.txt``), ``fail`` (``isError``), ``pid``,
``big`` (a result of N bytes), ``grow`` (adds the tool ``late`` and sends ``tools/list_changed``), ``header`` (an
HTTP request header), ``image`` (a text and N copies of a 1×1 PNG, sent with the given mime type).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ImageContent, TextContent, ToolAnnotations

READ = ToolAnnotations(readOnlyHint=True)

server = FastMCP("py-test", host="127.0.0.1")

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
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


@server.tool(annotations=READ)
async def hang() -> str:
    """Writes started.txt, then never answers; when the client cancels it, writes cancelled.txt."""
    Path("started.txt").write_text("started")  # noqa: ASYNC240 - a tiny marker file
    try:
        await anyio.sleep_forever()
    finally:
        Path("cancelled.txt").write_text("cancelled")  # noqa: ASYNC240 - a tiny marker file
    return "unreachable"


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


if __name__ == "__main__":
    print("py-test MCP server starting", file=sys.stderr)
    if len(sys.argv) > 2 and sys.argv[1] in ("--http", "--sse"):
        server.settings.port = int(sys.argv[2])
        server.run("streamable-http" if sys.argv[1] == "--http" else "sse")
    else:
        server.run("stdio")
