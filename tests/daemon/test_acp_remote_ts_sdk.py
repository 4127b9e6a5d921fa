"""The TypeScript SDK's remote transports (``@agentclientprotocol/sdk`` from npm: Streamable HTTP and WebSocket
clients), run with node against ``/acp`` of a real daemon: initialize → session/new → streamed prompt → cancel →
load. Skips cleanly when node, npm or the package (installed into a temporary directory, never the repo) is
missing; ``ACP_TS_SDK_DIR`` may name a directory where it is already installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip

from ._support import running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SCRIPT = Path(__file__).parent / "js" / "acp_remote_client.mjs"
PACKAGES = ["@agentclientprotocol/sdk@^2", "ws@^8"]


@pytest.fixture(scope="module")
def ts_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    given = os.environ.get("ACP_TS_SDK_DIR")
    if given:
        return Path(given)
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    where = tmp_path_factory.mktemp("ts-sdk")
    (where / "package.json").write_text('{"name": "acp-ts-sdk-test", "private": true}')
    try:
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", *PACKAGES],
            cwd=where,
            check=True,
            timeout=180,
            capture_output=True,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"could not install {PACKAGES} from npm: {exc}")
    return where


@pytest.mark.parametrize("kind", ["http", "ws"])
async def test_ts_sdk_initialize_new_prompt_cancel_load(kind: str, ts_sdk: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(
            Answer(text="first answer here", reasoning="thinking"),
            SlowDrip(interval_s=0.02, text="word " * 2000),
        )
        async with running_daemon(model) as served:
            env = {**os.environ, "ACP_SDK_DIR": str(ts_sdk)}
            with anyio.fail_after(30):
                done = await anyio.run_process(
                    ["node", str(SCRIPT), kind, served.url], env=env, check=False, stderr=sys.stderr.fileno()
                )
    assert done.returncode == 0, done.stdout
    summary = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert summary["protocolVersion"] == 1
    assert summary["firstStop"] == "end_turn"
    assert summary["firstText"] == "first answer here"
    assert summary["cancelledStop"] == "cancelled"
    assert summary["replayedUser"].startswith("hello")
    assert "first answer here" in summary["replayedAgent"]
    assert summary["replaySessions"] == [summary["sessionId"]]
