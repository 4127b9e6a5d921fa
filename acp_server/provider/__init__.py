"""Model providers: the openai SDK client we talk through; the offline loopback model lives in ``.offline``.

Importing this package must stay cheap: openai is imported only when a client is made.
"""

from ._openai import (
    OPENAI_API_BASE_URL,
    import_client_modules,
    make_openai_client,
    missing_version_hint,
    public_endpoint,
)

__all__ = [
    "OPENAI_API_BASE_URL",
    "import_client_modules",
    "make_openai_client",
    "missing_version_hint",
    "public_endpoint",
]
