"""The loopback model as a process of its own, for benchmarks that measure the agent apart from its endpoint.

``python bench/_model_server.py [--words N] [--chunk-delay-s S] [--stamp] [--report-done] [--script]`` prints
``url <base_url>`` once it listens, then one line per chat request: ``request <CLOCK_MONOTONIC seconds at arrival>
<messages in the body>``. Every chat request gets the same answer: ``N`` content words (``w0 w1 ...``), no
reasoning, one chunk per word, ``S`` seconds before each chunk; ``--stamp`` makes each word the ``CLOCK_MONOTONIC``
instant the model wrote it (the clock is system-wide, so a reader in another process can compute the delay).
``--report-done`` also prints ``done <CLOCK_MONOTONIC seconds>`` when a streamed response has been written to its
end (so arrival and end come from one clock in one process). ``--script`` reads stdin instead: each line
``script [PATH ...]`` (paths without spaces) queues one ``read_file`` tool-call answer per path, then the answer,
and is acknowledged with ``scripted <answers queued>``. Stops when stdin closes.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import anyio

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls, _exchange, _model


def _patch(stamp: bool, report_done: bool) -> None:
    record = _model.LoopbackModel._record

    def recorded(self: LoopbackModel, request: Any, connection: int) -> Any:
        arrived = time.monotonic()
        result = record(self, request, connection)
        if request.target.startswith("/v1/chat"):
            print(f"request {arrived:.6f} {len(result[0].messages)}", flush=True)
        return result

    _model.LoopbackModel._record = recorded  # type: ignore[method-assign]
    if report_done:
        end = _exchange.Exchange.end

        async def ended(self: _exchange.Exchange) -> None:
            await end(self)
            print(f"done {time.monotonic():.6f}", flush=True)

        _exchange.Exchange.end = ended  # type: ignore[method-assign]
    if not stamp:
        return
    send_chunk = _exchange.Exchange.send_chunk

    async def stamped(self: _exchange.Exchange, *, content: str | None = None, **kwargs: Any) -> None:
        if content is not None and content.strip() == "@":
            content = f" {time.monotonic():.6f}"
        await send_chunk(self, content=content, **kwargs)

    _exchange.Exchange.send_chunk = stamped  # type: ignore[method-assign]


async def serve_script(model: LoopbackModel, answer: Answer) -> None:
    """Queue what each ``script`` line of stdin asks for, until stdin closes."""
    while line := await anyio.to_thread.run_sync(sys.stdin.readline):
        command, *paths = line.split()
        assert command == "script", line
        model.enqueue(*(ToolCalls((ScriptedCall("read_file", {"path": path}),)) for path in paths), answer)
        print(f"scripted {len(paths) + 1}", flush=True)


async def main(words: int, delay_s: float, stamp: bool, report_done: bool, script: bool) -> None:
    _patch(stamp, report_done)
    text = " ".join("@" if stamp else f"w{i}" for i in range(words))
    answer = Answer(text=text, reasoning="", chunk_delay_s=delay_s)
    async with LoopbackModel() as model:
        if not script:
            model.enqueue(*(answer for _ in range(100_000)))
        print(f"url {model.base_url}", flush=True)
        if script:
            await serve_script(model, answer)
        else:
            await anyio.to_thread.run_sync(sys.stdin.read)  # until the bench closes our stdin


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=5000)
    parser.add_argument("--chunk-delay-s", type=float, default=0.0)
    parser.add_argument("--stamp", action="store_true")
    parser.add_argument("--report-done", action="store_true")
    parser.add_argument("--script", action="store_true")
    args = parser.parse_args()
    anyio.run(main, args.words, args.chunk_delay_s, args.stamp, args.report_done, args.script)
