"""The table of every setting: its flag, its environment variable, its parser and the help the manual shows.

Invariant: each setting is declared here once; the argparse flags, the environment lookup and the manual's
configuration table are all generated from these rows. A default a help states is its component's: its constant,
where config imports the component at start (``limits``, ``modes``), else written out and checked against what the
component is handed (``tests/cli/test_config_defaults.py``: config does not import the model stack or the daemon at
start, see ``_settings.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..limits import DEFAULT_FS_REQUEST_TIMEOUT_MS, DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION
from ..modes import DEFAULT_MODE
from ..store import check_store_url
from . import _parsers as parse

__all__ = ["OPTIONS", "SERVE_OPTIONS", "Option", "option_table"]


@dataclass(frozen=True)
class Option:
    """One setting: its flag, its environment variable, how to parse it, and what the manual says of it."""

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
        parse.models,
        "comma-separated models a session may pick (default: what the endpoint's GET /v1/models lists, asked "
        "once in the background, else --model alone)",
        "A,B,...",
    ),
    Option(
        "context_window",
        "--context-window",
        "ACP_SERVER_CONTEXT_WINDOW",
        parse.positive_int,
        "context window in tokens reported with usage for every model (default: what the endpoint's model list "
        "says, else the documented window of well-known model families, else none is reported)",
        "TOKENS",
    ),
    Option(
        "compact_threshold",
        "--compact-threshold",
        "ACP_SERVER_COMPACT_THRESHOLD",
        parse.percent,
        "compact the conversation before a request that would fill more than this percentage of the context "
        "window; 0 = only when the endpoint refuses a request as too long (default 80)",
        "PERCENT",
    ),
    Option(
        "max_answer_tokens",
        "--max-answer-tokens",
        "ACP_SERVER_MAX_ANSWER_TOKENS",
        parse.non_negative_int,
        "the bound on each answer a request carries (max_tokens, or max_completion_tokens where the endpoint takes "
        "only that): by default, when the window is known, the tenth of it kept for the answer (at most 32768), so a "
        "looping model stops instead of filling the window; 0 = send none",
        "TOKENS",
    ),
    Option("offline", "--offline", None, None, "use the built-in deterministic offline model on 127.0.0.1"),
    Option(
        "max_pending_prompts_per_session",
        "--max-pending-prompts-per-session",
        "ACP_SERVER_MAX_PENDING_PROMPTS_PER_SESSION",
        parse.non_negative_int,
        "prompts waiting + running per session before new ones are refused; 0 = unlimited "
        f"(default {DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION})",
        "N",
    ),
    Option(
        "prompt_deadline_ms",
        "--prompt-deadline-ms",
        "ACP_SERVER_PROMPT_DEADLINE_MS",
        parse.positive_int,
        "deadline of an accepted prompt, from acceptance (default: none)",
        "MS",
    ),
    Option(
        "stream_idle_timeout_ms",
        "--stream-idle-timeout-ms",
        "ACP_SERVER_STREAM_IDLE_TIMEOUT_MS",
        parse.integer,
        "abort a model stream after this long without a chunk; <= 0 disables (default 120000)",
        "MS",
    ),
    Option(
        "stream_max_lifetime_ms",
        "--stream-max-lifetime-ms",
        "ACP_SERVER_STREAM_MAX_LIFETIME_MS",
        parse.integer,
        "abort a model stream that lasts longer than this; <= 0 disables (default 900000)",
        "MS",
    ),
    Option(
        "max_message_bytes",
        "--max-message-bytes",
        "ACP_SERVER_MAX_MESSAGE_BYTES",
        parse.positive_int,
        "longest accepted JSON-RPC line (default 67108864 = 64 MiB)",
        "BYTES",
    ),
    Option(
        "log_level",
        "--log-level",
        "ACP_SERVER_LOG_LEVEL",
        parse.log_level,
        f"one of {', '.join(parse.LOG_LEVELS)}, any case (default {parse.DEFAULT_LOG_LEVEL}; WARNING for ask)",
        "LEVEL",
    ),
    Option(
        "log_file",
        "--log-file",
        "ACP_SERVER_LOG_FILE",
        parse.log_file,
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
        parse.positive_int,
        "model requests one prompt may make (each answer that calls tools is one); past it the prompt ends "
        "max_turn_requests (default 50)",
        "N",
    ),
    Option(
        "default_mode",
        "--default-mode",
        "ACP_SERVER_DEFAULT_MODE",
        parse.mode,
        "mode of a new session: default (ask before edits and commands), accept-edits, read-only, sandbox "
        "(commands unasked inside a kernel sandbox, where it works), or "
        f"bypass-permissions (needs --allow-bypass-permissions) (default: {DEFAULT_MODE})",
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
        parse.positive_int,
        "how long a session's MCP server may take to start and list its tools; servers connect in parallel, a "
        "slower one is stopped and left out (default 10000)",
        "MS",
    ),
    Option(
        "mcp_call_timeout_ms",
        "--mcp-call-timeout-ms",
        "ACP_SERVER_MCP_CALL_TIMEOUT_MS",
        parse.positive_int,
        "how long one MCP request (a tool call, a prompts listing or fetch) may take before it is cancelled and fails"
        " (default 120000)",
        "MS",
    ),
    Option(
        "fs_request_timeout_ms",
        "--fs-request-timeout-ms",
        "ACP_SERVER_FS_REQUEST_TIMEOUT_MS",
        parse.positive_int,
        "how long a file read or write through the editor (fs/read_text_file, fs/write_text_file) waits for its "
        f"answer; then the call fails (default {DEFAULT_FS_REQUEST_TIMEOUT_MS})",
        "MS",
    ),
    Option(
        "web_fetch_allow",
        "--web-fetch-allow",
        "ACP_SERVER_WEB_FETCH_ALLOW",
        parse.networks,
        "private, loopback or link-local networks web_fetch may reach, comma-separated (10.0.0.0/8,127.0.0.1), or "
        "private for all of them (default: none; checked on every address, also after a redirect)",
        "NETWORKS",
    ),
    Option(
        "task_max_requests",
        "--task-max-requests",
        "ACP_SERVER_TASK_MAX_REQUESTS",
        parse.positive_int,
        "model requests one subagent (a task call) may make before it stops (default 25)",
        "N",
    ),
    Option(
        "task_concurrency",
        "--task-concurrency",
        "ACP_SERVER_TASK_CONCURRENCY",
        parse.positive_int,
        "subagents one model answer's task calls may run at once (default 3)",
        "N",
    ),
    Option(
        "task_timeout_ms",
        "--task-timeout-ms",
        "ACP_SERVER_TASK_TIMEOUT_MS",
        parse.positive_int,
        "how long one subagent may run before it is stopped and its call fails (default 600000)",
        "MS",
    ),
    Option(
        "read_only_network",
        "--read-only-network",
        "ACP_SERVER_READ_ONLY_NETWORK",
        None,
        "offer web_fetch in the read-only mode too (it asks before each new host there as elsewhere)",
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
        "no_sandbox",
        "--no-sandbox",
        "ACP_SERVER_NO_SANDBOX",
        None,
        "do not offer the sandbox mode (commands without asking inside a kernel sandbox: bubblewrap, else "
        "Landlock); the environment variable takes 1/true/yes/on or 0/false/no/off",
    ),
    Option(
        "sandbox_network",
        "--sandbox-network",
        "ACP_SERVER_SANDBOX_NETWORK",
        None,
        "let commands in the sandbox mode use the network (default: none)",
    ),
    Option(
        "sandbox_mechanism",
        "--sandbox-mechanism",
        "ACP_SERVER_SANDBOX_MECHANISM",
        parse.sandbox_mechanism,
        "the sandbox mode's mechanism: bubblewrap or landlock (default: bubblewrap where it works, else landlock)",
        "NAME",
    ),
    Option(
        "sandbox_hide",
        "--sandbox-hide",
        "ACP_SERVER_SANDBOX_HIDE",
        parse.paths,
        "comma-separated paths hidden from commands in the sandbox mode, beside the credential stores always "
        "hidden (~/.ssh, ~/.aws, ~/.netrc ..., see the security page)",
        "PATH,...",
    ),
    Option(
        "system_prompt",
        "--system-prompt-file",
        "ACP_SERVER_SYSTEM_PROMPT_FILE",
        parse.system_prompt_file,
        "replace the built-in system prompt (how the model is asked to work) with this UTF-8 file, at most 256 "
        "KiB; the environment and project instructions still follow it",
        "PATH",
    ),
)


SERVE_OPTIONS: tuple[Option, ...] = (
    Option("host", "--host", "ACP_SERVER_HOST", parse.host, "address to listen on (default 127.0.0.1)", "HOST"),
    Option(
        "port", "--port", "ACP_SERVER_PORT", parse.port, "port to listen on; 0 = any free port (default 4170)", "PORT"
    ),
    Option(
        "token",
        "--token",
        "ACP_SERVER_TOKEN",
        parse.token,
        "bearer token every route but /health requires; mandatory off loopback and with --allow-origin '*'; "
        "surrounding spaces stripped, blank refused (never logged)",
        "TOKEN",
    ),
    Option(
        "max_body_bytes",
        "--max-body-bytes",
        "ACP_SERVER_MAX_BODY_BYTES",
        parse.positive_int,
        "largest accepted request body (default 16777216 = 16 MiB)",
        "BYTES",
    ),
    Option(
        "allow_origins",
        "--allow-origin",
        "ACP_SERVER_ALLOW_ORIGIN",
        parse.origins,
        "comma-separated browser origins allowed by CORS, or * (default: none, no CORS)",
        "ORIGINS",
    ),
    Option(
        "event_ring_size",
        "--event-ring-size",
        "ACP_SERVER_EVENT_RING_SIZE",
        parse.positive_int,
        "events kept per session for Last-Event-ID replay (default 4096)",
        "N",
    ),
    Option(
        "event_ring_total_bytes",
        "--event-ring-total-bytes",
        "ACP_SERVER_EVENT_RING_TOTAL_BYTES",
        parse.positive_int,
        "bytes all sessions' replay rings hold together; the least recently active sessions' oldest events are "
        "evicted first (default 67108864 = 64 MiB)",
        "BYTES",
    ),
    Option(
        "max_connections",
        "--max-connections",
        "ACP_SERVER_MAX_CONNECTIONS",
        parse.positive_int,
        "open client connections, event streams included; at the cap a new one displaces the oldest connection "
        "still sending its headers, else gets 503; lowered to fit the open-file limit (default 1024)",
        "N",
    ),
    Option(
        "header_timeout_ms",
        "--header-timeout-ms",
        "ACP_SERVER_HEADER_TIMEOUT_MS",
        parse.positive_int,
        "close a connection whose request headers are not complete this long after it opened (default 10000)",
        "MS",
    ),
    Option(
        "body_timeout_ms",
        "--body-timeout-ms",
        "ACP_SERVER_BODY_TIMEOUT_MS",
        parse.positive_int,
        "answer 408 and close when a request body is not complete this long after its headers; responses "
        "(event streams) have no time limit (default 60000)",
        "MS",
    ),
)
"""The options of ``acp-server serve`` only (their own table, on the manual's daemon page)."""


def option_table(options: Sequence[Option] = OPTIONS) -> str:
    """The configuration table as Markdown (filled into the manual at build time: docs/hooks/generated.py)."""
    rows = ["| flag | environment | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{o.flag}` | {f'`{o.env}`' if o.env else '—'} | {o.help} |" for o in options]
    return "\n".join(rows)
