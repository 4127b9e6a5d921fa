"""A minimal stdio MCP server for the benchmarks (plain JSON-RPC lines, no SDK: its own cost stays out of the
figures): ``initialize`` answered after ``--delay`` seconds (a server that takes time to start, e.g. to reach a
database), two read-only tools: ``echo``, and ``big`` (a text of ``size`` bytes)."""

from __future__ import annotations

import argparse
import json
import sys
import time

TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "annotations": {"readOnlyHint": True},
}
BIG = {
    "name": "big",
    "description": "A text of `size` bytes.",
    "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
    "annotations": {"readOnlyHint": True},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.0)
    delay = parser.parse_args().delay
    for line in sys.stdin:
        message = json.loads(line)
        method, msg_id = message.get("method"), message.get("id")
        if msg_id is None:
            continue  # notifications
        if method == "initialize":
            time.sleep(delay)
            result: dict[str, object] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-echo", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [TOOL, BIG]}
        elif method == "tools/call" and message["params"]["name"] == "big":
            result = {"content": [{"type": "text", "text": "x" * message["params"]["arguments"]["size"]}]}
        elif method == "tools/call":
            text = message["params"]["arguments"]["text"]
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
