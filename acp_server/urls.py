"""URLs as they may be shown (ground floor: imports nothing of the package): a query and userinfo are where
credentials hide (``https://user:pw@host/mcp?key=...``), so neither ever reaches a log line or a client's error.

Invariant: :func:`public_url` and :func:`without_url_secrets` never return a URL's userinfo, query or fragment.
"""

from __future__ import annotations

import re

__all__ = ["public_url", "without_url_secrets"]

_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#'\"<>]*@)?(?P<rest>[^\s?#'\"<>]*)"
    r"(?P<secret>[?#][^\s'\"<>]*)?"
)


def _shown(match: re.Match[str]) -> str:
    return match["scheme"] + match["rest"]


def public_url(url: str) -> str:
    """``url`` without its userinfo, query and fragment (``scheme://host:port/path``)."""
    return _URL.sub(_shown, url.strip())


def without_url_secrets(text: str) -> str:
    """``text`` with every URL in it shown by :func:`public_url` (a message that may quote one: an HTTP library's
    error or log line)."""
    return _URL.sub(_shown, text) if "://" in text else text
