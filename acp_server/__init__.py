"""acp-server: an Agent Client Protocol agent that never hangs on a silent model and never queues without bound."""

__version__ = "0.2.0"
"""The package's version, written here only: pyproject.toml reads it (``[tool.setuptools.dynamic]``)."""

__all__ = ["__version__"]
