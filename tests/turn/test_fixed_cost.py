"""The fixed cost of a fresh session's first request (``bench/bench_fixed_cost.py``'s measure, run here): at most
:data:`TARGET_CHARS` characters of ``messages`` + ``tools`` JSON in ``default`` mode without AGENTS.md; ``skill`` is
offered, and the skills listed, only to a session that has skills."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_server.modes import DEFAULT_MODE

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_fixed_cost as bench  # noqa: E402

pytestmark = pytest.mark.anyio


def _names(body: dict[str, object]) -> list[str]:
    tools = body.get("tools", [])
    assert isinstance(tools, list)
    return [entry["function"]["name"] for entry in tools]


async def test_default_mode_s_first_request_is_within_the_target(tmp_path: Path) -> None:
    bodies = await bench._first_requests(str(tmp_path))
    default = bodies[DEFAULT_MODE]
    total = bench._chars(default["messages"]) + bench._chars(default.get("tools", []))
    assert total <= bench.TARGET_CHARS, f"fixed cost {total} > {bench.TARGET_CHARS}"
    assert "skill" not in _names(default) and "# Skills" not in default["messages"][0]["content"]


async def test_a_session_with_a_skill_is_offered_skill_and_told_of_it(tmp_path: Path) -> None:
    folder = tmp_path / ".agents" / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: pdf\ndescription: Fill PDF forms\n---\nUse pdftk.\n")
    bodies = await bench._first_requests(str(tmp_path))
    for mode, body in bodies.items():
        assert "skill" in _names(body), mode
        assert "- pdf: Fill PDF forms" in body["messages"][0]["content"], mode
