"""Prompt content blocks for the tests that drive the official ACP SDK, built from ``acp.schema`` models.

The SDK's own builders (``acp.text_block`` and friends, ``acp.helpers``) are gone from its 1.0 line; the schema
models are in both lines the server supports (``>=0.12,<2``), so these work with either.
"""

from __future__ import annotations

from acp.schema import ResourceContentBlock, TextContentBlock

__all__ = ["resource_link_block", "text_block"]


def text_block(text: str) -> TextContentBlock:
    """A ``text`` content block."""
    return TextContentBlock(type="text", text=text)


def resource_link_block(name: str, uri: str) -> ResourceContentBlock:
    """A ``resource_link`` content block (what an editor's @-mention sends)."""
    return ResourceContentBlock(type="resource_link", name=name, uri=uri)
