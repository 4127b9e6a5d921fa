"""The provider packages' public surface, their import cost, and the LoopbackModel lifecycle."""

from __future__ import annotations

import subprocess
import sys

import pytest

import acp_server.provider
import acp_server.provider.offline
from acp_server.provider import make_openai_client, public_endpoint
from acp_server.provider.offline import (
    Answer,
    ChunksThenSilent,
    ConnectionReset,
    EndWithoutFinish,
    ErrorStatus,
    KeepAliveOnly,
    LoopbackModel,
    PartialToolCalls,
    RawSSE,
    ScriptedCall,
    SlowDrip,
    ToolCalls,
)


def test_exported_members() -> None:
    assert acp_server.provider.__all__ == [
        "OPENAI_API_BASE_URL",
        "import_client_modules",
        "make_openai_client",
        "missing_version_hint",
        "public_endpoint",
    ]
    assert acp_server.provider.offline.__all__ == [
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


def test_importing_the_provider_does_not_import_openai() -> None:
    code = (
        "import sys, acp_server.provider, acp_server.provider.offline; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'httpx2', 'httpcore2')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_client_owns_no_retries_and_times_out_only_on_connect() -> None:
    client = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None, connect_timeout_s=3.5)
    assert client.max_retries == 0
    assert str(client.base_url) == "http://127.0.0.1:9/v1/"
    assert client.api_key == "offline"
    timeout = client.timeout
    assert not isinstance(timeout, float | None)
    assert timeout.connect == 3.5
    assert timeout.read is not None and timeout.read >= 300


def test_client_keeps_an_explicit_key() -> None:
    client = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    assert client.api_key == "sk-test"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Answer(chunk_delay_s=-1),
        lambda: ChunksThenSilent(-1),
        lambda: KeepAliveOnly(0),
        lambda: SlowDrip(0, "x"),
        lambda: ErrorStatus(200),
        lambda: ConnectionReset(-1),
        lambda: EndWithoutFinish(-2),
        lambda: RawSSE(("data: x\n\n",), then="later"),  # type: ignore[arg-type]
        lambda: RawSSE((1,)),  # type: ignore[arg-type]
        lambda: ToolCalls((ScriptedCall("read_file"),), fragment_size=0),
        lambda: ToolCalls([ScriptedCall("read_file")]),  # type: ignore[arg-type]
        lambda: ToolCalls(("read_file",)),  # type: ignore[arg-type]
        lambda: ScriptedCall("read_file", 42),  # type: ignore[arg-type]
        lambda: PartialToolCalls(()),
        lambda: PartialToolCalls((ScriptedCall("glob"),), fragments=0),
        lambda: PartialToolCalls((ScriptedCall("glob"),), then="later"),  # type: ignore[arg-type]
    ],
)
def test_behaviours_reject_nonsense(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_base_url_needs_an_open_model() -> None:
    with pytest.raises(RuntimeError, match="not open"):
        _ = LoopbackModel().base_url


def test_enqueue_rejects_what_is_not_a_behaviour() -> None:
    with pytest.raises(TypeError):
        LoopbackModel().enqueue("ErrorStatus")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_model_opens_once() -> None:
    model = LoopbackModel()
    async with model:
        assert model.base_url.startswith("http://127.0.0.1:")
        assert model.base_url.endswith("/v1")
        with pytest.raises(RuntimeError, match="only once"):
            await model.__aenter__()
    with pytest.raises(RuntimeError, match="only once"):
        async with model:
            pass


@pytest.mark.parametrize(
    ("base_url", "shown"),
    [
        (None, "https://api.openai.com:443/v1"),  # a key with no base URL: the OpenAI API
        ("http://localhost:11434/v1/", "http://localhost:11434/v1"),
        ("https://user:sk-in-userinfo@proxy.example/v1?api-key=sk-in-query#frag", "https://proxy.example:443/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("not a url", "(an unparsable base URL)"),
    ],
)
def test_public_endpoint_never_shows_credentials(base_url: str | None, shown: str) -> None:
    assert public_endpoint(base_url) == shown
