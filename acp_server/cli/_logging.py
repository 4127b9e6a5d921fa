"""Logging for every face: stderr (or ``--log-file``) only — stdout belongs to the protocol — with secrets redacted.

Invariant: logging never blocks serving. A record is formatted where it is logged and put, without waiting, on a
bounded queue; one writer thread moves the queue to the sink with ``os.write`` (no Python lock held while a write
blocks). When the sink cannot keep up (a client that never reads the agent's stderr), records are dropped and
counted, and one line says how many once the writer catches up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from typing import IO, TypeAlias

from ..urls import without_url_secrets

__all__ = ["QUEUE_RECORDS", "BoundedLogHandler", "configure_logging", "open_log_file"]

QUEUE_RECORDS = 10_000
"""Records waiting for the writer before new ones are dropped (a few MiB at most)."""

_CLOSE_TIMEOUT_S = 2.0
"""How long closing the handler waits for the writer to drain; a sink that stays blocked is abandoned."""

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_NOISY = ("pygls", "httpx", "httpx2", "httpcore", "httpcore2", "openai")

_Write: TypeAlias = Callable[[bytes], None]


class _Redact(logging.Filter):
    """Replace every known secret in a record's final message, and show every URL in it without its userinfo, query
    and fragment (an MCP server's URL, quoted by an HTTP library's line at any level); defence in depth behind
    "never log a secret"."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s and len(s) >= 4]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = without_url_secrets(message)
        for secret in self._secrets:
            redacted = redacted.replace(secret, "***")
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def _fd_writer(fd: int) -> _Write:
    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    return write


def _stream_writer(stream: IO[str]) -> _Write:
    def write(data: bytes) -> None:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()

    return write



class BoundedLogHandler(logging.Handler):
    """Formats records into a bounded queue; one daemon thread writes them. ``emit`` never blocks on the sink.

    ``dropped`` counts the records lost because the queue was full; the writer reports them in one line when the
    queue has drained.
    """

    def __init__(self, write: _Write, *, capacity: int = QUEUE_RECORDS, close_fd: int | None = None) -> None:
        super().__init__()
        self._write = write
        self._close_fd = close_fd
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=capacity)
        self._drop_lock = threading.Lock()
        self._dropped = 0  # not yet reported
        self.dropped = 0  # in total
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acp-server-log-writer", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        if self._queue.full():  # dropped anyway: spare the formatting
            self._count_drop()
            return
        try:
            line = (self.format(record) + "\n").encode("utf-8", "replace")
        except Exception:
            self.handleError(record)
            return
        self._enqueue(line)

    def _enqueue(self, line: bytes) -> None:
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self._count_drop()

    def _count_drop(self) -> None:
        with self._drop_lock:
            self._dropped += 1
            self.dropped += 1

    def _take_dropped(self) -> int:
        with self._drop_lock:
            count, self._dropped = self._dropped, 0
        return count

    def _run(self) -> None:
        write = self._write
        while True:
            item = self._queue.get()
            if item is None:
                break
            try:
                write(item)
                if self._queue.empty() and (count := self._take_dropped()):
                    write(
                        f"acp-server: {count} log record(s) dropped: the log output could not keep up\n".encode()
                    )
            except (OSError, ValueError):
                self._take_dropped()  # the sink is gone (closed pipe): nothing more can be reported
            if self._closing.is_set() and self._queue.empty():
                break

    def flush(self) -> None:
        """Nothing to do on the caller's side: the writer flushes each record as it writes it."""

    def close(self) -> None:
        """Let the writer drain for a bounded time, then stop it; a sink that stays blocked is abandoned."""
        self._closing.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        self._thread.join(_CLOSE_TIMEOUT_S)
        if self._close_fd is not None and not self._thread.is_alive():
            with contextlib.suppress(OSError):
                os.close(self._close_fd)
            self._close_fd = None
        super().close()


def open_log_file(path: str) -> int:
    """A file descriptor appending to ``path`` (created 0o644); raises ``OSError`` when it cannot be written."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def _stderr_handler() -> BoundedLogHandler:
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stderr (in-process tests): write through it
        return BoundedLogHandler(_stream_writer(sys.stderr))
    return BoundedLogHandler(_fd_writer(fd))


def configure_logging(level: str, log_file: str | None, secrets: Iterable[str] = ()) -> None:
    """Route every record at ``level`` and above to one :class:`BoundedLogHandler` (replacing a previous one).

    Raises ``OSError`` when ``log_file`` cannot be opened for appending.
    """
    if log_file:
        fd = open_log_file(log_file)
        handler = BoundedLogHandler(_fd_writer(fd), close_fd=fd)
    else:
        handler = _stderr_handler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_Redact(secrets))
    root = logging.getLogger()
    previous, root.handlers[:] = list(root.handlers), [handler]
    for old in previous:
        if isinstance(old, BoundedLogHandler):
            old.close()
    root.setLevel(level)
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(logging.NOTSET if level == "DEBUG" else logging.WARNING)
