"""An MCP server on the official ``mcp`` SDK (FastMCP) whose tools elicit: ``ask`` asks for a form (its schema padded
to ``ELICIT_PAD`` bytes when set), ``login`` for a URL; each returns what the client answered (or its error)."""

from __future__ import annotations

import json
import os

from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.types import ToolAnnotations

server = FastMCP("elicit-test")
READ = ToolAnnotations(readOnlyHint=True)


@server.tool(annotations=READ)
async def ask(ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the user for their name and age."""
    pad = int(os.environ.get("ELICIT_PAD", "0"))
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your name" + " " * pad},
            "age": {"type": "integer"},
        },
        "required": ["name"],
    }
    params = ctx.session.client_params  # a client that did not offer elicitation is asked anyway, as a server may
    said = "" if params is not None and params.capabilities.elicitation is not None else "not offered; "
    try:
        result = await ctx.session.elicit_form("Who are you?", schema, related_request_id=ctx.request_id)
    except McpError as exc:
        return f"{said}error: {exc.error.message}"
    return f"{said}{result.action}: {json.dumps(result.content, sort_keys=True)}"


@server.tool(annotations=READ)
async def login(ctx: Context) -> str:  # type: ignore[type-arg]
    """Send the user to a sign-in page."""
    try:
        url = "https://example.com/oauth?x=1"
        result = await ctx.session.elicit_url("Sign in", url, "e-1", related_request_id=ctx.request_id)
    except McpError as exc:
        return f"error: {exc.error.message}"
    return f"{result.action}: {json.dumps(result.content)}"


if __name__ == "__main__":
    server.run()
