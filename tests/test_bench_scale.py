"""The pure helpers of ``bench/bench_daemon_scale.py`` (the benchmark itself is not run by the suite): the HAProxy
configuration derived for N serve processes keeps every routing line of ``deploy/haproxy.cfg`` and HAProxy accepts
it; the stick-table reader maps each session to its server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import bench_daemon_scale as scale  # noqa: E402

SERVER = 'server daemon{k} "${{ACP_DAEMON_{k}}}"'


def _without_servers(text: str) -> list[str]:
    return [line for line in text.splitlines() if not scale.SERVER_LINE.match(line)]


@pytest.mark.parametrize("servers", [1, 2, 4])
def test_the_derived_config_has_n_servers_in_place_and_every_other_line_unchanged(servers: int) -> None:
    original = scale.CONFIG.read_text()
    derived = scale.haproxy_config(original, servers)
    lines = derived.splitlines()
    listed = [line.strip() for line in lines if scale.SERVER_LINE.match(line)]
    assert listed == [SERVER.format(k=k) for k in range(1, servers + 1)]
    assert _without_servers(derived) == _without_servers(original)  # the routing rules are the repository's
    first = next(i for i, line in enumerate(lines) if scale.SERVER_LINE.match(line))
    assert all(scale.SERVER_LINE.match(line) for line in lines[first : first + servers])  # one block, where it was


def test_a_config_without_server_lines_or_no_servers_is_refused() -> None:
    with pytest.raises(ValueError, match="no `server daemonK"):
        scale.haproxy_config("defaults\n    mode http\n", 2)
    with pytest.raises(ValueError, match="at least one server"):
        scale.haproxy_config(scale.CONFIG.read_text(), 0)


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed (.ci/run installs it)")
def test_haproxy_accepts_the_derived_config_for_four_processes(tmp_path: Path) -> None:
    config = tmp_path / "haproxy.cfg"
    config.write_text(scale.haproxy_config(scale.CONFIG.read_text(), 4))
    env = {**os.environ, "ACP_LISTEN": "127.0.0.1:1"} | {f"ACP_DAEMON_{k}": f"127.0.0.1:{k}" for k in range(1, 5)}
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(config)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_holders_reads_each_session_s_server_from_the_stick_table() -> None:
    table = (
        "# table: daemons, type: string, size:1048576, used:2\n"
        "0x55d0c1a0: key=3f2a use=0 exp=86399000 shard=0 server_id=2 server_key=daemon2\n"
        "0x55d0c1b0: key=9b1c use=1 exp=86398000 shard=0 server_id=1 server_key=daemon1\n"
    )
    assert scale.holders(table) == {"3f2a": 2, "9b1c": 1}


def _subscriber(stamps: list[float], delay: float) -> scale.Subscriber:
    subscriber = scale.Subscriber("s")
    subscriber.stamps = stamps
    subscriber.delays = [delay] * len(stamps)
    return subscriber


def test_delivery_counts_only_the_window_in_which_every_stream_ran() -> None:
    # two streams of 10 chunks/s: one over [0, 2), one over [1, 3); they overlap in [1, 1.9]
    early = _subscriber([k / 10 for k in range(20)], 0.0)
    late = _subscriber([1 + k / 10 for k in range(20)], 0.0)
    offered, delivered, window_s, spread_s = scale.delivery([early, late])
    assert spread_s == 1.0
    assert abs(window_s - 0.9) < 1e-9
    assert abs(offered - 18 / 0.9) < 1e-6 and abs(delivered - offered) < 1e-6  # 9 chunks of each in the window


def test_delivery_has_no_window_when_the_streams_never_ran_together() -> None:
    first, second = _subscriber([0.0, 0.5], 0.0), _subscriber([1.0, 1.5], 0.0)
    assert scale.delivery([first, second])[2] < 0  # the bench then reports the rate over the whole run


def test_worst_stall_leaves_out_the_windows_around_an_object_count(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.write_text("10.1 2.0\n10.2 40.0\n10.3 3.0\n10.9 7.0\n")  # the 40 ms window held a gc.get_objects() call
    assert scale.worst_stall(str(probe), 10.0, 11.0)[0] == 40.0
    assert scale.worst_stall(str(probe), 10.0, 11.0, [(10.15, 10.18)])[0] == 7.0
