"""``python -m acp_server.tools [DIRECTORY]``: write the tools' JSON Schemas, one ``<name>.json`` per tool, to
DIRECTORY (default: the repository's ``schemas/tools``). A test pins those files to what the code sends."""

from __future__ import annotations

import sys
from pathlib import Path

from .builtin import BUILTIN_TOOLS
from .registry import schema_json

DEFAULT_DIRECTORY = Path(__file__).resolve().parents[2] / "schemas" / "tools"


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else DEFAULT_DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    for tool in BUILTIN_TOOLS:
        path = directory / f"{tool.name}.json"
        path.write_text(schema_json(tool), encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
