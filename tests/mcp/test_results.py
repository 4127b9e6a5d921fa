"""What an MCP call's result becomes: images shown to the model and the editor within the bounds, a note for the
rest (:func:`acp_server.mcp._tools.result_of`), and what history keeps of them (the note only)."""

from __future__ import annotations

import base64

from mcp import types

from acp_server.domain import ImageContent, ImagePart, ModelStep, TextContent, ToolCallRecord
from acp_server.mcp._tools import MAX_IMAGE_DATA, MAX_IMAGES, result_of
from acp_server.turn.context import step_messages

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 62).decode()  # 70 bytes


def _image(data: str = PNG, mime: str = "image/png") -> types.ImageContent:
    return types.ImageContent(type="image", data=data, mimeType=mime)


def _result(*blocks: types.ContentBlock, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(blocks), isError=error)


def test_an_image_goes_to_the_model_and_the_editor_with_a_note_in_the_text() -> None:
    result = result_of(_result(types.TextContent(type="text", text="a chart:"), _image()), "srv")
    assert result.images == (ImagePart(PNG, "image/png"),)
    assert result.output == "a chart:\n[image (image/png, 70 bytes)]"
    assert result.content == (TextContent(result.output), ImageContent(PNG, "image/png"))
    assert not result.failed


def test_past_the_count_or_the_size_an_image_is_a_note() -> None:
    result = result_of(_result(*(_image() for _ in range(MAX_IMAGES + 1))), "srv")
    assert len(result.images) == MAX_IMAGES
    last = f"[image (image/png, 70 bytes): not shown to the model, more than {MAX_IMAGES} images]"
    assert result.output.splitlines()[-1] == last
    assert sum(isinstance(c, ImageContent) for c in result.content) == MAX_IMAGES

    half = "A" * (MAX_IMAGE_DATA // 2)  # valid base64 (a multiple of 4)
    sized = result_of(_result(_image(half), _image(half), _image(PNG)), "srv")
    assert [len(i.data) for i in sized.images] == [len(half), len(half)]  # the third would pass 5 MiB in all
    assert sized.output.splitlines()[-1].endswith("not shown to the model, more than 5 MiB of images]")


def test_an_unsupported_type_or_bad_base64_is_a_note_and_audio_stays_a_note() -> None:
    result = result_of(
        _result(
            _image(mime="image/svg+xml"),
            _image(data="not base64!"),
            types.AudioContent(type="audio", data=PNG, mimeType="audio/wav"),
        ),
        "srv",
    )
    assert result.images == ()
    assert not any(isinstance(c, ImageContent) for c in result.content)
    assert result.output.splitlines() == [
        "[image (image/svg+xml, 70 bytes): not shown to the model, unsupported type]",
        "[image (image/png, 8 bytes): not shown to the model, not valid base64]",
        "[audio (audio/wav, 70 bytes): not shown to the model]",
    ]


def test_an_error_result_carries_no_image() -> None:
    result = result_of(_result(types.TextContent(type="text", text="boom"), _image(), error=True), "srv")
    assert result.failed and result.images == ()
    assert not any(isinstance(c, ImageContent) for c in result.content)


def _record(images: tuple[ImagePart, ...]) -> ToolCallRecord:
    content = (TextContent("[image (image/png, 70 bytes)]"), *(ImageContent(i.data, i.mime_type) for i in images))
    output = "[image (image/png, 70 bytes)]"
    return ToolCallRecord(
        "c1", "mcp__srv__shot", "{}", output, "completed", "srv: shot", "read", content=content, images=images
    )


def test_the_step_s_images_follow_its_tool_messages_as_one_user_message() -> None:
    image = ImagePart(PNG, "image/png")
    plain = ToolCallRecord("c0", "read_file", "{}", "text", "completed", "Read", "read")
    messages = step_messages(ModelStep("", "", (plain, _record((image, image)))))
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "user"]
    assert messages[-1]["content"] == [
        {"type": "text", "text": "Images returned by mcp__srv__shot (call c1):"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


def test_history_keeps_the_note_only() -> None:
    kept = ModelStep("", "", (_record((ImagePart(PNG, "image/png"),)),)).without_images()
    (call,) = kept.calls
    assert call.images == ()
    assert call.content == (TextContent("[image (image/png, 70 bytes)]"),)  # the text holds the note
    assert [m["role"] for m in step_messages(kept)] == ["assistant", "tool"]


def test_the_store_never_writes_an_image_even_if_one_is_given() -> None:
    from acp_server.store._types import steps_from_json, steps_to_json

    step = ModelStep("", "", (_record((ImagePart(PNG, "image/png"),)),))
    text = steps_to_json((step,))
    assert text is not None and PNG not in text
    (call,) = steps_from_json(text)[0].calls
    assert call.images == () and not any(isinstance(c, ImageContent) for c in call.content)
