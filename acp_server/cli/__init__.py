"""The faces a person starts: the stdio agent and ``ask``."""

from ._main import main

__all__ = ["main"]
