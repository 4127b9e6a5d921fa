"""The loopback model refuses the messages the strictest common server refuses (llama-cpp-python's: HTTP 500 with a
pydantic validation error), so a request shape that would kill a session there fails the suite here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel

from .conftest import RawRequest

pytestmark = pytest.mark.anyio

CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}


def body(*messages: dict[str, Any]) -> bytes:
    messages = ({"role": "user", "content": "hi"}, *messages)
    return json.dumps({"model": "m", "stream": True, "messages": messages}).encode()


@pytest.mark.parametrize(
    ("message", "where", "what"),
    [
        ({"role": "assistant", "content": None, "tool_calls": [CALL]}, "messages.1.content", "valid string"),
        ({"role": "assistant", "tool_calls": [CALL]}, "messages.1.content", "Field required"),
        ({"role": "tool", "content": None, "tool_call_id": "c1"}, "messages.1.content", "valid string"),
        ({"role": "tool", "content": "x"}, "messages.1.tool_call_id", "valid string"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}, "messages.1.tool_calls.0", "tool call"),
        ({"role": "robot", "content": "x"}, "messages.1.role", "one of"),
    ],
)
async def test_a_message_the_strict_server_refuses_is_a_500_validation_error_before_any_script(
    model: LoopbackModel, raw_request: RawRequest, message: dict[str, Any], where: str, what: str
) -> None:
    model.enqueue(Answer(text="never sent"))
    response = await raw_request("POST", "/v1/chat/completions", body(message))
    assert response.status == 500
    error = json.loads(response.body)["error"]
    assert error["type"] == "internal_server_error"
    assert f"\n{where}\n" in error["message"] and what in error["message"]
    response = await raw_request("POST", "/v1/chat/completions", body())  # the script was not used up
    assert response.status == 200 and b'"content":"never"' in response.body


async def test_an_assistant_tool_call_message_with_empty_content_is_accepted(raw_request: RawRequest) -> None:
    tool = {"role": "tool", "tool_call_id": "c1", "content": "     1\tx\n"}
    step = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    response = await raw_request("POST", "/v1/chat/completions", body(step, tool))
    assert response.status == 200
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    parts = [{"type": "text", "text": "look"}, image]
    response = await raw_request("POST", "/v1/chat/completions", body({"role": "user", "content": parts}))
    assert response.status == 200


def _with_tool(parameters: dict[str, Any]) -> bytes:
    tool = {"type": "function", "function": {"name": "t", "description": "d", "parameters": parameters}}
    messages = [{"role": "user", "content": "hi"}]
    return json.dumps({"model": "m", "stream": True, "messages": messages, "tools": [tool]}).encode()


async def test_a_tool_schema_llama_cpp_cannot_make_a_grammar_of_is_a_400_as_llama_server_answers(
    model: LoopbackModel, raw_request: RawRequest
) -> None:
    model.enqueue(Answer(text="never sent"))
    entries = {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string", "maxLength": 2000}}}}
    response = await raw_request(
        "POST", "/v1/chat/completions", _with_tool({"type": "object", "properties": {"e": entries}})
    )
    assert response.status == 400
    message = json.loads(response.body)["error"]["message"]
    assert "failed to parse grammar" in message and "exceeds sane defaults" in message
    assert "/0/function/parameters/properties/e/items/properties/c/maxLength: 2000" in message
    just_under = {"type": "object", "properties": {"c": {"type": "string", "maxLength": 1999}}}
    response = await raw_request("POST", "/v1/chat/completions", _with_tool(just_under))
    assert response.status == 200 and b'"content":"never"' in response.body
