"""Tools the model calls in the user's project: confined to the session's cwd, run locally or through the client.

The eight tools (a contract: names and parameters are fixed) are ``read_file``, ``list_directory``, ``glob``,
``grep``, ``update_plan`` (:data:`READ_ONLY_TOOLS`: they change nothing), ``write_file``, ``edit_file`` and
``run_command``; :func:`openai_tools` gives their OpenAI function-calling entries. ``update_plan``
touches no file: its result carries the model's whole plan for the turn to report. A call is made in two steps:

- ``await prepare_call(name, arguments, cwd=..., client=..., offered=...)`` validates the call (tool known and
  offered, arguments JSON within 1 MiB matching the schema), confines its paths and computes its announcement
  (title, kind, locations, an edit's diff). It raises :class:`ToolCallError` when the call cannot be made: the
  message is for the model, the client is never asked anything.
- ``await prepared.run(content_sink)`` executes it (after the permission the turn asked, if any). ``run`` never
  raises for a tool failure: it returns ``ToolResult(failed=True)``, ``output`` ``Error: <message>`` (a timed
  out command: its status line and output); only cancellation (which kills what the call started) and bugs
  propagate.

What the model gets is capped at 64 KiB per call (:data:`OUTPUT_LIMIT_BYTES`), a note saying what was cut and
how to see more. read_file numbers lines like ``cat -n`` (``     7\\tline``). Binary files (a NUL byte in the
first 8 KiB, or not UTF-8) are refused; so are files over 10 MiB (grep skips them). No input makes a call
unbounded: globs match without backtracking, grep's regular expressions release the GIL and have a time budget,
the blocking work runs in worker threads that a cancel abandons at once. The details of each part are in its
module: confinement ``_workspace``, ``.gitignore`` support ``_gitignore``, globs ``_globs``, searches
``_search``, commands ``_command`` (and its watchdog ``_command_watchdog``). Writes, edits and commands tell the
running prompt's checkpoints (``_checkpoint_hook``; :mod:`acp_server.checkpoints`) before and after they change files.

Each built-in tool is one module of :mod:`acp_server.tools.builtin`, one class (arguments model, name, kind,
title, description, ``prepare``); every tool is one :class:`~acp_server.tools.registry.Tool` to the registry, and
a session's tools are a :class:`~acp_server.tools.registry.ToolSet`: the built-ins plus its MCP servers' tools
(:mod:`acp_server.mcp`, which builds its tools with
:func:`guarded_run`, :func:`failure` and :func:`schema_check`).

``schemas/tools/<name>.json`` hold the parameters schemas the model is sent; regenerate them with
``python -m acp_server.tools`` after changing an argument model (a test pins the files to the code).
"""

from ._call import _guarded as guarded_run
from ._call import failure
from ._checkpoint_hook import CheckpointRecorder, checkpoints_used, current_recorder
from ._command import SECRET_ENV
from ._dirfd import open_parent
from ._exceptions import ToolCallError, ToolError
from ._group_watch import watched_group
from ._output import OUTPUT_LIMIT_BYTES, cap_text
from ._prepare import MAX_ARGUMENTS_BYTES, prepare_call
from ._project_text import ProjectText, read_project_text
from ._sandbox import CREDENTIAL_STORES, SandboxPolicy, SandboxSupport
from ._sandbox import configure as configure_sandbox
from ._sandbox import support as sandbox_support
from ._textfile import remove_file, write_bytes_atomic
from ._types import (
    PERMISSION_OPTIONS,
    ChildFace,
    ContentSink,
    EditorReader,
    EditorTerminal,
    EditorWriter,
    PermissionAsker,
    PermissionChoice,
    PreparedCall,
    TerminalExit,
    TerminalOutput,
    ToolClient,
    ToolResult,
    permission_choice,
)
from ._validate import arguments_json, schema_check
from ._walk import Walk
from ._web import WebPolicy
from ._workspace import Target, Workspace
from .builtin import READ_ONLY_TOOLS, TOOL_NAMES, openai_tools
from .registry import ToolSet

__all__ = [
    "CREDENTIAL_STORES",
    "MAX_ARGUMENTS_BYTES",
    "OUTPUT_LIMIT_BYTES",
    "PERMISSION_OPTIONS",
    "READ_ONLY_TOOLS",
    "SECRET_ENV",
    "TOOL_NAMES",
    "CheckpointRecorder",
    "ChildFace",
    "ContentSink",
    "EditorReader",
    "EditorTerminal",
    "EditorWriter",
    "PermissionAsker",
    "PermissionChoice",
    "PreparedCall",
    "ProjectText",
    "SandboxPolicy",
    "SandboxSupport",
    "Target",
    "TerminalExit",
    "TerminalOutput",
    "ToolCallError",
    "ToolClient",
    "ToolError",
    "ToolResult",
    "ToolSet",
    "Walk",
    "WebPolicy",
    "Workspace",
    "arguments_json",
    "cap_text",
    "checkpoints_used",
    "configure_sandbox",
    "current_recorder",
    "failure",
    "guarded_run",
    "open_parent",
    "openai_tools",
    "permission_choice",
    "prepare_call",
    "read_project_text",
    "remove_file",
    "sandbox_support",
    "schema_check",
    "watched_group",
    "write_bytes_atomic",
]
