"""The daemon's own cost per streamed chunk, in one process: a prompt's event stream → the session's channel → its
event log → ``--subscribers`` SSE writers (``EventStreamResponse``) whose ``send`` only counts the bytes.

No sockets and no model: what is left is what the daemon adds per chunk (building the update, encoding the frame,
the ring, the fan-out, the task switches, the SSE writer loop). The chunks come one at a time (the producer yields
after each), as a model's do. Figures: CPU µs per chunk (all subscribers
included) and frames written. A writer that keeps up gets one frame per chunk; with ``--slow`` each ``send``
yields to the event loop, so chunks pile up while the writers are busy (merged frames, where coalescing applies).

Target: none fixed (a regression guard; compare before and after a change on the same machine).
Run: ``python bench/bench_sse_fanout.py [--chunks 50000] [--subscribers 1] [--slow]``.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace
from typing import Any, cast

import anyio
import anyio.lowlevel

from acp_server.bridge import PromptStream
from acp_server.daemon import EventLog
from acp_server.daemon.rest import EventStreamResponse, SessionChannel
from acp_server.domain import PromptEnded, TextChunk


async def one_run(chunks: int, subscribers: int, slow: bool) -> tuple[float, int, int]:
    """(CPU seconds, frames written, bytes written) for ``chunks`` chunks of one prompt."""
    log = EventLog("bench-session", ring_size=4096, queue_size=1 << 20)
    channel = SessionChannel("bench-session", log)
    stream = PromptStream(256)
    handle = SimpleNamespace(prompt_id="bench-prompt", events=stream)
    written = [0, 0]
    done = anyio.Event()

    async def send(message: Any) -> None:
        body = message.get("body", b"")
        written[0] += body.count(b"\n\n")
        written[1] += len(body)
        if b"turn_complete" in body:
            done.set()
        if slow:
            await anyio.lowlevel.checkpoint()

    responses = [
        EventStreamResponse(log.subscribe(), session_id="bench-session", heartbeat_s=15.0) for _ in range(subscribers)
    ]
    async with anyio.create_task_group() as tg:
        for response in responses:
            tg.start_soon(response._write, send)
        await anyio.wait_all_tasks_blocked()
        started = time.process_time()
        channel.accept(cast(Any, handle))  # its stream delivers to the log in the sending task: no pump
        for i in range(chunks):
            await stream.send(TextChunk(f" w{i}"))
            await anyio.lowlevel.checkpoint()  # one chunk at a time, as they come from the model
        stream.end(PromptEnded("end_turn"))
        await done.wait()
        await anyio.wait_all_tasks_blocked()
        cpu = time.process_time() - started
        log.close()
    return cpu, written[0], written[1]


async def main(chunks: int, subscribers: int, slow: bool, repeat: int) -> None:
    print(
        f"command: python bench/bench_sse_fanout.py --chunks {chunks} --subscribers {subscribers}"
        f"{' --slow' if slow else ''} --repeat {repeat}"
    )
    print("target: none fixed (compare before/after on the same machine)")
    for _ in range(repeat):
        cpu, frames, size = await one_run(chunks, subscribers, slow)
        print(
            f"  {cpu / chunks * 1e6:.2f} CPU-µs per chunk ({subscribers} subscriber(s)); "
            f"{frames:,} frames, {size / 1e6:.1f} MB written"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--subscribers", type=int, default=1)
    parser.add_argument("--slow", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main, args.chunks, args.subscribers, args.slow, args.repeat)
