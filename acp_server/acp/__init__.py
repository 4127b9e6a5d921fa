"""ACP handlers: validate with the official schema, call the session bridge, shape replies. Transport-neutral."""

from ._agent import PROTOCOL_VERSION, AcpAgent, AgentOptions, Peer
from ._convert import prompt_from_blocks, replay_updates, update_from_event
from ._schema import preload, validate

__all__ = [
    "PROTOCOL_VERSION",
    "AcpAgent",
    "AgentOptions",
    "Peer",
    "preload",
    "prompt_from_blocks",
    "replay_updates",
    "update_from_event",
    "validate",
]
