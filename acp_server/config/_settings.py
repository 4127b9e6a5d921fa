"""The resolved configuration, and each component's part of it: what each face builds its stack from.

Invariant: a ``Settings`` / ``ServeSettings`` holds only values already checked by their option's parser
(``_parsers.py``); secret fields (``api_key``, ``store``, ``token``, ``system_prompt``) are left out of ``repr``.
No default is written here: a field's default is its component's constant where config imports the component at
start anyway (``limits``, ``modes``), else None ("not asked for"), and the component's own default applies when a
method below hands the component its part. Those methods import their component when called, by a face that has
imported it already: the ``ask`` parent, ``--help`` and a usage error never pay for the model stack or the daemon.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from .. import __version__
from ..limits import DEFAULT_FS_REQUEST_TIMEOUT_MS, DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION
from ..modes import DEFAULT_MODE, available_modes
from ._parsers import DEFAULT_LOG_LEVEL

if TYPE_CHECKING:
    from ..acp import AgentOptions
    from ..commands import CommandFiles
    from ..daemon import DaemonOptions
    from ..mcp import McpSettings
    from ..pipeline import StreamPolicy
    from ..tools.registry import ToolSet
    from ..turn import ModelSettings

__all__ = ["BridgeArguments", "ServeSettings", "Settings"]


class BridgeArguments(TypedDict):
    """The keyword arguments of :class:`~acp_server.bridge.SessionBridge` that come from the settings."""

    max_pending_prompts_per_session: int | None
    prompt_deadline_ms: int | None
    default_mode: str
    modes: Collection[str]
    mcp: McpSettings
    tools: ToolSet
    commands: CommandFiles


logger = logging.getLogger(__name__)

_SANDBOX_LOGGED: list[bool] = []
"""Whether the sandbox mechanism (or why there is none) was logged: once per process."""


@dataclass(frozen=True)
class Settings:
    """Everything a face needs to build the stack. ``api_key`` is a secret: it is never logged or echoed.

    ``None`` in ``compact_threshold``, the stream timeouts, ``max_message_bytes``, ``max_turn_requests`` and the MCP
    timeouts: not asked for, the component's default (``max_pending_prompts_per_session`` None is "unlimited",
    ``prompt_deadline_ms`` None "no deadline": their own meanings).
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    models: tuple[str, ...] = ()
    context_window: int | None = None
    compact_threshold: int | None = None
    max_answer_tokens: int | None = None
    offline: bool = False
    max_pending_prompts_per_session: int | None = DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION
    prompt_deadline_ms: int | None = None
    stream_idle_timeout_ms: int | None = None
    stream_max_lifetime_ms: int | None = None
    max_message_bytes: int | None = None
    log_level: str = DEFAULT_LOG_LEVEL
    log_file: str | None = None
    state_dir: str | None = None
    store: str | None = field(default=None, repr=False)  # a postgresql:// URL: may carry a password
    no_persist: bool = False
    max_turn_requests: int | None = None
    default_mode: str = DEFAULT_MODE
    allow_bypass_permissions: bool = False
    mcp_connect_timeout_ms: int | None = None
    mcp_call_timeout_ms: int | None = None
    fs_request_timeout_ms: int = DEFAULT_FS_REQUEST_TIMEOUT_MS
    no_project_instructions: bool = False
    no_sandbox: bool = False
    sandbox_network: bool = False
    sandbox_hide: tuple[str, ...] = ()
    sandbox_mechanism: str | None = None
    web_fetch_allow: tuple[str, ...] = ()
    read_only_network: bool = False
    task_max_requests: int | None = None
    task_timeout_ms: int | None = None
    task_concurrency: int | None = None
    user_config_dir: str | None = None  # $XDG_CONFIG_HOME/acp-server: the user's commands/ and skills/ (None: none)
    system_prompt: str | None = field(default=None, repr=False)  # the text of --system-prompt-file

    def stream_policy(self) -> StreamPolicy:
        """The pipeline's part: how a model stream is guarded (its other bounds are the pipeline's defaults)."""
        from ..pipeline import DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_LIFETIME_MS, StreamPolicy

        return StreamPolicy(
            idle_timeout_ms=_or(self.stream_idle_timeout_ms, DEFAULT_IDLE_TIMEOUT_MS),
            max_lifetime_ms=_or(self.stream_max_lifetime_ms, DEFAULT_MAX_LIFETIME_MS),
        )

    def model_settings(self) -> ModelSettings:
        """The turn's part: where the model is, which one (``model``, else the first of ``models``, else the turn's
        default), how its streams are guarded, how the model is asked to work and when a conversation is compacted."""
        from ..turn import (
            DEFAULT_COMPACT_THRESHOLD,
            DEFAULT_MAX_TURN_REQUESTS,
            DEFAULT_MODEL,
            DEFAULT_SYSTEM_PROMPT,
            DEFAULT_TASK_CONCURRENCY,
            DEFAULT_TASK_MAX_REQUESTS,
            DEFAULT_TASK_TIMEOUT_S,
            ModelSettings,
            SubagentSettings,
        )

        return ModelSettings(
            base_url=self.base_url,
            api_key=self.api_key,
            model=self.model or (self.models[0] if self.models else DEFAULT_MODEL),
            models=self.models,
            context_window=self.context_window,
            compact_threshold=_or(self.compact_threshold, DEFAULT_COMPACT_THRESHOLD),
            max_answer_tokens=self.max_answer_tokens,
            policy=self.stream_policy(),
            max_turn_requests=_or(self.max_turn_requests, DEFAULT_MAX_TURN_REQUESTS),
            system_prompt=self.system_prompt or DEFAULT_SYSTEM_PROMPT,
            project_instructions=not self.no_project_instructions,
            subagents=SubagentSettings(
                max_requests=_or(self.task_max_requests, DEFAULT_TASK_MAX_REQUESTS),
                timeout_s=_seconds(self.task_timeout_ms, DEFAULT_TASK_TIMEOUT_S),
                concurrency=_or(self.task_concurrency, DEFAULT_TASK_CONCURRENCY),
            ),
        )

    def sandbox_available(self) -> bool:
        """Set the commands' sandbox policy from these settings (hidden paths, network, the state directory) and
        say whether the ``sandbox`` mode can be offered (the mechanism is probed once per process)."""
        from ..store import default_state_dir
        from ..tools import SandboxPolicy, configure_sandbox, sandbox_support
        from ._file import default_config_path, locate_config

        state = self.state_dir or str(default_state_dir())
        config = locate_config(None, os.environ)[0]  # $ACP_SERVER_CONFIG, else the XDG default: hidden with its dir
        own = (str(config), str(default_config_path(os.environ).parent))
        configure_sandbox(
            SandboxPolicy(
                hide=(*own, *self.sandbox_hide),
                network=self.sandbox_network,
                enabled=not self.no_sandbox,
                state_dir=state,
                mechanism="landlock"
                if self.sandbox_mechanism == "landlock"
                else ("bubblewrap" if self.sandbox_mechanism else None),
            )
        )
        support = sandbox_support()
        if not _SANDBOX_LOGGED:
            _SANDBOX_LOGGED.append(True)
            if support.mechanism is None:
                logger.info("sandbox mode not offered: %s", support.detail)
            else:
                logger.info("sandbox mode: %s", support.detail)
        return support.mechanism is not None

    def bridge_arguments(self, modes: Collection[str] | None = None) -> BridgeArguments:
        """The session bridge's part: admission limit, deadline, modes (``modes`` None: every mode these settings
        allow), the MCP servers' timeouts, the sessions' built-in tools (how ``web_fetch`` reaches the network) and
        the user's command files."""
        from ..commands import CommandFiles
        from ..mcp import DEFAULT_MCP_CALL_TIMEOUT_S, DEFAULT_MCP_CONNECT_TIMEOUT_S, McpSettings
        from ..tools import WebPolicy
        from ..tools.builtin import builtin_tool_set

        return BridgeArguments(
            max_pending_prompts_per_session=self.max_pending_prompts_per_session,
            prompt_deadline_ms=self.prompt_deadline_ms,
            default_mode=self.default_mode,
            modes=(
                [
                    mode.id
                    for mode in available_modes(
                        allow_bypass=self.allow_bypass_permissions, sandbox=self.sandbox_available()
                    )
                ]
                if modes is None
                else modes
            ),
            mcp=McpSettings(
                connect_timeout_s=_seconds(self.mcp_connect_timeout_ms, DEFAULT_MCP_CONNECT_TIMEOUT_S),
                call_timeout_s=_seconds(self.mcp_call_timeout_ms, DEFAULT_MCP_CALL_TIMEOUT_S),
                version=__version__,
            ),
            commands=CommandFiles(None if self.user_config_dir is None else f"{self.user_config_dir}/commands"),
            tools=builtin_tool_set(
                WebPolicy(allowed=self.web_fetch_allow, read_only=self.read_only_network),
                None if self.user_config_dir is None else f"{self.user_config_dir}/skills",
            ),
        )

    def agent_options(self) -> AgentOptions:
        """The ACP agent's part: what ``initialize`` advertises and how long a file request to the editor waits."""
        from ..acp import AgentOptions

        return AgentOptions(version=__version__, fs_request_timeout_ms=self.fs_request_timeout_ms)

    def line_limit(self) -> int:
        """The longest JSON-RPC line the stdio agent reads (``max_message_bytes``, else the framing's default)."""
        from ..rpc import DEFAULT_MAX_LINE_BYTES

        return _or(self.max_message_bytes, DEFAULT_MAX_LINE_BYTES)

    def daemon_options(self, serve: ServeSettings) -> DaemonOptions:
        """The daemon's part: ``serve``'s options and the stream idle timeout it advertises (the daemon's defaults for
        those not asked for), and the file request timeout of its ``/acp`` clients. Raises ``ValueError`` on a
        combination the daemon refuses (a public host without a token...)."""
        from ..daemon import DaemonOptions

        given: dict[str, Any] = {
            "stream_idle_timeout_ms": self.stream_idle_timeout_ms,
            "host": serve.host,
            "port": serve.port,
            "max_body_bytes": serve.max_body_bytes,
            "event_ring_size": serve.event_ring_size,
            "event_ring_total_bytes": serve.event_ring_total_bytes,
            "max_connections": serve.max_connections,
            "header_timeout_s": None if serve.header_timeout_ms is None else serve.header_timeout_ms / 1000,
            "body_timeout_s": None if serve.body_timeout_ms is None else serve.body_timeout_ms / 1000,
        }
        return DaemonOptions(
            token=serve.token,
            allow_origins=serve.allow_origins,
            fs_request_timeout_ms=self.fs_request_timeout_ms,
            **{name: value for name, value in given.items() if value is not None},
        )


@dataclass(frozen=True)
class ServeSettings:
    """The options only ``acp-server serve`` has. ``token`` is a secret: never logged or echoed. None: not asked
    for, the daemon's default (see :meth:`Settings.daemon_options`)."""

    host: str | None = None
    port: int | None = None
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int | None = None
    allow_origins: tuple[str, ...] = ()
    event_ring_size: int | None = None
    event_ring_total_bytes: int | None = None
    max_connections: int | None = None
    header_timeout_ms: int | None = None
    body_timeout_ms: int | None = None


def _or(value: int | None, default: int) -> int:
    """``value`` as asked for, else the component's ``default``."""
    return default if value is None else value


def _seconds(ms: int | None, default_s: float) -> float:
    """Milliseconds asked for, in seconds; else the component's default (in seconds)."""
    return default_s if ms is None else ms / 1000
