"""An MCP server's prompts as slash commands: their names, their arguments as typed, what ``prompts/get`` gives.

- Name: ``mcp__<server>__<prompt>``, made like an MCP tool's name (:func:`~._mcp_tools.mcp_tool_name`: characters
  outside ``[a-zA-Z0-9_-]`` become ``_``, at most 64 characters, a clash gets a hash suffix), so it never clashes
  with a built-in command (none starts with ``mcp__``) nor with another prompt of the session. What the server says
  of it (description, title, argument names and descriptions) is shown as one line of plain text, bounded
  (:func:`_one_line`; an argument name one word of at most 64 characters): it cannot pass for another command.
- Arguments (:func:`bind_arguments`): the text after the command, split like a shell does (quotes group words).
  ``name=value`` (or ``--name=value``) sets the argument ``name``; the other words fill the declared arguments not
  named, in their declared order, the last of them taking every word left. A required argument missing, a name the
  prompt does not declare, words when it declares none, or unbalanced quotes: :class:`McpPromptError` with the
  sentence the user is told.
- Result (:func:`prompt_parts`): the messages' content in order, as the parts of the user's prompt: text as text (an
  assistant message's marked as such), embedded resources as resources (a binary one: its uri only), resource links
  as links, images as images within the bounds of an MCP tool's images (else a note), audio as a note. Over
  :data:`MAX_PROMPT_TEXT` characters of text in all (resources' and links' uris, names and descriptions count):
  refused.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..domain import ImageContent, ImagePart, PromptPart, ResourceLinkPart, ResourcePart, TextPart, base64_size
from ._exceptions import McpPromptError
from ._tools import image_problem, mcp_tool_name

if TYPE_CHECKING:
    from mcp import types

__all__ = ["MAX_PROMPT_TEXT", "McpPrompt", "PromptArgument", "bind_arguments", "mcp_prompt", "prompt_parts"]

MAX_PROMPT_TEXT = 256 * 1024
"""Characters of text (resources included) one prompt's result may bring; a larger one is refused."""
_MAX_DESCRIPTION = 1024
_MAX_ARGUMENTS = 32
_MAX_ARGUMENT_NAME = 64  # as shown: what the server is asked with is the name it declared
_UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, invisible formatting (bidi overrides), line breaks
_ASSISTANT = "(The prompt gives this as the assistant's words:)"
_NAMED = re.compile(r"(?:--)?([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.DOTALL)


def _one_line(text: str, limit: int) -> str:
    """A server's ``text`` as one line of plain text for the editor: controls, invisible format characters and line
    breaks as spaces, runs of spaces as one, at most ``limit`` characters (a cut one ends with ``…``)."""
    raw = text[: limit * 2]  # what can be shown of it, whatever the server sent
    shown = " ".join("".join(" " if unicodedata.category(c) in _UNSHOWN else c for c in raw).split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class PromptArgument:
    """One argument a prompt declares: ``name`` as declared (what the server is asked with)."""

    name: str
    description: str
    required: bool

    @property
    def shown(self) -> str:
        """The name as the user sees it: one word (no spaces: it cannot pass for two), one line, bounded."""
        return _one_line(self.name, _MAX_ARGUMENT_NAME).replace(" ", "_") or "_"


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """A server's prompt as a command: ``command`` (without the slash), the server's and the prompt's own names."""

    command: str
    server: str
    name: str
    description: str
    arguments: tuple[PromptArgument, ...]

    @property
    def hint(self) -> str | None:
        """The input hint: the arguments in order, an optional one in brackets (None: it takes none)."""
        words = [arg.shown if arg.required else f"[{arg.shown}]" for arg in self.arguments]
        return " ".join(words) or None

    @property
    def usage(self) -> str:
        return f"/{self.command}" + (f" {self.hint}" if self.hint else "")


def mcp_prompt(server: str, prompt: types.Prompt, taken: Collection[str]) -> McpPrompt:
    """``server``'s ``prompt`` as a command whose name is not in ``taken``."""
    declared = (prompt.arguments or [])[:_MAX_ARGUMENTS]
    arguments = tuple(
        PromptArgument(arg.name, _one_line(arg.description or "", _MAX_DESCRIPTION), bool(arg.required))
        for arg in declared
    )
    shown = _one_line(prompt.description or "", _MAX_DESCRIPTION) or _one_line(prompt.title or "", _MAX_DESCRIPTION)
    shown = shown or f"The prompt '{_one_line(prompt.name, _MAX_ARGUMENT_NAME)}'"
    description = f"{shown} (MCP server '{server}')"
    return McpPrompt(mcp_tool_name(server, prompt.name, taken), server, prompt.name, description, arguments)


def bind_arguments(prompt: McpPrompt, text: str) -> dict[str, str]:
    """The arguments ``text`` gives ``prompt`` (module rules), or :class:`McpPromptError` saying what is wrong."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise McpPromptError(f"Cannot read the arguments of /{prompt.command}: {exc} ({_usage(prompt)}).") from None
    declared = {arg.name for arg in prompt.arguments}
    values: dict[str, str] = {}
    positional: list[str] = []
    for word in words:
        named = _NAMED.fullmatch(word)
        if named is None:
            positional.append(word)
        elif named[1] not in declared:
            known = ", ".join(arg.shown for arg in prompt.arguments) or "none"
            raise McpPromptError(f"/{prompt.command} has no argument '{named[1]}' (its arguments: {known}).")
        else:
            values[named[1]] = named[2]
    free = [arg.name for arg in prompt.arguments if arg.name not in values]
    if positional and not free:
        what = "takes no arguments" if not prompt.arguments else "has every argument named already"
        raise McpPromptError(f"/{prompt.command} {what}: {' '.join(positional)!r} is left over ({_usage(prompt)}).")
    for name, word in zip(free, positional, strict=False):
        values[name] = word
    if len(positional) > len(free):
        values[free[-1]] = " ".join(positional[len(free) - 1 :])
    missing = [arg.shown for arg in prompt.arguments if arg.required and arg.name not in values]
    if missing:
        names = ", ".join(f"'{name}'" for name in missing)
        plural = "s" if len(missing) > 1 else ""
        raise McpPromptError(f"/{prompt.command} needs the argument{plural} {names} ({_usage(prompt)}).")
    return values


def _usage(prompt: McpPrompt) -> str:
    return f"usage: {prompt.usage}, or name=value for any argument"


def prompt_parts(result: types.GetPromptResult, prompt: McpPrompt) -> tuple[PromptPart, ...]:
    """The parts of the user's prompt that ``prompts/get``'s ``result`` makes (module rules)."""
    from mcp import types

    parts: list[PromptPart] = []
    images: list[ImagePart] = []
    held = text = 0
    for message in result.messages:
        block = message.content
        if isinstance(block, types.TextContent):
            said = block.text if message.role == "user" else f"{_ASSISTANT}\n{block.text}"
            parts.append(TextPart(said))
            text += len(said)
        elif isinstance(block, types.ImageContent):
            image = ImageContent(block.data, block.mimeType)
            why = image_problem(image, images, held)
            if why is None:
                images.append(ImagePart(image.data, image.mime_type))
                parts.append(images[-1])
                held += len(image.data)
            else:
                parts.append(TextPart(f"{image.note[:-1]}: not shown to the model, {why}]"))
        elif isinstance(block, types.AudioContent):
            size = base64_size(block.data)
            parts.append(TextPart(f"[audio ({block.mimeType}, {size} bytes): not shown to the model]"))
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            uri = str(resource.uri)
            if isinstance(resource, types.TextResourceContents):
                parts.append(ResourcePart(uri, resource.text, resource.mimeType))
                text += len(uri) + len(resource.text)
            else:
                parts.append(ResourcePart(uri, None, resource.mimeType))
                text += len(uri)
        elif isinstance(block, types.ResourceLink):
            parts.append(ResourceLinkPart(str(block.uri), block.name, block.description))
            text += len(str(block.uri)) + len(block.name) + len(block.description or "")
    if text > MAX_PROMPT_TEXT:
        raise McpPromptError(
            f"/{prompt.command}: the MCP server '{prompt.server}' gave {text} characters of text, more than the "
            f"{MAX_PROMPT_TEXT} a prompt may bring; nothing was sent to the model."
        )
    if not parts:
        raise McpPromptError(f"/{prompt.command}: the MCP server '{prompt.server}' gave an empty prompt.")
    return tuple(parts)
