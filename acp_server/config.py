"""Settings shared by every face (stdio agent, ``ask``, ``serve``): command-line flags with environment fallbacks.

Precedence: flag > environment variable > default. An invalid value is a usage error (exit 2) that names the flag
or variable; nothing is started.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .limits import DEFAULT_FS_REQUEST_TIMEOUT_MS
from .modes import BYPASS_MODE, MODES
from .store import check_store_url

__all__ = [
    "LOG_LEVELS",
    "OPTIONS",
    "SECRET_OPTIONS",
    "SERVE_OPTIONS",
    "ServeSettings",
    "Settings",
    "add_common_options",
    "add_serve_options",
    "serve_settings_from_args",
    "settings_from_args",
    "store_password",
]

T = TypeVar("T")


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


def _token(text: str) -> str:
    """A bearer token: surrounding whitespace stripped; empty or blank is an error (it would protect nothing)."""
    token = text.strip()
    if not token:
        raise ValueError("must not be empty or blank")
    return token


def _non_negative_int(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text.strip())
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def _percent(text: str) -> int:
    value = int(text.strip().removesuffix("%"))
    if not 0 <= value <= 100:
        raise ValueError("must be a percentage from 0 to 100")
    return value


def _int(text: str) -> int:
    return int(text.strip())


def _port(text: str) -> int:
    value = int(text.strip())
    if not 0 <= value <= 65535:
        raise ValueError("must be from 0 to 65535")
    return value


def _host(text: str) -> str:
    host = text.strip()
    if not host:
        raise ValueError("must not be empty")
    return host


def _origins(text: str) -> tuple[str, ...]:
    origins = tuple(o.strip().rstrip("/") for o in text.split(",") if o.strip())
    for origin in origins:
        if origin != "*" and ("://" not in origin or not origin.startswith(("http://", "https://"))):
            raise ValueError(f"{origin!r} is not an origin (scheme://host[:port] or *)")
    return origins


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return level


def _mode(text: str) -> str:
    mode = text.strip()
    if mode not in MODES:
        raise ValueError(f"must be one of {', '.join(MODES)}")
    return mode


def _models(text: str) -> tuple[str, ...]:
    """A comma-separated list of model names: blanks around names are dropped, duplicates kept once."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise ValueError("must name at least one model")
    return names


def _boolean(text: str) -> bool:
    """An on/off switch given in the environment."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be 1, true, yes, on, or 0, false, no, off")


MAX_SYSTEM_PROMPT_BYTES = 256 * 1024


def _system_prompt_file(text: str) -> str:
    """The text of a system prompt file: read now (a missing, unreadable, binary or empty one is a usage error)."""
    if not text.strip():
        raise ValueError("must not be empty")
    try:
        with open(text, "rb") as file:
            data = file.read(MAX_SYSTEM_PROMPT_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_SYSTEM_PROMPT_BYTES:
        raise ValueError(f"it is over {MAX_SYSTEM_PROMPT_BYTES // 1024} KiB")
    try:
        prompt = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    if not prompt.strip() or "\0" in prompt:
        raise ValueError("it is empty" if not prompt.strip() else "it is not text (a NUL byte)")
    return prompt


def _log_file(text: str) -> str:
    """A path the agent can append to: checked (and created) now, so a bad one is a usage error, not a crash."""
    if not text.strip():
        raise ValueError("must not be empty")
    try:
        with open(text, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ValueError(f"cannot write to it: {exc.strerror or exc}") from None
    return text


@dataclass(frozen=True)
class Option:
    """One setting: its flag, its environment variable, how to parse it, and what the README says of it."""

    dest: str
    flag: str
    env: str | None
    parse: Callable[[str], Any] | None
    help: str
    metavar: str | None = None


OPTIONS: tuple[Option, ...] = (
    Option(
        "base_url", "--base-url", "OPENAI_BASE_URL", str, "OpenAI-compatible endpoint (e.g. http://localhost:11434/v1)"
    ),
    Option("api_key", "--api-key", "OPENAI_API_KEY", str, "API key for the endpoint (never logged)"),
    Option(
        "model",
        "--model",
        "OPENAI_MODEL",
        str,
        "default model of a session (default: the first of --models, else gpt-4o-mini)",
    ),
    Option(
        "models",
        "--models",
        "ACP_SERVER_MODELS",
        _models,
        "comma-separated models a session may pick (default: what the endpoint's GET /v1/models lists, asked "
        "once in the background, else --model alone)",
        "A,B,...",
    ),
    Option(
        "context_window",
        "--context-window",
        "ACP_SERVER_CONTEXT_WINDOW",
        _positive_int,
        "context window in tokens reported with usage for every model (default: what the endpoint's model list "
        "says, else the documented window of well-known model families, else none is reported)",
        "TOKENS",
    ),
    Option(
        "compact_threshold",
        "--compact-threshold",
        "ACP_SERVER_COMPACT_THRESHOLD",
        _percent,
        "compact the conversation before a request that would fill more than this percentage of the context "
        "window; 0 = only when the endpoint refuses a request as too long (default 80)",
        "PERCENT",
    ),
    Option("offline", "--offline", None, None, "use the built-in deterministic offline model on 127.0.0.1"),
    Option(
        "max_pending_prompts_per_session",
        "--max-pending-prompts-per-session",
        "ACP_SERVER_MAX_PENDING_PROMPTS_PER_SESSION",
        _non_negative_int,
        "prompts waiting + running per session before new ones are refused; 0 = unlimited (default 5)",
        "N",
    ),
    Option(
        "prompt_deadline_ms",
        "--prompt-deadline-ms",
        "ACP_SERVER_PROMPT_DEADLINE_MS",
        _positive_int,
        "deadline of an accepted prompt, from acceptance (default: none)",
        "MS",
    ),
    Option(
        "stream_idle_timeout_ms",
        "--stream-idle-timeout-ms",
        "ACP_SERVER_STREAM_IDLE_TIMEOUT_MS",
        _int,
        "abort a model stream after this long without a chunk; <= 0 disables (default 120000)",
        "MS",
    ),
    Option(
        "stream_max_lifetime_ms",
        "--stream-max-lifetime-ms",
        "ACP_SERVER_STREAM_MAX_LIFETIME_MS",
        _int,
        "abort a model stream that lasts longer than this; <= 0 disables (default 900000)",
        "MS",
    ),
    Option(
        "max_message_bytes",
        "--max-message-bytes",
        "ACP_SERVER_MAX_MESSAGE_BYTES",
        _positive_int,
        "longest accepted JSON-RPC line (default 67108864 = 64 MiB)",
        "BYTES",
    ),
    Option(
        "log_level",
        "--log-level",
        "ACP_SERVER_LOG_LEVEL",
        _log_level,
        "one of DEBUG, INFO, WARNING, ERROR, CRITICAL, any case (default INFO; WARNING for ask)",
        "LEVEL",
    ),
    Option(
        "log_file",
        "--log-file",
        "ACP_SERVER_LOG_FILE",
        _log_file,
        "append logs to this file instead of stderr (must be writable)",
        "PATH",
    ),
    Option(
        "state_dir",
        "--state-dir",
        "ACP_SERVER_STATE_DIR",
        str,
        "directory of sessions.db, the session database (default $XDG_STATE_HOME/acp-server)",
        "DIR",
    ),
    Option(
        "store",
        "--store",
        "ACP_SERVER_STORE",
        check_store_url,
        "keep sessions in this PostgreSQL database (postgresql://USER:PASSWORD@HOST:PORT/DB) instead of SQLite's "
        "sessions.db; each live session is owned by one process (never logged; default: SQLite)",
        "URL",
    ),
    Option(
        "no_persist",
        "--no-persist",
        None,
        None,
        "keep sessions in memory only: nothing is read or written (wins over --store)",
    ),
    Option(
        "max_turn_requests",
        "--max-turn-requests",
        "ACP_SERVER_MAX_TURN_REQUESTS",
        _positive_int,
        "model requests one prompt may make (each answer that calls tools is one); past it the prompt ends "
        "max_turn_requests (default 50)",
        "N",
    ),
    Option(
        "default_mode",
        "--default-mode",
        "ACP_SERVER_DEFAULT_MODE",
        _mode,
        "mode of a new session: default (ask before edits and commands), accept-edits, read-only, or "
        "bypass-permissions (needs --allow-bypass-permissions) (default: default)",
        "MODE",
    ),
    Option(
        "allow_bypass_permissions",
        "--allow-bypass-permissions",
        None,
        None,
        "offer the bypass-permissions mode (edits and commands without asking)",
    ),
    Option(
        "mcp_connect_timeout_ms",
        "--mcp-connect-timeout-ms",
        "ACP_SERVER_MCP_CONNECT_TIMEOUT_MS",
        _positive_int,
        "how long a session's MCP server may take to start and list its tools; servers connect in parallel, a "
        "slower one is stopped and left out (default 10000)",
        "MS",
    ),
    Option(
        "mcp_call_timeout_ms",
        "--mcp-call-timeout-ms",
        "ACP_SERVER_MCP_CALL_TIMEOUT_MS",
        _positive_int,
        "how long one MCP tool call may take before it is cancelled and fails (default 120000)",
        "MS",
    ),
    Option(
        "fs_request_timeout_ms",
        "--fs-request-timeout-ms",
        "ACP_SERVER_FS_REQUEST_TIMEOUT_MS",
        _positive_int,
        "how long a file read or write through the editor (fs/read_text_file, fs/write_text_file) waits for its "
        f"answer; then the call fails (default {DEFAULT_FS_REQUEST_TIMEOUT_MS})",
        "MS",
    ),
    Option(
        "no_project_instructions",
        "--no-project-instructions",
        "ACP_SERVER_NO_PROJECT_INSTRUCTIONS",
        None,
        "do not give the model the project's AGENTS.md (or CLAUDE.md, GEMINI.md, QWEN.md); the environment "
        "variable takes 1/true/yes/on or 0/false/no/off",
    ),
    Option(
        "system_prompt",
        "--system-prompt-file",
        "ACP_SERVER_SYSTEM_PROMPT_FILE",
        _system_prompt_file,
        "replace the built-in system prompt (how the model is asked to work) with this UTF-8 file, at most 256 "
        "KiB; the environment and project instructions still follow it",
        "PATH",
    ),
)


SERVE_OPTIONS: tuple[Option, ...] = (
    Option("host", "--host", "ACP_SERVER_HOST", _host, "address to listen on (default 127.0.0.1)", "HOST"),
    Option("port", "--port", "ACP_SERVER_PORT", _port, "port to listen on; 0 = any free port (default 4170)", "PORT"),
    Option(
        "token",
        "--token",
        "ACP_SERVER_TOKEN",
        _token,
        "bearer token every route but /health requires; mandatory off loopback and with --allow-origin '*'; "
        "surrounding spaces stripped, blank refused (never logged)",
        "TOKEN",
    ),
    Option(
        "max_body_bytes",
        "--max-body-bytes",
        "ACP_SERVER_MAX_BODY_BYTES",
        _positive_int,
        "largest accepted request body (default 16777216 = 16 MiB)",
        "BYTES",
    ),
    Option(
        "allow_origins",
        "--allow-origin",
        "ACP_SERVER_ALLOW_ORIGIN",
        _origins,
        "comma-separated browser origins allowed by CORS, or * (default: none, no CORS)",
        "ORIGINS",
    ),
    Option(
        "event_ring_size",
        "--event-ring-size",
        "ACP_SERVER_EVENT_RING_SIZE",
        _positive_int,
        "events kept per session for Last-Event-ID replay (default 4096)",
        "N",
    ),
    Option(
        "event_ring_total_bytes",
        "--event-ring-total-bytes",
        "ACP_SERVER_EVENT_RING_TOTAL_BYTES",
        _positive_int,
        "bytes all sessions' replay rings hold together; the least recently active sessions' oldest events are "
        "evicted first (default 67108864 = 64 MiB)",
        "BYTES",
    ),
    Option(
        "max_connections",
        "--max-connections",
        "ACP_SERVER_MAX_CONNECTIONS",
        _positive_int,
        "open client connections, event streams included; at the cap a new one displaces the oldest connection "
        "still sending its headers, else gets 503; lowered to fit the open-file limit (default 1024)",
        "N",
    ),
    Option(
        "header_timeout_ms",
        "--header-timeout-ms",
        "ACP_SERVER_HEADER_TIMEOUT_MS",
        _positive_int,
        "close a connection whose request headers are not complete this long after it opened (default 10000)",
        "MS",
    ),
    Option(
        "body_timeout_ms",
        "--body-timeout-ms",
        "ACP_SERVER_BODY_TIMEOUT_MS",
        _positive_int,
        "answer 408 and close when a request body is not complete this long after its headers; responses "
        "(event streams) have no time limit (default 60000)",
        "MS",
    ),
)
"""The options of ``acp-server serve`` only (their own README table)."""


def add_common_options(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """Add every setting's flag; values stay raw strings so flag and env errors are reported the same way.

    On a subcommand the defaults are suppressed, so ``acp-server --offline ask …`` keeps the flag given before it.
    Abbreviated flags are off: ``ask --mode`` would be ambiguous with ``--model`` / ``--models`` (and an
    abbreviation that works today would break the day a longer flag is added).
    """
    parser.allow_abbrev = False
    default = argparse.SUPPRESS if subcommand else None
    for option in OPTIONS:
        if option.parse is None:
            parser.add_argument(option.flag, dest=option.dest, action="store_true", default=default, help=option.help)
        else:
            parser.add_argument(
                option.flag, dest=option.dest, default=default, help=option.help, metavar=option.metavar
            )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help="same as --log-level DEBUG",
    )


_SECRETS = frozenset({"api_key", "token", "store"})

SECRET_OPTIONS: tuple[Option, ...] = tuple(o for o in (*OPTIONS, *SERVE_OPTIONS) if o.dest in _SECRETS)
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


def _resolve(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str], options: Sequence[Option]
) -> dict[str, Any]:
    """Flag > environment > default for each option; an invalid value exits via ``parser.error`` (exit 2)."""
    values: dict[str, Any] = {}
    for option in options:
        raw = getattr(args, option.dest, None)
        source = option.flag
        if raw is None and option.env is not None and env.get(option.env, "") != "":
            raw, source = env[option.env], option.env
        if raw is None:
            continue
        if option.parse is None and isinstance(raw, bool):
            values[option.dest] = raw
            continue
        try:
            values[option.dest] = (option.parse or _boolean)(raw)
        except ValueError as exc:
            shown = "***" if option.dest in _SECRETS else repr(raw)
            parser.error(f"invalid value for {source}: {shown} ({exc})")
    return values


def settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> Settings:
    """Resolve flags and environment into :class:`Settings`; an invalid value exits via ``parser.error`` (exit 2)."""
    values = _resolve(parser, args, os.environ if env is None else env, OPTIONS)
    if getattr(args, "debug", False):
        values["log_level"] = "DEBUG"
    if values.get("max_pending_prompts_per_session") == 0:
        values["max_pending_prompts_per_session"] = None
    if values.get("default_mode") == BYPASS_MODE and not values.get("allow_bypass_permissions"):
        parser.error(f"--default-mode {BYPASS_MODE} needs --allow-bypass-permissions")
    return Settings(**values)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Add the flags of ``acp-server serve`` (raw strings, resolved by :func:`serve_settings_from_args`)."""
    for option in SERVE_OPTIONS:
        parser.add_argument(option.flag, dest=option.dest, default=None, help=option.help, metavar=option.metavar)


def serve_settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> ServeSettings:
    """Resolve the serve flags and environment into :class:`ServeSettings` (exit 2 on an invalid value)."""
    return ServeSettings(**_resolve(parser, args, os.environ if env is None else env, SERVE_OPTIONS))


def option_table(options: Sequence[Option] = OPTIONS) -> str:
    """The configuration table as Markdown (kept in the README)."""
    rows = ["| flag | environment | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{o.flag}` | {f'`{o.env}`' if o.env else '—'} | {o.help} |" for o in options]
    return "\n".join(rows)
