"""The conversation in OpenAI chat terms: a prompt as one user message, a history (tool steps included) as the
messages before it; the images a step's tools returned as one user message after its tool messages."""

from __future__ import annotations

from typing import Any

from ...domain import Conversation, ImagePart, ModelStep, Prompt

__all__ = ["step_messages", "to_chat_messages", "tool_images", "user_content"]


def user_content(prompt: Prompt) -> str | list[dict[str, Any]]:
    """The prompt as the content of one OpenAI user message: its text (:attr:`Prompt.text`), plus ``image_url``
    parts when it has images."""
    images = [_image_url(part) for part in prompt.parts if isinstance(part, ImagePart)]
    if not images:
        return prompt.text
    return [{"type": "text", "text": prompt.text}, *images]


def step_messages(step: ModelStep) -> list[dict[str, Any]]:
    """One tool-calling step as the model sent it (an assistant message with ``tool_calls``) and what each call
    returned (one ``tool`` message per call, in order). A step whose calls were all lost is its text alone."""
    if not step.calls:
        return [{"role": "assistant", "content": step.text}] if step.text else []
    calls = [
        {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in step.calls
    ]
    # "content" is "" without text, never null nor left out: strict servers (llama-cpp-python) refuse both
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": step.text, "tool_calls": calls}]
    messages.extend({"role": "tool", "tool_call_id": c.call_id, "content": c.output} for c in step.calls)
    images = tool_images(step)
    if images is not None:
        messages.append(images)
    return messages


def _image_url(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}}


def tool_images(step: ModelStep) -> dict[str, Any] | None:
    """The images the step's calls returned, as one ``user`` message after its ``tool`` messages (a tool message
    carries text only): for each call with images, a text part naming it, then its ``image_url`` parts. None when
    no call returned one."""
    content: list[dict[str, Any]] = []
    for call in step.calls:
        if call.images:
            content.append({"type": "text", "text": f"Images returned by {call.name} (call {call.call_id}):"})
            content.extend(_image_url(image) for image in call.images)
    return {"role": "user", "content": content} if content else None


def to_chat_messages(
    system: str, conversation: Conversation, content: str | list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """OpenAI chat messages: system, then the history (answers kept even if cut short, each answer's tool steps
    before its text), then the user's ``content`` (see :func:`user_content`)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in conversation.messages:
        for step in message.steps:
            messages.extend(step_messages(step))
        if message.content:
            messages.append({"role": message.role, "content": message.content})
    messages.append({"role": "user", "content": content})
    return messages
