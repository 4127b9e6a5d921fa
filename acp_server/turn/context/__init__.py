"""The model's view of a session: the one place the stored conversation becomes the messages a request sends.

The stored conversation (and what ``session/load`` replays) is never shortened: only this view is.
"""

from ._messages import step_messages, to_chat_messages, user_content

__all__ = ["step_messages", "to_chat_messages", "user_content"]
