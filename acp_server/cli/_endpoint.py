"""The stdio agent's model endpoint as ACP authentication sees it (:class:`~acp_server.acp.EndpointGate`).

Invariants: an endpoint is usable when the agent runs ``--offline``, or its settings name a base URL (a local server
needs no key) or a key (for the default hosted endpoint): :attr:`ModelSettings.configured`, the rule the turn itself
applies. :meth:`ConfigurationGate.reload` re-resolves the same flags and environment over the configuration file as
it is now (the client just ran ``acp-server setup``), and, once they name a usable endpoint, points the model runner
at it; a bad file is its usage error's message, never a traceback nor a secret.

It is also the agent's :class:`~acp_server.acp.ProviderControl` (ACP's ``providers/*``): an editor's base URL and
headers replace the endpoint for the next requests, in memory only, and never with the configured key (it is not
sent to an endpoint the editor names); ``disable`` brings back the runner's own settings.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import replace

import anyio

from ..config import Settings, SettingsError, resolve_settings
from ..provider import OPENAI_API_BASE_URL, public_endpoint
from ..turn import ModelSettings, ModelTurn

__all__ = ["ConfigurationGate", "agent_command", "usable"]

logger = logging.getLogger("acp_server")


def usable(settings: Settings) -> bool:
    """These settings name a model endpoint the agent can use (the offline one included)."""
    return settings.offline or bool(settings.base_url or settings.api_key)


def agent_command() -> tuple[str, ...]:
    """How this agent was started, for the ``setup`` method's ``_meta["terminal-auth"]``: its script's absolute
    path, or ``python -m acp_server`` when run so."""
    script = sys.argv[0] if sys.argv else ""
    if not script or script.endswith("__main__.py") or script == "-m":
        return (sys.executable, "-m", "acp_server")
    return (os.path.abspath(script) if os.path.exists(script) else script,)


class ConfigurationGate:
    """Usable or not, and the re-reading: the flags ``args`` (and the environment, fixed at start) over the file."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        self._args = args
        self._usable = usable(settings)
        self._turn: ModelTurn | None = None
        self._own: ModelSettings | None = None  # the runner's settings before an editor's providers/set

    def attach(self, turn: ModelTurn) -> None:
        """The model runner a usable configuration is handed to."""
        self._turn = turn

    def usable(self) -> bool:
        return self._usable

    def current(self) -> str | None:
        settings = None if self._turn is None else self._turn.settings
        if settings is None or not settings.configured:
            return None
        return settings.base_url or OPENAI_API_BASE_URL

    async def set(self, base_url: str, headers: Mapping[str, str]) -> None:
        if self._turn is None:
            return
        if self._own is None:
            self._own = self._turn.settings
        routed = replace(self._own, base_url=base_url, api_key=None, headers=tuple(headers.items()))
        await self._retarget(routed)
        self._usable = True
        logger.info("providers/set: model requests go to %s (%d headers)", public_endpoint(base_url), len(headers))

    async def _retarget(self, settings: ModelSettings) -> None:
        """The runner pointed at ``settings`` at once; its model list asked within the listing's own timeout (it
        waits for running requests: the editor's answer does not wait longer — the list is then the default)."""
        assert self._turn is not None
        with anyio.move_on_after(settings.model_list_timeout_s):
            await self._turn.reconfigure(settings)

    async def disable(self) -> None:
        if self._turn is None or self._own is None:
            return
        own, self._own = self._own, None
        await self._retarget(own)
        self._usable = own.configured
        logger.info("providers/disable: model requests go where the agent's settings say again")

    async def reload(self) -> str | None:
        self._args._config_file = None  # read the file anew
        try:
            settings = resolve_settings(self._args)
        except SettingsError as exc:
            return f"the configuration cannot be used: {exc}"
        if not usable(settings):
            return (
                "still no model endpoint configured: run acp-server setup (it writes the configuration file), "
                "or set base-url (and api-key for a hosted endpoint) in it"
            )
        if self._turn is not None:
            self._own = None
            await self._turn.reconfigure(settings.model_settings())
        self._usable = True
        return None

