"""The MCP client: a session's MCP servers, connected over stdio, streamable HTTP or SSE, their tools registered
into the session's :class:`~acp_server.tools.registry.ToolSet` and their prompts offered for slash commands.

Every other layer uses these names only. The parts: what configures a server (``_config``: ACP's ``mcpServers``,
the editor config file's servers, a stdio server's environment), who may start a stdio server (``_admission``), one
server's connection (``_connection``) over its transport (``_stdio``: a bounded line reader and the process group;
``_http``: bounded bodies), its tools as registry tools (``_tools``), its prompts (``_prompts``: names, arguments,
what a result becomes), a session's servers together (``_servers``), and
who answers a server's elicitation (``_elicitation``).
"""

from ._admission import check_mcp_servers
from ._config import AGENT_SECRETS, MAX_MCP_SERVERS, McpServerConfig, editor_config_servers, parse_mcp_servers
from ._elicitation import MAX_ELICITATION_BYTES, SESSION_ELICITOR, Elicitor
from ._exceptions import McpPromptError
from ._prompts import MAX_PROMPT_TEXT, McpPrompt, bind_arguments, prompt_parts
from ._servers import (
    DEFAULT_MCP_CALL_TIMEOUT_S,
    DEFAULT_MCP_CONNECT_TIMEOUT_S,
    DEFAULT_MCP_PROMPTS_WAIT_S,
    McpServers,
    McpSettings,
)
from ._tools import mcp_tool_name

__all__ = [
    "AGENT_SECRETS",
    "DEFAULT_MCP_CALL_TIMEOUT_S",
    "DEFAULT_MCP_CONNECT_TIMEOUT_S",
    "DEFAULT_MCP_PROMPTS_WAIT_S",
    "MAX_ELICITATION_BYTES",
    "MAX_MCP_SERVERS",
    "MAX_PROMPT_TEXT",
    "SESSION_ELICITOR",
    "Elicitor",
    "McpPrompt",
    "McpPromptError",
    "McpServerConfig",
    "McpServers",
    "McpSettings",
    "bind_arguments",
    "check_mcp_servers",
    "editor_config_servers",
    "mcp_tool_name",
    "parse_mcp_servers",
    "prompt_parts",
]
