"""Run ``acp-server`` with a session store, for the end-to-end tests, until the CLI has ``--state-dir``.

Usage: ``python tests/store/_serve.py [--state-dir DIR | --no-persist] [acp-server flags...]``. It wires the store
exactly as ``open_bridge`` is meant to (``open_store(...)`` entered before the bridge, closed after it) by giving
``acp_server.cli._agent`` a ``SessionBridge`` that owns the store, then runs the real ``acp-server`` entry point.
Once ``acp_server.config.OPTIONS`` has ``--state-dir``, the tests spawn ``python -m acp_server`` instead.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Any


def main() -> int:
    args: list[str] = []
    state_dir = os.environ.get("ACP_SERVER_STATE_DIR") or None
    persist = True
    argv = iter(sys.argv[1:])
    for arg in argv:
        if arg == "--state-dir":
            state_dir = next(argv)
        elif arg.startswith("--state-dir="):
            state_dir = arg.split("=", 1)[1]
        elif arg == "--no-persist":
            persist = False
        else:
            args.append(arg)

    import acp_server.cli._agent as agent
    from acp_server.bridge import SessionBridge
    from acp_server.cli import main as cli_main
    from acp_server.store import open_store

    store = open_store(state_dir, persist=persist)

    class StoreBridge(SessionBridge):
        def __init__(self, runner: Any, **kwargs: Any) -> None:
            super().__init__(runner, store=store, **kwargs)

        async def __aenter__(self) -> SessionBridge:
            await store.open()
            return await super().__aenter__()

        async def __aexit__(
            self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> bool | None:
            try:
                return await super().__aexit__(exc_type, exc, tb)
            finally:
                await store.aclose()

    agent.SessionBridge = StoreBridge  # type: ignore[misc]
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
