"""Per-turn cost of history: how long a prompt takes to become the model request, at 0, 100 and 400 messages.

1. **In process, the request build**: the chat messages of a 400-message history (``to_chat_messages``) and their
   JSON body (``request_body``, one ``json.dumps``), as each turn builds them; and, for reference, the openai SDK's
   parameter transform of the same messages (what ``chat.completions.create`` runs before it sends, which the
   pipeline no longer calls). Target: build ≤ 1 ms at 400 messages.
2. **Across processes, prompt → request**: the agent (``acp-server``), the endpoint (``bench/_model_server.py``)
   and this script (the client) are separate processes. A session gets its history by real prompts (each adds a
   user and an assistant message, stored in the agent's session store); then each timed prompt's delay runs from
   the instant this script writes the ``session/prompt`` line to the instant the endpoint has the whole request
   (``CLOCK_MONOTONIC``, system-wide), and the agent's CPU time per turn is read from ``/proc``. Store read,
   conversion, request build, the SDK's send: all included. Target: at 400 messages within 5 ms of 0.
   With ``--postgres URL`` (or ``--postgres auto``: a throwaway cluster as the tests start, see
   ``bench/bench_store.py``) part 2 runs again on the PostgreSQL store, and the 400-message figures are compared
   (target: PostgreSQL's within 2× of SQLite's).

Run: ``python bench/bench_turn_cpu.py [--samples 15] [--repeat 2] [--postgres URL|auto]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator

import anyio
from _endpoint import ModelProcess, model_process
from _pipe import AgentPipe, spawn

from acp_server.domain import Conversation, Message
from acp_server.pipeline import ChatRequest
from acp_server.pipeline._stream import request_body
from acp_server.turn import to_chat_messages

PROMPT_WORDS = 40
ANSWER_WORDS = 60
SIZES = (0, 100, 400)


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prompt_text(i: int) -> str:
    return " ".join(f"p{i}-{w}" for w in range(PROMPT_WORDS))


def history(n: int) -> Conversation:
    answer = " ".join(f"w{w}" for w in range(ANSWER_WORDS))
    messages = [
        Message("user", prompt_text(i // 2)) if i % 2 == 0 else Message("assistant", answer, "", "end_turn")
        for i in range(n)
    ]
    return Conversation(messages)


def best_ms(fn: object, rounds: int = 200) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best * 1000


def request_build() -> None:
    import openai
    from openai._utils import maybe_transform
    from openai.types.chat import completion_create_params

    print("1. request build, in process (best of 200):")
    for n in SIZES:
        conversation = history(n)

        def build(conversation: Conversation = conversation, text: str = prompt_text(n)) -> bytes:
            messages = to_chat_messages("You are a helpful assistant.", conversation, text)
            return request_body(ChatRequest(model="m", messages=messages))

        body = build()
        messages = to_chat_messages("You are a helpful assistant.", conversation, prompt_text(n))
        params = {"model": "m", "messages": messages, "stream": True}
        kind = completion_create_params.CompletionCreateParamsStreaming
        sdk_ms = best_ms(lambda params=params, kind=kind: maybe_transform(params, kind), 20)
        ours = best_ms(build)
        verdict = "" if n != 400 else f"  (target <= 1 ms: {'met' if ours <= 1 else 'MISSED'})"
        print(
            f"   {n:>3} messages ({len(body) / 1024:6.1f} KiB body): build {ours:6.3f} ms; "
            f"the SDK's transform alone {sdk_ms:7.3f} ms (openai {openai.__version__}){verdict}"
        )


async def timed_prompt(agent: AgentPipe, model: ModelProcess, session_id: str, i: int) -> tuple[float, float, int]:
    """(prompt → request delay in ms, agent CPU ms for the whole turn, messages the request carried)."""
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt_text(i)}]}
    cpu_before = cpu_s(agent.process.pid)
    sent = time.monotonic()
    await agent.send({"jsonrpc": "2.0", "id": f"t{i}", "method": "session/prompt", "params": prompt})
    arrived, messages = await model.next_request()
    await agent.reply(f"t{i}")
    return (arrived - sent) * 1000, (cpu_s(agent.process.pid) - cpu_before) * 1000, messages


async def across_processes(samples: int, store: str | None = None) -> dict[int, float]:
    medians: dict[int, float] = {}
    async with (
        model_process("--words", str(ANSWER_WORDS)) as model,
        spawn("--base-url", model.base_url, "--model", "m", *(["--store", store] if store else [])) as agent,
    ):
        session_id = await agent.new_session()
        count = 0  # prompts so far: the request carries system + 2 * count + the new prompt
        warm = 5
        for i in range(warm):  # imports, the SDK client, the connection
            await timed_prompt(agent, model, session_id, i)
        # a fresh session for the measured sizes: history grows by 2 messages per prompt
        session_id = str(
            (await agent.call("fresh", "session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
        )
        where = "PostgreSQL" if store else "SQLite"
        print(f"2. prompt → request across processes, {where} store (median of {samples}; agent CPU per turn):")
        for n in SIZES:
            while 2 * count < n:  # build the history with real turns
                await timed_prompt(agent, model, session_id, count)
                count += 1
            delays, cpus, sizes = [], [], []
            for _ in range(samples):
                delay, cpu, messages = await timed_prompt(agent, model, session_id, count)
                count += 1
                delays.append(delay)
                cpus.append(cpu)
                sizes.append(messages - 2)  # history messages: minus the system prompt and the new prompt
            medians[n] = statistics.median(delays)
            print(
                f"   history {min(sizes)}-{max(sizes)} messages: prompt → request p50 {medians[n]:.2f} ms "
                f"(min {min(delays):.2f}, max {max(delays):.2f}); agent CPU per turn "
                f"{sum(cpus) / len(cpus):.1f} ms (mean of the {samples} whole turns)"
            )
    extra = medians[400] - medians[0]
    print(f"   400 vs 0 messages: +{extra:.2f} ms (target <= 5 ms: {'met' if extra <= 5 else 'MISSED'})")
    return medians


@contextlib.contextmanager
def postgres(url: str | None) -> Iterator[str | None]:
    """The database to run part 2 on again: ``url``, a throwaway cluster for ``auto``, or None (SQLite only)."""
    if url != "auto":
        yield url
        return
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from tests._postgres import find_bindir, throwaway_cluster

    bindir = find_bindir()
    if bindir is None:
        print("--postgres auto: no Debian PostgreSQL (/usr/lib/postgresql/*/bin/initdb); SQLite only")
        yield None
        return
    with throwaway_cluster(bindir) as cluster:
        yield cluster.dsn


async def main(samples: int, repeat: int, url: str | None) -> None:
    shown = "" if url is None else (" --postgres auto" if url == "auto" else " --postgres URL")
    print(f"command: python bench/bench_turn_cpu.py --samples {samples} --repeat {repeat}{shown}")
    print(
        "targets: request build <= 1 ms at 400 messages; prompt → request at 400 messages within 5 ms of 0"
        + ("; PostgreSQL's 400-message figure within 2x of SQLite's" if url else "")
    )
    with postgres(url) as dsn:
        for round_ in range(1, repeat + 1):
            print(f"round {round_}:")
            request_build()
            lite = await across_processes(samples)
            if dsn is not None:
                pg = await across_processes(samples, dsn)
                ratio = pg[400] / lite[400]
                print(
                    f"   PostgreSQL / SQLite at 400 messages: {pg[400]:.2f} / {lite[400]:.2f} ms = {ratio:.2f}x "
                    f"(target <= 2x: {'met' if ratio <= 2 else 'MISSED'})"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--postgres", metavar="URL|auto", help="run part 2 on this PostgreSQL database too")
    args = parser.parse_args()
    anyio.run(main, args.samples, args.repeat, args.postgres)
