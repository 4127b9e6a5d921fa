"""A stdio MCP server that answers ``prompts/list`` (``MALFORMED=list``) or ``prompts/get`` (``MALFORMED=get``) with
a result the MCP schema refuses (a prompt without its required ``name``; messages that are not messages). Written by
hand because the official SDK's servers cannot send such a result: it stands for a buggy server, to check that the
client's handling of it is bounded to that request. Everything else is a minimal, valid answer."""

from __future__ import annotations

import json
import os
import sys

BAD = os.environ.get("MALFORMED", "list")
PROMPT = {"name": "greet", "description": "Say hello."}


def result(method: str, params: dict[str, object]) -> object:
    if method == "initialize":
        capabilities = {"tools": {}, "prompts": {}}
        info = {"name": "malformed", "version": "1"}
        return {"protocolVersion": params["protocolVersion"], "capabilities": capabilities, "serverInfo": info}
    if method == "tools/list":
        return {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}]}
    if method == "prompts/list":
        return {"prompts": [{"description": "no name"}] if BAD == "list" else [PROMPT]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "echo"}]}
    if method == "prompts/get":
        return {"messages": [{"not": "a message"}]} if BAD == "get" else {"messages": []}
    return {}


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue  # a notification, or a response to nothing this server asked
    answer = result(message["method"], message.get("params") or {})
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + "\n")
    sys.stdout.flush()
