"""The context layer's pieces alone: the refusal table recognises what the common servers say (and the window they
state), the budget's limit and calibration, the view's elision and its note for a prompt too large, the summary
request's bounds."""

from __future__ import annotations

import dataclasses

import pytest

from acp_server.domain import Compaction, ContextUsage, Conversation, ImagePart, Message, ModelStep, ToolCallRecord
from acp_server.pipeline import ModelHTTPError
from acp_server.turn.context import (
    CONTEXT_REFUSALS,
    Budget,
    ContextView,
    context_refusal,
    summary_request,
    to_chat_messages,
)


def _http(status: int, text: str) -> ModelHTTPError:
    message = f"answered HTTP {status}: {text}"
    return ModelHTTPError(message, attempts=1, chunks_received=0, retryable=False, status=status)


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("Error code: 400 - {'error': {'message': \"This model's maximum context length is 8192 tokens. However, "
         "your messages resulted in 9000 tokens.\", 'code': 'context_length_exceeded'}}", 8192),
        ("the request exceeds the available context size (4096 tokens), try increasing it", 4096),  # llama.cpp
        ("This model's maximum context length is 32768 tokens. However, you requested 40000 tokens", 32768),  # vLLM
        ("prompt is too long: 210000 tokens > 200000 maximum", 200000),  # Anthropic's wording
        ("Prompt contains 40000 tokens, too large for model with 32768 maximum context length", 32768),  # Mistral
        ("Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048", 2048),  # TGI
        ("Input validation error: inputs tokens + max_new_tokens must be <= 4096. Given: 5000", 4096),
        # a bound of another field is no window, though the error is one for length
        ("too many tokens: max_tokens must be <= 12", None),
        ("Requested too many tokens for this model", None),
        ("{'code': 'context_length_exceeded'}", None),
    ],
)
def test_refusals_for_length_are_recognised_with_the_window_they_state(text: str, window: int | None) -> None:
    refusal = context_refusal(_http(400, text))
    assert refusal is not None and refusal.window == window


@pytest.mark.parametrize(
    "exc",
    [
        _http(400, "Invalid value for 'temperature'"),
        _http(500, "maximum context length is 100"),  # a server error is not a refusal
        _http(401, "Incorrect API key"),
        _http(400, "Invalid 'n': must be <= 128"),  # a bare bound names no context
        ValueError("maximum context length"),
    ],
)
def test_other_failures_are_not_refusals_for_length(exc: Exception) -> None:
    assert context_refusal(exc) is None


def test_the_table_names_who_says_each_wording() -> None:
    assert all(phrase == phrase.lower() and who for phrase, who in CONTEXT_REFUSALS)


def test_the_budget_keeps_room_for_the_answer_and_is_corrected_upward_only() -> None:
    assert Budget(4000).limit == 3200 and Budget(4000).hard_limit == 3600
    assert Budget(4000, threshold=95).limit == 3600  # never past the answer's room
    assert Budget(4000, threshold=0).limit is None and Budget(None).limit is None
    assert Budget.calibrated(4000, 80, ContextUsage(reported=200, estimated=100)).estimate(1000) == 2000
    assert Budget.calibrated(4000, 80, ContextUsage(reported=50, estimated=100)).estimate(1000) == 1000
    assert Budget.calibrated(4000, 80, ContextUsage(reported=10**9, estimated=1)).estimate(10) == 40  # at most ×4


def _call(call_id: str, output: str) -> ToolCallRecord:
    return ToolCallRecord(call_id, "read_file", '{"path": "a.py"}', output, "completed", "Read a.py", "read")


def _history(turns: int) -> Conversation:
    messages: list[Message] = []
    for i in range(turns):
        messages.append(Message("user", f"prompt {i}"))
        step = ModelStep("", "", (_call(f"c{i}", f"first line {i}\n" + "x" * 1000),))
        messages.append(Message("assistant", f"answer {i}", steps=(step,)))
    return Conversation(messages)


def test_the_view_without_compaction_is_the_whole_conversation() -> None:
    history = _history(3)
    view = ContextView("sys", history, "now")
    assert view.messages() == to_chat_messages("sys", history, "now")


def test_elision_keeps_every_call_and_the_latest_turns_whole() -> None:
    view = ContextView("sys", _history(4), "now")
    view.elide = True
    tools = [m for m in view.messages() if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c0", "c1", "c2", "c3"]
    assert tools[0]["content"].startswith("[output elided to save context: 1013 characters, 2 lines; first line: ")
    assert "'first line 0'" in tools[0]["content"]
    assert tools[2]["content"].endswith("x" * 1000) and tools[3]["content"].endswith("x" * 1000)
    steps = [ModelStep("", "", (_call("n1", "y" * 1000),)), ModelStep("", "", (_call("n2", "z" * 1000),))]
    now = [m for m in view.messages(steps) if m["role"] == "tool"][-2:]
    assert now[0]["content"].startswith("[output elided") and now[1]["content"] == "z" * 1000


def test_elision_drops_the_images_of_this_turn_s_older_steps_and_keeps_the_last_step_s() -> None:
    image = ImagePart("iVBORw0KGgo=", "image/png")
    shot = dataclasses.replace(_call("s1", "[image (image/png, 8 bytes)]"), images=(image,))
    steps = [ModelStep("", "", (shot,)), ModelStep("", "", (dataclasses.replace(shot, call_id="s2"),))]
    view = ContextView("sys", Conversation(), "now")  # no older output to elide: only the images
    images = [m for m in view.messages(steps) if m["role"] == "user" and isinstance(m["content"], list)]
    assert len(images) == 2 and view.has_elidable(steps)  # images alone make a step elidable
    view.elide = True
    images = [m for m in view.messages(steps) if m["role"] == "user" and isinstance(m["content"], list)]
    assert [m["content"][0]["text"] for m in images] == ["Images returned by read_file (call s2):"]


def test_a_compacted_view_sends_the_summary_then_the_turns_after_it() -> None:
    history = _history(3)
    history.compaction = Compaction(4, "the summary")
    messages = ContextView("sys", history, "now").messages()
    assert messages[0]["role"] == "system" and "the summary" in messages[0]["content"]
    assert messages[0]["content"].startswith("sys\n\n<conversation_summary")
    assert [m.get("content") for m in messages if m["role"] == "user"] == ["prompt 2", "now"]


def test_a_stored_prompt_larger_than_the_window_is_a_note() -> None:
    history = Conversation([Message("user", "w " * 10_000), Message("assistant", "", outcome="failed")])
    messages = ContextView("sys", history, "now", oversize=1000).messages()
    assert messages[1]["content"].startswith("[A prompt of about 5000 tokens was here")
    assert ContextView("sys", history, "now").messages()[1]["content"] == "w " * 10_000


def test_the_summary_request_is_bounded_and_keeps_the_previous_summary() -> None:
    history = _history(50)
    request = summary_request(Compaction(2, "before"), history.messages, max_chars=5_000, words=300)
    assert [m["role"] for m in request] == ["system", "user"] and "at most about 300 words" in request[0]["content"]
    text = request[1]["content"]
    assert "SUMMARY OF THE CONVERSATION BEFORE THESE MESSAGES:\nbefore" in text
    assert "earlier messages left out" in text and "prompt 49" in text and "prompt 0\n" not in text
    assert len(text) < 6_000
