"""Errors of the turn layer.

    ServerError
     └── TurnError
          └── ModelNotConfiguredError   no base URL and no API key: nothing to talk to
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import ServerError

__all__ = ["ModelNotConfiguredError", "TurnError"]


class TurnError(ServerError):
    """Root of the turn layer's errors."""


class ModelNotConfiguredError(TurnError):
    error_kind: ClassVar[str] = "model_not_configured"

    def __init__(self) -> None:
        super().__init__(
            "No model is configured: pass --base-url and/or --api-key (or set OPENAI_BASE_URL / OPENAI_API_KEY, "
            "and OPENAI_MODEL), or start acp-server with --offline to use the built-in offline model"
        )
