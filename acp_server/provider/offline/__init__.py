"""The offline model: an embedded, scriptable, deterministic OpenAI-compatible endpoint on 127.0.0.1.

``acp-server --offline`` runs it in-process as the model; tests run it and point a server or the SDK at
``model.base_url``::

    async with LoopbackModel() as model:
        model.enqueue(RateLimited(), Answer(text="hello"))
        client = make_openai_client(base_url=model.base_url, api_key=None)
"""

from ._behaviours import (
    Answer,
    Behaviour,
    ChunksThenSilent,
    ConnectionReset,
    EmptyStream,
    EndWithoutFinish,
    ErrorStatus,
    FinishThenHold,
    HangAfterHeaders,
    KeepAliveOnly,
    NonSSE,
    RateLimited,
    RawSSE,
    SlowDrip,
)
from ._model import LoopbackModel
from ._records import Disconnect, RecordedRequest

__all__ = [
    "Answer",
    "Behaviour",
    "ChunksThenSilent",
    "ConnectionReset",
    "Disconnect",
    "EmptyStream",
    "EndWithoutFinish",
    "ErrorStatus",
    "FinishThenHold",
    "HangAfterHeaders",
    "KeepAliveOnly",
    "LoopbackModel",
    "NonSSE",
    "RateLimited",
    "RawSSE",
    "RecordedRequest",
    "SlowDrip",
]
