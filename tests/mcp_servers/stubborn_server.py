"""A stdio MCP server that will not go: it ignores SIGTERM and SIGHUP, keeps running after its stdin ends, and starts
a child in its process group (``sleep 300``). It writes ``<its pid> <the child's pid>`` to the file ``PIDS_FILE``
names once it has answered ``initialize``. Plain JSON-RPC lines (one tool, ``echo``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

for number in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])  # in the server's group
TOOL = {"name": "echo", "inputSchema": {"type": "object", "properties": {}}}

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        info = {"name": "stubborn", "version": "1"}
        result: object = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": info,
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    else:
        result = {"content": [{"type": "text", "text": "ok"}]} if method == "tools/call" else {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
    if method == "initialize":
        path = os.environ["PIDS_FILE"]
        with open(path + ".tmp", "w") as pids:
            pids.write(f"{os.getpid()} {child.pid}")
        os.replace(path + ".tmp", path)

while True:  # stdin ended: stay anyway
    time.sleep(3600)
