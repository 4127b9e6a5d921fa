"""Text files on disk: read only when they are text (UTF-8, no NUL byte in the first 8 KiB) and at most 10 MiB;
written atomically (a temporary file in the same directory, fsync, ``os.replace``), keeping the file's mode.

Files are reached from the project directory through directory descriptors, without following any symbolic link
(:mod:`._dirfd`), and opened with ``O_NOFOLLOW``: a link swapped in after the confinement check is not followed.
Every failure is a :class:`ToolCallError` naming the file relative to the project.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import stat

from ._dirfd import open_parent
from ._exceptions import ToolCallError
from ._workspace import Target, describe_mode

__all__ = [
    "MAX_TEXT_FILE_BYTES",
    "SNIFF_BYTES",
    "check_text_head",
    "check_written_size",
    "decode_text",
    "encode_text",
    "is_binary",
    "read_searchable",
    "read_text",
    "read_text_prefix",
    "remove_file",
    "too_large",
    "write_bytes_atomic",
    "write_text_atomic",
]

MAX_TEXT_FILE_BYTES = 10 * 1024 * 1024
"""Files larger than this are not read (read_file, edit_file) nor searched (grep)."""

SNIFF_BYTES = 8192
"""A NUL byte in this many first bytes makes a file binary."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:SNIFF_BYTES]


def _binary(target: Target, why: str) -> ToolCallError:
    return ToolCallError(f"binary file {target.rel} not shown ({why}); only text files can be read or edited")


def decode_text(data: bytes, target: Target) -> str:
    """``data`` (the content of ``target``) as text, or refused as binary."""
    if is_binary(data):
        raise _binary(target, "it contains NUL bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _binary(target, "it is not UTF-8 text") from None


def _open_regular(target: Target) -> tuple[int, int]:
    """An fd open for reading on the regular file ``target``, and its size (reached through directory
    descriptors: :func:`open_parent`)."""
    parent, name = open_parent(target, create=False, verb="read")
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        raise ToolCallError(f"{target.rel} does not exist (any more)") from None
    except OSError as exc:
        raise ToolCallError(f"cannot open {target.rel}: {exc.strerror}") from None
    finally:
        os.close(parent)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ToolCallError(f"{target.rel} is {describe_mode(info.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def too_large(target: Target, size: int) -> ToolCallError:
    return ToolCallError(
        f"{target.rel} is {size / 1024 / 1024:.1f} MiB; files over {MAX_TEXT_FILE_BYTES // 1024 // 1024} MiB are "
        "not read (run_command can show parts of it, e.g. with head, tail or sed -n)"
    )


def check_written_size(target: Target, size: int, what: str) -> None:
    """Refuse a write that would leave ``target`` over 10 MiB (``size`` bytes); ``what`` says what makes it so."""
    if size > MAX_TEXT_FILE_BYTES:
        raise ToolCallError(
            f"{what} would make {target.rel} {size / 1024 / 1024:.1f} MiB ({size} bytes); files over "
            f"{MAX_TEXT_FILE_BYTES // 1024 // 1024} MiB ({MAX_TEXT_FILE_BYTES} bytes) are not written"
        )


_READ_SLACK = 64 * 1024
"""Beyond the size ``fstat`` gave, what one read asks for (a file that grew since is still read to its end)."""


def _read_all(fd: int, size: int) -> bytes:
    """The bytes of ``fd`` up to its end, or the first ``MAX_TEXT_FILE_BYTES + 1`` of them: read with ``os.read``
    in reads sized from ``size`` (what ``fstat`` said), so a small file costs a small buffer, not 10 MiB."""
    limit = MAX_TEXT_FILE_BYTES + 1
    parts: list[bytes] = []
    total = 0
    while total < limit:
        piece = os.read(fd, min(limit - total, max(size + 1 - total, _READ_SLACK)))
        if not piece:
            break
        parts.append(piece)
        total += len(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_text(target: Target) -> str:
    """The text of the regular file ``target`` (refused when binary, not UTF-8 or over 10 MiB)."""
    fd, size = _open_regular(target)
    try:
        if size > MAX_TEXT_FILE_BYTES:
            raise too_large(target, size)
        data = _read_all(fd, size)
    except OSError as exc:
        raise ToolCallError(f"cannot read {target.rel}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_TEXT_FILE_BYTES:
        raise too_large(target, len(data))
    return decode_text(data, target)


def read_text_prefix(target: Target, limit: int) -> tuple[str, bool]:
    """At most the first ``limit`` bytes of the regular file ``target`` as text (a character the limit cuts is
    dropped), and whether the file holds more; refused as :func:`read_text` refuses (binary, not UTF-8). Reads
    ``limit + 1`` bytes at most, whatever the file's size."""
    fd, size = _open_regular(target)
    parts: list[bytes] = []
    total = 0
    try:
        while total <= limit:
            piece = os.read(fd, min(limit + 1 - total, max(size + 1 - total, _READ_SLACK)))
            if not piece:
                break
            parts.append(piece)
            total += len(piece)
    except OSError as exc:
        raise ToolCallError(f"cannot read {target.rel}: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(parts)
    more = len(data) > limit
    data = data[:limit]
    if is_binary(data):
        raise _binary(target, "it contains NUL bytes")
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=not more), more
    except UnicodeDecodeError:
        raise _binary(target, "it is not UTF-8 text") from None


def check_text_head(target: Target) -> None:
    """Refuse ``target`` as :func:`read_text` would, from the file on disk, before the client is asked to read
    it: not a regular file, over 10 MiB, or binary in its first bytes."""
    fd, size = _open_regular(target)
    try:
        if size > MAX_TEXT_FILE_BYTES:
            raise too_large(target, size)
        head = os.read(fd, SNIFF_BYTES)
    except OSError as exc:
        raise ToolCallError(f"cannot read {target.rel}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if is_binary(head):
        raise _binary(target, "it contains NUL bytes")


def encode_text(content: str) -> bytes:
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolCallError(
            f"content is not valid text: a lone surrogate (\\u{ord(content[exc.start]):04x}) at character {exc.start}"
        ) from None


def write_text_atomic(target: Target, content: str) -> None:
    """Replace (or create) ``target`` with ``content`` in one step: readers see the old file or the new one,
    never a part. Missing parent directories are created; an existing file keeps its permission bits. The
    directory is reached, and the temporary file created and renamed, through directory descriptors
    (:func:`open_parent`): a directory swapped for a symbolic link since the check fails the write."""
    data = encode_text(content)
    parent, name = open_parent(target, create=True, verb="write")
    try:
        _replace_in(parent, name, data)
    except OSError as exc:
        raise ToolCallError(f"cannot write {target.rel}: {exc.strerror or exc}") from None
    finally:
        os.close(parent)


def write_bytes_atomic(target: Target, data: bytes) -> None:
    """:func:`write_text_atomic` for any bytes (a checkpoint's restored file)."""
    parent, name = open_parent(target, create=True, verb="write")
    try:
        _replace_in(parent, name, data)
    except OSError as exc:
        raise ToolCallError(f"cannot write {target.rel}: {exc.strerror or exc}") from None
    finally:
        os.close(parent)


def remove_file(target: Target) -> None:
    """Remove the file ``target`` (reached through directory descriptors like a write); gone already: done."""
    try:
        parent, name = open_parent(target, create=False, verb="remove")
    except ToolCallError:
        if not os.path.lexists(target.real):
            return
        raise
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ToolCallError(f"cannot remove {target.rel}: {exc.strerror or exc}") from None
    finally:
        os.close(parent)


def _replace_in(parent: int, name: str, data: bytes) -> None:
    """Write ``data`` to a temporary file in the directory ``parent``, then rename it to ``name`` there."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        temporary = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666 if mode is None else 0o600,
                dir_fd=parent,
            )
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if mode is not None:
                os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise
    with contextlib.suppress(OSError):
        os.fsync(parent)


def read_searchable(real: str) -> tuple[str | None, str]:
    """The text of the file at ``real`` for a search, or None and why not (``binary``, ``large``,
    ``unreadable``): a search skips such files quietly, so none of this is an error."""
    try:
        fd = os.open(real, _READ_FLAGS)
    except OSError:
        return None, "unreadable"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "unreadable"
        if info.st_size > MAX_TEXT_FILE_BYTES:
            return None, "large"
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_TEXT_FILE_BYTES + 1)
    except OSError:
        return None, "unreadable"
    finally:
        os.close(fd)
    if len(data) > MAX_TEXT_FILE_BYTES:
        return None, "large"
    if is_binary(data):
        return None, "binary"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, "binary"
