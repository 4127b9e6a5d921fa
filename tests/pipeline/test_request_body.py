"""The request body with a turn's :class:`RequestEncoder`: the same bytes as the plain body, each message and each
further field encoded once per turn (a tool loop's next request encodes its new step, not the history nor the
tools again)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import acp_server.pipeline._body as body_module
from acp_server.pipeline import ChatRequest, RequestEncoder
from acp_server.pipeline._stream import request_body

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
EXTRA = {"tools": TOOLS, "stream_options": {"include_usage": True}}


def step(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"     1\tline {i} é \U0001f600\n"},
    ]


def counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The values the encoder encodes, from now on."""
    seen: list[object] = []
    dumps = body_module.dumps_json

    def counting(value: Any) -> bytes:
        seen.append(value)
        return dumps(value)

    monkeypatch.setattr(body_module, "dumps_json", counting)
    return seen


def test_a_growing_conversation_gives_the_plain_body_and_encodes_each_message_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hé"}]
    encoder = RequestEncoder()
    seen = counted(monkeypatch)
    for i in range(5):
        with_encoder = request_body(ChatRequest("m", messages, dict(EXTRA), encoder))
        assert with_encoder == request_body(ChatRequest("m", messages, dict(EXTRA)))
        assert json.loads(with_encoder) == {"model": "m", "messages": messages, "stream": True, **EXTRA}
        messages = [*messages, *step(i)]  # what the turn does after a step
    messages_seen = [value for value in seen if "role" in value]  # type: ignore[operator]
    assert len(messages_seen) == 2 + 2 * 4  # the first request's two messages, then each step's two: never again
    assert all(sum(value is other for other in messages_seen) == 1 for value in messages_seen)
    assert len(seen) - len(messages_seen) == 1  # the tools and options: once, as the turn passes the same values


def test_fields_given_anew_or_changed_are_encoded_again() -> None:
    messages = [{"role": "user", "content": "x"}]
    encoder = RequestEncoder()
    request_body(ChatRequest("m", messages, {"tools": TOOLS}, encoder))
    other_tools = [*TOOLS, {"type": "function", "function": {"name": "glob"}}]
    for extra in ({"tools": other_tools}, {"tools": other_tools, "temperature": 0.5}, {}, {"tools": list(TOOLS)}):
        body = request_body(ChatRequest("m", messages, extra, encoder))
        assert body == request_body(ChatRequest("m", messages, extra)), extra


def test_a_message_replaced_in_place_is_encoded_again_from_there() -> None:
    first = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}, {"role": "user", "content": "c"}]
    encoder = RequestEncoder()
    request_body(ChatRequest("m", first, {}, encoder))
    second = [first[0], {"role": "user", "content": "B"}, first[2]]
    assert json.loads(request_body(ChatRequest("m", second, {}, encoder)))["messages"] == second
    assert json.loads(request_body(ChatRequest("m", first[:1], {}, encoder)))["messages"] == first[:1]


def test_a_lone_surrogate_with_an_encoder_is_its_json_escape() -> None:
    messages = [{"role": "user", "content": "half \ud83d"}, {"role": "user", "content": "hé"}]
    body = request_body(ChatRequest("m", messages, {}, RequestEncoder()))
    assert b'"half \\ud83d"' in body and "hé".encode() in body  # only that message escaped
    assert json.loads(body)["messages"] == messages


def test_extra_naming_the_pipelines_own_fields_is_encoded_as_the_plain_body() -> None:
    messages = [{"role": "user", "content": "x"}]
    request = ChatRequest("m", messages, {"stream": False, "temperature": 0.5}, RequestEncoder())
    assert request_body(request) == request_body(ChatRequest("m", messages, {"stream": False, "temperature": 0.5}))
