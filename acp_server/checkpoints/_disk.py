"""The checkpoints' own files, in the agent's state directory (never in the user's project): atomic JSON and
content-addressed blobs.

A blob is a file's bytes under the SHA-256 of them (``blobs/<hex>``): the same content is kept once. Every file is
written to a temporary name then renamed, so a kill leaves the old file or the new one, never a part.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ..atomic import atomic_write

__all__ = ["blob_path", "digest", "put_blob", "read_json", "write_json"]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_json(path: str) -> Any:
    """The JSON value in ``path``; None when it is missing or unreadable."""
    try:
        with open(path, "rb") as file:
            return json.loads(file.read())
    except (OSError, ValueError):
        return None


def write_json(path: str, value: Any, *, sync: bool = True) -> None:
    atomic_write(path, json.dumps(value, ensure_ascii=False).encode(), sync=sync)


def blob_path(directory: str, sha: str) -> str:
    return os.path.join(directory, "blobs", sha[:2], sha)


def put_blob(directory: str, data: bytes) -> str:
    """Keep ``data`` as a blob of ``directory`` (once: an existing blob is not written again); returns its hash."""
    sha = digest(data)
    path = blob_path(directory, sha)
    if not os.path.exists(path):
        atomic_write(path, data, sync=False)
    return sha
