"""The model's view of a session: the one place the stored conversation becomes the messages a request sends.

The stored conversation (and what ``session/load`` replays) is never shortened: only this view is — older tool
outputs elided, older turns summarised (:class:`Compactor`), a prompt too large for the window left out.
"""

from ._budget import (
    ANSWER_SHARE,
    CHARS_PER_TOKEN,
    DEFAULT_COMPACT_THRESHOLD,
    MESSAGE_TOKENS,
    SUMMARY_SHARE,
    Budget,
    json_tokens,
    message_tokens,
    messages_tokens,
    text_tokens,
)
from ._compact import SUMMARY_INSTRUCTIONS, Compactor, summary_request
from ._messages import step_messages, to_chat_messages, user_content
from ._refusals import CONTEXT_REFUSALS, ContextRefusal, context_refusal
from ._view import KEEP_WHOLE_TURNS, ContextView, cut_summary, elided_output

__all__ = [
    "ANSWER_SHARE",
    "CHARS_PER_TOKEN",
    "CONTEXT_REFUSALS",
    "DEFAULT_COMPACT_THRESHOLD",
    "KEEP_WHOLE_TURNS",
    "MESSAGE_TOKENS",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_SHARE",
    "Budget",
    "Compactor",
    "ContextRefusal",
    "ContextView",
    "context_refusal",
    "cut_summary",
    "elided_output",
    "json_tokens",
    "message_tokens",
    "messages_tokens",
    "step_messages",
    "summary_request",
    "text_tokens",
    "to_chat_messages",
    "user_content",
]
