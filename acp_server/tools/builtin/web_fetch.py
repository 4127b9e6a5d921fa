"""``web_fetch``: one page of the web, as Markdown (HTML) or as is (other text), bounded and checked (``.._web``).

It reaches outside the project (ACP kind ``fetch``): the mode decides whether the user is asked, and an "always"
answer holds for the URL's host. With a ``prompt`` the call ends with a question for the turn, which answers it
with the same model over the page in a tool-less side request, so the parent's window pays only for the answer.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from ...domain import TextContent
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._web import DEFAULT_WEB_POLICY, WebPolicy, fetch_page, host_of
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["MAX_QUESTION_TEXT_CHARS", "WebFetch", "WebFetchArgs"]

MAX_QUESTION_TEXT_CHARS = 100_000
"""The page text a ``prompt`` is answered over, at most (the rest is cut, and the side request is told)."""


class WebFetchArgs(Args):
    url: str = Field(min_length=1, max_length=8192, description="http(s) URL.")
    prompt: str | None = Field(
        default=None, max_length=8192, description="Question to answer from the page instead."
    )


def _clip(url: str) -> str:
    return url if len(url) <= 100 else url[:99] + "…"


class WebFetch(BuiltinTool[WebFetchArgs]):
    """A fetch reaches the network: asks as a command does (an "always" per host); offered in ``read-only`` only
    when the policy says so."""

    name = "web_fetch"
    kind = "fetch"
    title = "Fetch"
    args = WebFetchArgs
    description = "Fetch a URL (HTML as Markdown)."

    def __init__(self, policy: WebPolicy = DEFAULT_WEB_POLICY) -> None:
        self.policy = policy

    async def prepare(self, args: WebFetchArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        """The call fetching ``args.url`` (its scheme and host checked now; its addresses as it runs)."""
        host = host_of(args.url.strip())
        url, question, policy = args.url.strip(), args.prompt, self.policy

        async def run(sink: ContentSink) -> ToolResult:
            page = await fetch_page(url, policy)
            head = f"URL: {page.url}\nStatus: {page.status}\nContent-Type: {page.content_type or 'unknown'}\n"
            if page.truncated:
                head += f"Note: the body was cut at {policy.max_bytes} bytes.\n"
            raw = {"url": page.url, "status": page.status, "contentType": page.content_type}
            shown = (TextContent(f"Fetched {page.url} ({len(page.text)} characters)"),)
            if question:
                text = page.text[:MAX_QUESTION_TEXT_CHARS]
                if len(page.text) > MAX_QUESTION_TEXT_CHARS:
                    text += "\n[the rest of the page was cut]"
                return ToolResult(head, shown, raw_output=raw, question=(question, text))
            return ToolResult(f"{head}\n{page.text}", shown, raw_output=raw)

        return dataclasses.replace(self.call(title=f"Fetch {_clip(url)}", run=run), rule=f"fetch:{host}")
