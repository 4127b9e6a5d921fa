"""The SDK's ``additional_directories``: ``create_session`` and ``resume_session`` send them, the daemon's session
uses them, a bad one is :class:`DaemonInvalidRequestError` naming the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.client import DaemonClient, DaemonInvalidRequestError

from ._support import running_daemon

pytestmark = pytest.mark.anyio


async def test_create_and_resume_send_them(tmp_path: Path) -> None:
    extra, other = tmp_path / "extra", tmp_path / "other"
    extra.mkdir()
    other.mkdir()
    async with running_daemon(None, token="t") as served, DaemonClient(served.url, token="t") as client:
        session_id = await client.create_session(tmp_path / "none-such-is-fine", additional_directories=[extra])
        assert served.bridge.get(session_id).additional_directories == (str(extra),)
        await client.resume_session(session_id)
        assert served.bridge.get(session_id).additional_directories == (str(extra),)  # None: kept
        await client.resume_session(session_id, additional_directories=[str(other)])
        assert served.bridge.get(session_id).additional_directories == (str(other),)
        with pytest.raises(DaemonInvalidRequestError) as refused:
            await client.create_session(tmp_path, additional_directories=[extra, "relative"])
        assert refused.value.details == [{"field": "additionalDirectories[1]", "message": "must be an absolute path"}]
