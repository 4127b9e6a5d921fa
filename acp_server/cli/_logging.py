"""Logging for every face: stderr (or ``--log-file``) only — stdout belongs to the protocol — with secrets redacted."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

__all__ = ["configure_logging"]


class _Redact(logging.Filter):
    """Replace every known secret in a record's final message; defence in depth behind "never log a secret"."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s and len(s) >= 4]

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = record.getMessage()
            redacted = message
            for secret in self._secrets:
                redacted = redacted.replace(secret, "***")
            if redacted != message:
                record.msg, record.args = redacted, None
        return True


def configure_logging(level: str, log_file: str | None, secrets: Iterable[str] = ()) -> None:
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Redact(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":
        for noisy in ("pygls", "httpx", "httpx2", "httpcore", "httpcore2", "openai"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
