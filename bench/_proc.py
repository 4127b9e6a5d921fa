"""What /proc says of a process the benchmarks started (Linux): its resident memory."""

from __future__ import annotations

__all__ = ["rss_kib", "rss_mb"]


def rss_kib(pid: int) -> int:
    """The process's resident set size in KiB (``VmRSS``)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def rss_mb(pid: int) -> float:
    """The process's resident set size in MiB."""
    return rss_kib(pid) / 1024
