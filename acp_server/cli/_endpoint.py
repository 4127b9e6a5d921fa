"""The stdio agent's model endpoint as ACP authentication sees it (:class:`~acp_server.acp.EndpointGate`).

Invariants: an endpoint is usable when the agent runs ``--offline``, or its settings name a base URL (a local server
needs no key) or a key (for the default hosted endpoint): :attr:`ModelSettings.configured`, the rule the turn itself
applies. :meth:`ConfigurationGate.reload` re-resolves the same flags and environment over the configuration file as
it is now (the client just ran ``acp-server setup``), and, once they name a usable endpoint, points the model runner
at it; a bad file is its usage error's message, never a traceback nor a secret.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from ..config import Settings, SettingsError, resolve_settings
from ..turn import ModelTurn

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

    def attach(self, turn: ModelTurn) -> None:
        """The model runner a usable configuration is handed to."""
        self._turn = turn

    def usable(self) -> bool:
        return self._usable

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
            await self._turn.reconfigure(settings.model_settings())
        self._usable = True
        return None

