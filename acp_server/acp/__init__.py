"""ACP handlers: the method table (schema model + handler per method), the handlers over the session bridge, and the
wire shapes of prompts and updates. Transport-neutral: a dispatcher calls them with a :class:`Peer`."""

from ._agent import MAX_TITLE_CHARS, PROTOCOL_VERSION, SET_TITLE_METHOD, AcpAgent, AgentOptions, Announce, Peer
from ._auth import SETUP_METHOD_ID, AuthRequiredError, EndpointGate, auth_methods
from ._config import config_options
from ._convert import prompt_from_blocks, replay_updates, update_from_event, usage_update, wire_block
from ._methods import METHODS, NOTIFICATIONS, Method, Notification, bind
from ._providers import PROVIDER_ID, ProviderControl
from ._rewind import REWIND_METHOD, run_rewind_method
from ._schema import load_schema, model, preload, validate

__all__ = [
    "MAX_TITLE_CHARS",
    "METHODS",
    "NOTIFICATIONS",
    "PROTOCOL_VERSION",
    "PROVIDER_ID",
    "REWIND_METHOD",
    "SETUP_METHOD_ID",
    "SET_TITLE_METHOD",
    "AcpAgent",
    "AgentOptions",
    "Announce",
    "AuthRequiredError",
    "EndpointGate",
    "Method",
    "Notification",
    "Peer",
    "ProviderControl",
    "auth_methods",
    "bind",
    "config_options",
    "load_schema",
    "model",
    "preload",
    "prompt_from_blocks",
    "replay_updates",
    "run_rewind_method",
    "update_from_event",
    "usage_update",
    "validate",
    "wire_block",
]
