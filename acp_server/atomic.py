"""A private file written whole or not at all: to a temporary name beside it, then renamed over it, so a kill leaves
the old file or the new one, never a part. Mode 0600 (the user's alone); a missing directory is made 0700."""

from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["atomic_write"]


def atomic_write(path: str, data: bytes, *, sync: bool = True) -> None:
    """``path`` holds ``data`` (its directory made when missing), replaced in one rename."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)  # the user's alone
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            if sync:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
