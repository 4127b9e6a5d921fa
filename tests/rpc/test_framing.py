"""NDJSON framing and JSON-RPC envelope checks, on in-memory byte sources."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from acp_server.rpc import OversizedLine, RpcError, decode_line, iter_lines
from acp_server.rpc._framing import EDGE_BYTES, check_envelope

pytestmark = pytest.mark.anyio


def _source(chunks: Iterable[bytes]):  # type: ignore[no-untyped-def]
    pending = list(chunks)

    async def receive() -> bytes:
        return pending.pop(0) if pending else b""

    return receive


async def _lines(chunks: Iterable[bytes], cap: int = 100) -> list[bytes | OversizedLine]:
    return [line async for line in iter_lines(_source(chunks), cap)]


async def test_lines_split_across_chunks_and_joined() -> None:
    assert await _lines([b'{"a":', b"1}\n{", b'"b":2}\n']) == [b'{"a":1}', b'{"b":2}']


async def test_final_unterminated_line_is_yielded_at_eof() -> None:
    assert await _lines([b"one\ntwo"]) == [b"one", b"two"]


async def test_blank_lines_are_skipped() -> None:
    assert await _lines([b"\n\r\n  \nx\n"]) == [b"x"]


async def test_oversized_line_is_reported_once_and_reader_resyncs() -> None:
    big = b"x" * 250
    out = await _lines([b"ok\n", big[:120], big[120:], b"\nafter\n"], cap=100)
    assert out == [b"ok", OversizedLine(250), b"after"]


async def test_oversized_line_at_eof() -> None:
    assert await _lines([b"y" * 101], cap=100) == [OversizedLine(101)]


async def test_line_exactly_at_cap_is_accepted() -> None:
    assert await _lines([b"z" * 100 + b"\n"], cap=100) == [b"z" * 100]


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"{", b"nope", b"[" * 100_000])
def test_decode_line_parse_errors(raw: bytes) -> None:
    with pytest.raises(RpcError) as info:
        decode_line(raw)
    assert info.value.code == -32700


@pytest.mark.parametrize(
    ("message", "code", "reply_id"),
    [
        ([], -32600, None),
        (7, -32600, None),
        ({"id": 1, "method": "m"}, -32600, 1),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, -32600, None),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, -32600, None),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, -32600, None),
        ({"jsonrpc": "2.0", "id": 2, "method": 3}, -32600, 2),
        ({"jsonrpc": "2.0", "id": 2, "method": "m", "params": 3}, -32600, 2),
        ({"jsonrpc": "2.0", "id": 2}, -32600, 2),
        ({"jsonrpc": "2.0", "id": 2, "result": 1, "error": {"code": 1, "message": "x"}}, -32600, 2),
        ({"jsonrpc": "2.0", "id": 2, "error": "bad"}, -32600, 2),
        ({"jsonrpc": "2.0"}, -32600, None),
    ],
)
def test_bad_envelopes(message: object, code: int, reply_id: object) -> None:
    checked, error, got_id = check_envelope(message)
    assert checked is None and error is not None
    assert (error.code, got_id) == (code, reply_id)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "m"},
        {"jsonrpc": "2.0", "id": "a", "method": "m", "params": {}},
        {"jsonrpc": "2.0", "method": "n", "params": []},
        {"jsonrpc": "2.0", "id": 1, "result": None},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}},
    ],
)
def test_good_envelopes(message: object) -> None:
    checked, error, _ = check_envelope(message)
    assert error is None and checked == message


async def test_an_oversized_line_keeps_its_first_and_last_bytes_only() -> None:
    line = b'{"jsonrpc":"2.0","id":"acp-server:7","result":{"content":"' + b"x" * 5000 + b'"}}'
    [out] = await _lines([line[:100], line[100:3000], line[3000:], b"\n"], cap=1000)
    assert isinstance(out, OversizedLine) and out.size == len(line)
    assert out.head == line[:EDGE_BYTES] and out.tail == line[-EDGE_BYTES:]
