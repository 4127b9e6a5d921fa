"""The offline model: an embedded, scriptable, deterministic OpenAI-compatible endpoint on 127.0.0.1.

``acp-server --offline`` runs it in-process as the model; tests run it and point a server or the SDK at
``model.base_url``::

    async with LoopbackModel() as model:
        model.enqueue(RateLimited(), Answer(text="hello"))
        model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "README.md"}),)))
        client = make_openai_client(base_url=model.base_url, api_key=None)

Unscripted, it answers from the prompt: with a ``read_file`` tool offered and a file path in the user's message,
by calling ``read_file`` on it, then by quoting the first line and line count of the result.
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
    PartialToolCalls,
    RateLimited,
    RawSSE,
    ScriptedCall,
    SlowDrip,
    ToolCalls,
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
    "PartialToolCalls",
    "RateLimited",
    "RawSSE",
    "RecordedRequest",
    "ScriptedCall",
    "SlowDrip",
    "ToolCalls",
]
