"""Which settings are secrets, and the secret a ``--store`` URL carries.

Invariant: a secret's value is never logged nor echoed; every log line redacts what :data:`SECRET_OPTIONS` and
:func:`store_password` name.
"""

from __future__ import annotations

import urllib.parse

from ._options import OPTIONS, SERVE_OPTIONS, Option

__all__ = ["SECRETS", "SECRET_OPTIONS", "store_password"]


SECRETS = frozenset({"api_key", "token", "store"})

SECRET_OPTIONS: tuple[Option, ...] = tuple(o for o in (*OPTIONS, *SERVE_OPTIONS) if o.dest in SECRETS)
"""The options that carry a secret: never logged nor echoed, and hidden from ``/proc`` at start-up."""


def store_password(url: str | None) -> str:
    """The password a ``--store`` URL carries (in its user part or as ``?password=``), '' if none: redacted from
    every log line like the other secrets."""
    if not url:
        return ""
    try:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query).get("password", [""])
        return urllib.parse.unquote(parts.password or "") or query[-1]
    except ValueError:
        return ""
