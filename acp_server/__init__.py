"""acp-server: an Agent Client Protocol agent that never hangs on a silent model and never queues without bound."""

__version__ = "0.1.0"

__all__ = ["__version__"]
