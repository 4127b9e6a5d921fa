"""One model turn: conversation + prompt → chat requests and tool calls → streamed events → stop reason; the
system prompt it sends (environment, project instructions) and the linked files it reads; and the catalog of models
a session may pick."""

from ._compaction import CompactOutcome
from ._exceptions import (
    CompactionFailedError,
    ContextWindowExceededError,
    ContextWindowTooSmallError,
    ModelNotConfiguredError,
    TurnError,
)
from ._instructions import INSTRUCTION_FILES, MAX_INSTRUCTIONS_BYTES, project_instructions, repository_root
from ._links import MAX_LINKED_BYTES, MAX_LINKED_FILE_BYTES, with_linked_files
from ._models import FAMILY_CONTEXT_WINDOWS, MIN_LEARNED_WINDOW, ModelCatalog, family_context_window
from ._subagent import DEFAULT_TASK_CONCURRENCY, DEFAULT_TASK_MAX_REQUESTS, DEFAULT_TASK_TIMEOUT_S, SubagentSettings
from ._system_prompt import DEFAULT_SYSTEM_PROMPT, GIT_TIMEOUT_S, build_system_prompt, environment_block, git_state
from ._turn import (
    DEFAULT_MAX_TURN_REQUESTS,
    DEFAULT_MODEL,
    MODEL_LIST_TIMEOUT_S,
    ModelSettings,
    ModelTurn,
    SessionLike,
    offered_tools,
    usage_of,
)
from .context import DEFAULT_COMPACT_THRESHOLD, step_messages, to_chat_messages, user_content

__all__ = [
    "DEFAULT_COMPACT_THRESHOLD",
    "DEFAULT_MAX_TURN_REQUESTS",
    "DEFAULT_MODEL",
    "DEFAULT_SYSTEM_PROMPT",
    "DEFAULT_TASK_CONCURRENCY",
    "DEFAULT_TASK_MAX_REQUESTS",
    "DEFAULT_TASK_TIMEOUT_S",
    "FAMILY_CONTEXT_WINDOWS",
    "GIT_TIMEOUT_S",
    "INSTRUCTION_FILES",
    "MAX_INSTRUCTIONS_BYTES",
    "MAX_LINKED_BYTES",
    "MAX_LINKED_FILE_BYTES",
    "MIN_LEARNED_WINDOW",
    "MODEL_LIST_TIMEOUT_S",
    "CompactOutcome",
    "CompactionFailedError",
    "ContextWindowExceededError",
    "ContextWindowTooSmallError",
    "ModelCatalog",
    "ModelNotConfiguredError",
    "ModelSettings",
    "ModelTurn",
    "SessionLike",
    "SubagentSettings",
    "TurnError",
    "build_system_prompt",
    "environment_block",
    "family_context_window",
    "git_state",
    "offered_tools",
    "project_instructions",
    "repository_root",
    "step_messages",
    "to_chat_messages",
    "usage_of",
    "user_content",
    "with_linked_files",
]
