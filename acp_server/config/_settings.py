"""The resolved configuration: what each face builds its stack from.

Invariant: a ``Settings`` / ``ServeSettings`` holds only values already checked by their option's parser
(``_parsers.py``); secret fields (``api_key``, ``store``, ``token``, ``system_prompt``) are left out of ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..limits import DEFAULT_FS_REQUEST_TIMEOUT_MS

__all__ = ["ServeSettings", "Settings"]


@dataclass(frozen=True)
class Settings:
    """Everything a face needs to build the stack. ``api_key`` is a secret: it is never logged or echoed."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    models: tuple[str, ...] = ()
    context_window: int | None = None
    compact_threshold: int = 80
    offline: bool = False
    max_pending_prompts_per_session: int | None = 5
    prompt_deadline_ms: int | None = None
    stream_idle_timeout_ms: int = 120_000
    stream_max_lifetime_ms: int = 900_000
    max_message_bytes: int = 64 * 1024 * 1024
    log_level: str = "INFO"
    log_file: str | None = None
    state_dir: str | None = None
    store: str | None = field(default=None, repr=False)  # a postgresql:// URL: may carry a password
    no_persist: bool = False
    max_turn_requests: int = 50
    default_mode: str = "default"
    allow_bypass_permissions: bool = False
    mcp_connect_timeout_ms: int = 10_000
    mcp_call_timeout_ms: int = 120_000
    fs_request_timeout_ms: int = DEFAULT_FS_REQUEST_TIMEOUT_MS
    no_project_instructions: bool = False
    system_prompt: str | None = field(default=None, repr=False)  # the text of --system-prompt-file


@dataclass(frozen=True)
class ServeSettings:
    """The options only ``acp-server serve`` has. ``token`` is a secret: never logged or echoed."""

    host: str = "127.0.0.1"
    port: int = 4170
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = 16 * 1024 * 1024
    allow_origins: tuple[str, ...] = ()
    event_ring_size: int = 4096
    event_ring_total_bytes: int = 64 * 1024 * 1024
    max_connections: int = 1024
    header_timeout_ms: int = 10_000
    body_timeout_ms: int = 60_000
