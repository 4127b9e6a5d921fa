"""Model providers: the openai SDK client we talk through; the offline loopback model lives in ``.offline``.

Importing this package must stay cheap: openai is imported only when a client is made.
"""

from ._openai import make_openai_client

__all__ = ["make_openai_client"]
