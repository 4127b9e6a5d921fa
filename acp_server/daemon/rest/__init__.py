"""The REST + SSE API: sessions and prompts over the session bridge, each session's events on an SSE stream.

:class:`Daemon` is the face's state (a per-session event log fed by the prompts' own streams, permission requests
answered over REST); :data:`ROUTES` are its endpoints, which find it on ``app.state.daemon``. It knows nothing of
``/acp``: the two meet only in the bridge.
"""

from ._channel import SessionChannel
from ._daemon import FEATURES, Accepted, Daemon
from ._event_log import EventLog, RingBudget, Subscription
from ._routes import ROUTES
from ._sse import SEND_BUFFER_BYTES, EventStreamResponse

__all__ = [
    "FEATURES",
    "ROUTES",
    "SEND_BUFFER_BYTES",
    "Accepted",
    "Daemon",
    "EventLog",
    "EventStreamResponse",
    "RingBudget",
    "SessionChannel",
    "Subscription",
]
