"""A stdio MCP server of plain JSON-RPC lines, for what the official SDK's servers will not send: its behaviour is
chosen by ``RAW_SERVER`` (a comma-separated list):

- ``names``: tools ``x.y`` and ``x_y`` (both offered as ``mcp__<server>__x_y`` before a hash suffix); the tool
  ``swap`` lists them again in the other order and sends ``notifications/tools/list_changed``.
- ``metadata``: a tool whose description, title and name are huge, and whose titles hold escape sequences, line
  breaks, bidi overrides and zero-width characters.
- ``relist_hang`` / ``relist_error``: every ``tools/list`` after the first is never answered / answered an error;
  the tool ``touch`` sends ``notifications/tools/list_changed``, ``listings`` says how many were asked for.
- ``noisy``: the tool ``noise`` writes ``count`` lines to stderr.

Every tool answers ``ok`` (``echo``-like) unless said otherwise.
"""

from __future__ import annotations

import json
import os
import sys

MODES = set(os.environ.get("RAW_SERVER", "").split(","))
SCHEMA = {"type": "object", "properties": {}}
UNSHOWN = "\x1b[31mred\x1b[0m\r\nline\u202eevil\u200bzero\x07bell"
state = {"swapped": False, "listings": 0}


def tools() -> list[dict[str, object]]:
    listed: list[dict[str, object]] = []
    if "names" in MODES:
        pair = [{"name": "x.y", "inputSchema": SCHEMA}, {"name": "x_y", "inputSchema": SCHEMA}]
        listed += [*(reversed(pair) if state["swapped"] else pair), {"name": "swap", "inputSchema": SCHEMA}]
    if "metadata" in MODES:
        listed.append(
            {
                "name": "t" * 300,
                "title": f"title {UNSHOWN} " + "T" * 5000,
                "description": "D" * 100_000,
                "inputSchema": SCHEMA,
                "annotations": {"title": f"shown {UNSHOWN} " + "A" * 5000},
            }
        )
    if MODES & {"relist_hang", "relist_error"}:
        listed += [{"name": "touch", "inputSchema": SCHEMA}, {"name": "listings", "inputSchema": SCHEMA}]
    if "noisy" in MODES:
        listed.append(
            {"name": "noise", "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}}}
        )
    return listed


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def call(name: str, arguments: dict[str, object]) -> dict[str, object]:
    if name == "swap":
        state["swapped"] = not state["swapped"]
        send({"method": "notifications/tools/list_changed"})
    elif name == "touch":
        send({"method": "notifications/tools/list_changed"})
    elif name == "listings":
        return {"content": [{"type": "text", "text": str(state["listings"])}]}
    elif name == "noise":
        for i in range(int(str(arguments.get("count", 1)))):
            sys.stderr.write(f"noise {i}\n")
        sys.stderr.flush()
    return {"content": [{"type": "text", "text": f"ok {name}"}]}


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue  # a notification, or a response to nothing this server asked
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        info = {"name": "raw", "version": "1"}
        result: object = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": info,
        }
    elif method == "tools/list":
        state["listings"] += 1
        if state["listings"] > 1 and "relist_hang" in MODES:
            continue
        if state["listings"] > 1 and "relist_error" in MODES:
            send({"id": message["id"], "error": {"code": -32603, "message": "listing broke"}})
            continue
        result = {"tools": tools()}
    elif method == "tools/call":
        result = call(params["name"], params.get("arguments") or {})
    else:
        result = {}
    send({"id": message["id"], "result": result})
