"""The route table and how endpoints find their daemon: one route per path, and each app answers for its own daemon."""

from __future__ import annotations

from collections import Counter

import pytest
from starlette.routing import Route, WebSocketRoute

from acp_server.daemon import create_app

from ._support import running_daemon

pytestmark = pytest.mark.anyio


async def test_the_table_has_one_route_per_path_and_scope_so_a_405_lists_every_method() -> None:
    async with running_daemon(None) as served:
        routes = create_app(served.daemon).routes
    table = [route for route in routes if isinstance(route, Route | WebSocketRoute)]
    counts = Counter((type(route).__name__, route.path) for route in table)
    assert counts and max(counts.values()) == 1, [key for key, count in counts.items() if count > 1]
    assert {path for kind, path in counts if kind == "WebSocketRoute"} == {"/acp"}


async def test_two_daemons_in_one_process_each_answer_for_their_own() -> None:
    async with running_daemon(None) as first, running_daemon(None) as second:
        one = (await first.client.get("/health")).json()["instance"]
        two = (await second.client.get("/health")).json()["instance"]
        assert (one, two) == (first.daemon.bridge.store.instance, second.daemon.bridge.store.instance)
        assert one != two
        session_id = await first.new_session()
        assert (await first.client.post(f"/session/{session_id}/cancel")).status_code == 204
        elsewhere = await second.client.post(f"/session/{session_id}/cancel")
        assert elsewhere.status_code == 404 and elsewhere.json()["code"] == "session_not_found"
