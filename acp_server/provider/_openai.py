"""Construct the one openai SDK client the pipeline streams through."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai

OFFLINE_API_KEY = "offline"
"""Key sent to a ``base_url`` given without one: local endpoints need none, but the SDK insists on one."""

_READ_TIMEOUT_S = 600.0  # a backstop only: the pipeline's watchdog decides when a stream has stalled
_WRITE_TIMEOUT_S = 60.0


def make_openai_client(
    *, base_url: str | None, api_key: str | None, connect_timeout_s: float = 10.0
) -> openai.AsyncOpenAI:
    """Return an ``AsyncOpenAI`` that never retries (the pipeline owns retries) and only times out on connect.

    With neither ``base_url`` nor ``api_key`` the SDK falls back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``
    and raises ``openai.OpenAIError`` when no key is found.
    """
    import openai  # lazily: the SDK costs ~0.4 s of start-up

    if api_key is None and base_url is not None:
        api_key = OFFLINE_API_KEY
    timeout = openai.Timeout(
        connect=connect_timeout_s, read=_READ_TIMEOUT_S, write=_WRITE_TIMEOUT_S, pool=connect_timeout_s
    )
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
