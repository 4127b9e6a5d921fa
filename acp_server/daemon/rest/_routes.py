"""The REST face's routes: one per path, each a module-level endpoint of ``_routes_*.py``."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from . import _routes_prompts as prompts
from . import _routes_service as service
from . import _routes_sessions as sessions

__all__ = ["ROUTES"]

ROUTES: tuple[BaseRoute, ...] = (
    Route("/health", service.health, methods=["GET"]),
    Route("/capabilities", service.capabilities, methods=["GET"]),
    Route("/session", sessions.create_session, methods=["POST"]),
    Route("/session/{session_id}", sessions.delete_session, methods=["DELETE"]),
    Route("/session/{session_id}/resume", sessions.resume_session, methods=["POST"]),
    Route("/session/{session_id}/delete", sessions.remove_session, methods=["POST"]),
    Route("/session/{session_id}/mode", sessions.set_mode, methods=["POST"]),
    Route("/session/{session_id}/config", sessions.set_config, methods=["POST"]),
    Route("/session/{session_id}/rewind", sessions.rewind, methods=["POST"]),
    Route("/session/{session_id}/permission/{requestId}", prompts.answer_permission, methods=["POST"]),
    Route("/session/{session_id}/prompt", prompts.prompt, methods=["POST"]),
    Route("/session/{session_id}/cancel", prompts.cancel, methods=["POST"]),
    Route("/session/{session_id}/prompt/{promptId}/cancel", prompts.cancel_prompt, methods=["POST"]),
    Route("/session/{session_id}/events", prompts.events, methods=["GET"]),
)
"""Every REST route (``GET /session/{id}/events`` is the SSE stream)."""
