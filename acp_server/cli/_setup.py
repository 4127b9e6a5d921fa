"""``acp-server setup``: choose the model endpoint, check it, write the configuration file.

On a terminal it asks (plain lines, no screen handling): the endpoint (the usual local servers offered, and OpenAI
and OpenRouter), the key when one is needed, the model among those the endpoint lists. With ``--yes`` it asks
nothing: the endpoint, key and model come from the flags, the environment or the file as for the agent (the model
defaults to the first one listed). Then it checks, with the same client the agent uses: that the endpoint lists its
models (and the context window the listing states, read by the agent's own rule:
:class:`~acp_server.turn.ModelCatalog`), that the model streams an answer, and that it calls a tool and answers the
tool's result (one tiny round trip). What works and what does not is said plainly, with what to change.

Invariants: the file is written only at the end, atomically (a temporary file in the same directory, mode 0600,
renamed over the old one): Ctrl-C or a failure at any point leaves the old file as it was. The other settings of an
existing file are kept (its comments are not). A key is never printed, nor echoed while typed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..atomic import atomic_write
from ..config import ConfigFileError, SettingsError, load_config, locate_config, resolve_settings

__all__ = ["ENDPOINTS", "Endpoint", "add_setup_arguments", "run_setup", "toml_document"]


@dataclass(frozen=True)
class Endpoint:
    """A well-known OpenAI-compatible endpoint the set-up offers."""

    name: str
    base_url: str
    needs_key: bool
    tools_hint: str = ""


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "Ollama",
        "http://localhost:11434/v1",
        False,
        "pick a model Ollama lists with the 'tools' capability (`ollama show MODEL`), e.g. qwen3 or llama3.1",
    ),
    Endpoint(
        "LM Studio",
        "http://localhost:1234/v1",
        False,
        "pick a model LM Studio marks as tool-capable (the hammer badge)",
    ),
    Endpoint(
        "llama.cpp's llama-server",
        "http://localhost:8080/v1",
        False,
        "start llama-server with --jinja (its chat template then handles tools)",
    ),
    Endpoint(
        "vLLM",
        "http://localhost:8000/v1",
        False,
        "start vLLM with --enable-auto-tool-choice --tool-call-parser PARSER (the parser of the model's family)",
    ),
    Endpoint("OpenAI", "https://api.openai.com/v1", True),
    Endpoint("OpenRouter", "https://openrouter.ai/api/v1", True, "pick a model OpenRouter lists with tool support"),
)

_GENERIC_TOOLS_HINT = "serve a model (or start the server with the options) that supports tool calling"

PING_TOOL = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answers pong. Call it when asked to.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


class SetupInterrupted(Exception):
    """The person gave up (Ctrl-C, Ctrl-D): nothing is written."""


def add_setup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yes", "-y", action="store_true", help="ask nothing: use --base-url/--api-key/--model (or their variables)"
    )
    parser.add_argument("--no-check", action="store_true", help="write the file without checking the endpoint")


@dataclass
class Report:
    """What the checks found: each line said as it is found; ``usable`` False when the model cannot answer."""

    lines: list[str] = field(default_factory=list)
    usable: bool = True
    tools: bool = False

    def say(self, text: str) -> None:
        self.lines.append(text)
        _out(text)


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


# -- the endpoint's answers ------------------------------------------------------------------------------------------


def _client(base_url: str, api_key: str | None) -> Any:
    from ..provider import make_openai_client

    return make_openai_client(base_url=base_url, api_key=api_key).with_options(timeout=60.0)


async def list_models(base_url: str, api_key: str | None) -> list[dict[str, Any]]:
    """The endpoint's ``GET /models`` entries (raises what the SDK raises)."""
    client = _client(base_url, api_key)
    try:
        return [entry.model_dump() async for entry in client.models.list()]
    finally:
        await client.close()


async def check_model(base_url: str, api_key: str | None, model: str, report: Report, hint: str) -> None:
    """Stream one answer offering the ``ping`` tool, then the tool's result: say what works."""
    client = _client(base_url, api_key)
    try:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": 'Call the ping tool with text "pong". Do not answer in words.'}
        ]
        try:
            text, calls, chunks = await _stream(client, model, messages)
        except Exception as exc:
            report.usable = False
            report.say(f"  ✗ streaming with tools offered failed: {_failure(exc)}")
            report.say(f"    to change: {hint}")
            return
        report.say(f"  ✓ the model streams ({chunks} chunks)")
        if not calls:
            said = f" (it said: {text.strip()[:80]!r})" if text.strip() else ""
            report.say(
                f"  ✗ the model answered without calling the tool{said}: this server does not give it tool "
                "calling, and the agent's tools (reading, editing, running commands) will not work"
            )
            report.say(f"    to change: {hint}")
            return
        call = calls[0]
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},  # "", not null: some servers refuse null
            {"role": "tool", "tool_call_id": call["id"], "content": "pong"},
        ]
        try:
            text, _, _ = await _stream(client, model, messages)
        except Exception as exc:
            report.say(f"  ✗ the model called the tool but its result was refused: {_failure(exc)}")
            report.say(f"    to change: {hint}")
            return
        report.tools = True
        report.say("  ✓ the model calls tools and answers their results")
    finally:
        await client.close()


async def _stream(client: Any, model: str, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], int]:
    """One streamed chat request: its text, its complete tool calls and how many chunks came."""
    stream = await client.chat.completions.create(
        model=model, messages=messages, tools=[PING_TOOL], stream=True, max_tokens=512
    )
    text, chunks = "", 0
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            delta = choice.delta
            text += delta.content or ""
            for part in delta.tool_calls or ():
                call = calls.setdefault(
                    part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    if chunks == 0:
        raise RuntimeError("the stream ended without a chunk")
    done = [call for _, call in sorted(calls.items()) if call["function"]["name"]]
    for number, call in enumerate(done):
        call["id"] = call["id"] or f"call_{number}"
    return text, done, chunks


def _failure(exc: BaseException) -> str:
    """A failure in one line, never with a key (the SDK's messages carry none; the URL is shown without userinfo)."""
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", None) or exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    if status == 401:
        return "the endpoint refused the key (HTTP 401)"
    if status is not None:
        return f"HTTP {status}: {message}"
    if type(exc).__name__ in ("APIConnectionError", "ConnectError"):
        return "nothing answers there (is the server running?)"
    if type(exc).__name__ in ("APITimeoutError", "TimeoutError"):
        return "no answer in time"
    return f"{type(exc).__name__}: {message}"


# -- questions ------------------------------------------------------------------------------------------------------


def _ask(prompt: str, *, secret: bool = False) -> str:
    """One answer from the terminal (a secret without echo); Ctrl-D is giving up."""
    with _no_echo() if secret else contextlib.nullcontext():  # echo off before the prompt invites typing
        sys.stdout.write(prompt)
        sys.stdout.flush()
        line = sys.stdin.readline()
    if secret:
        sys.stdout.write("\n")
    if not line:
        raise SetupInterrupted()
    return line.strip()


@contextlib.contextmanager
def _no_echo() -> Iterator[None]:
    import termios

    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    new = list(old)
    new[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSADRAIN, new)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


def _choose_endpoint(current: str | None) -> tuple[str, Endpoint | None]:
    _out("Where is the model? An OpenAI-compatible endpoint:")
    for number, endpoint in enumerate(ENDPOINTS, 1):
        _out(f"  {number}) {endpoint.name:<26} {endpoint.base_url}")
    _out(f"  {len(ENDPOINTS) + 1}) another URL")
    keep = f" [Enter: {current}]" if current else ""
    while True:
        answer = _ask(f"Choose 1-{len(ENDPOINTS) + 1} or type a URL{keep}: ")
        if not answer and current:
            return current, _known(current)
        if answer.isdigit() and 1 <= int(answer) <= len(ENDPOINTS):
            endpoint = ENDPOINTS[int(answer) - 1]
            return endpoint.base_url, endpoint
        if answer.isdigit() and int(answer) == len(ENDPOINTS) + 1:
            answer = _ask("URL (e.g. http://host:port/v1): ")
        if answer.startswith(("http://", "https://")):
            return answer.rstrip("/"), _known(answer)
        _out("  not a choice nor an http:// or https:// URL")


def _known(url: str) -> Endpoint | None:
    return next((e for e in ENDPOINTS if e.base_url == url.rstrip("/")), None)


def _choose_model(names: list[str], windows: Mapping[str, int | None], current: str | None) -> str:
    _out("Models the endpoint lists:")
    for number, name in enumerate(names, 1):
        window = windows.get(name)
        _out(f"  {number}) {name}" + (f"  (context window {window} tokens)" if window else ""))
    default = current if current in names else names[0]
    while True:
        answer = _ask(f"Choose 1-{len(names)} or type a name [Enter: {default}]: ")
        if not answer:
            return default
        if answer.isdigit() and 1 <= int(answer) <= len(names):
            return names[int(answer) - 1]
        if not answer.isdigit():
            return answer
        _out("  not a choice")


# -- the file -------------------------------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise ValueError(f"cannot write {type(value).__name__} values")


def toml_document(document: Mapping[str, Any]) -> str:
    """``document`` (scalars and lists at the top level, ``profiles.NAME`` tables of them) as TOML."""
    lines = ["# acp-server's configuration (acp-server setup wrote it; acp-server config show prints it)"]
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in document.items():
        if key == "profiles" and isinstance(value, Mapping):
            tables += [(f"profiles.{json.dumps(name)}", table) for name, table in value.items()]
        elif isinstance(value, Mapping):
            tables.append((json.dumps(key), value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for name, table in tables:
        lines += ["", f"[{name}]", *(f"{key} = {_toml_value(value)}" for key, value in table.items())]
    return "\n".join(lines) + "\n"


def write_config(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically, mode 0600 (the directory made 0700 when it is new)."""
    text = toml_document(document)
    tomllib.loads(text)  # what is written reads back
    atomic_write(str(path), text.encode())


def _updated(path: Path, profile: str | None, values: Mapping[str, Any]) -> dict[str, Any]:
    """The existing file's document with ``values`` set (at the top level, or in ``[profiles.<profile>]``); a key
    set to None is removed."""
    try:
        document: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        document = {}
    except (OSError, ValueError) as exc:
        raise ConfigFileError(f"{path}: cannot update it ({exc}); fix or move it first") from None
    table = document
    if profile is not None:
        table = document.setdefault("profiles", {}).setdefault(profile, {})
    for key, value in values.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return document


# -- the command ----------------------------------------------------------------------------------------------------


def run_setup(args: argparse.Namespace) -> int:
    """``acp-server setup``: 0 written, 1 the endpoint cannot be used (nothing written), 2 a usage error, 130
    interrupted (nothing written)."""
    path, _ = locate_config(getattr(args, "config", None), os.environ)
    try:
        return _setup(args, path)
    except (KeyboardInterrupt, SetupInterrupted):
        sys.stdout.write(f"\nsetup interrupted: {path} is unchanged\n")
        return 130
    except (SettingsError, ConfigFileError) as exc:
        sys.stderr.write(f"acp-server setup: {exc}\n")
        return 2


def _setup(args: argparse.Namespace, path: Path) -> int:
    profile: str | None = getattr(args, "profile", None) or None
    current = load_config(path, required=False)  # setup may create the file, or the profile
    if profile is not None and current.exists:
        with contextlib.suppress(ConfigFileError):
            current = load_config(path, required=False, profile=profile)
    args._config_file = current
    settings = resolve_settings(args)  # the flags, variables and the current file, as the agent reads them
    interactive = not args.yes
    if interactive and not sys.stdin.isatty():
        raise SettingsError("setup asks questions on a terminal; elsewhere pass --base-url URL [--model NAME] --yes")
    base_url, api_key, model = settings.base_url, settings.api_key, settings.model
    endpoint = _known(base_url) if base_url else None
    if interactive:
        _out(f"acp-server setup: writes {path}")
        base_url, endpoint = _choose_endpoint(base_url)
        if endpoint is not None and endpoint.needs_key:
            kept = " [Enter: keep the one configured]" if api_key else ""
            api_key = _ask(f"API key for {endpoint.name}{kept}: ", secret=True) or api_key
        elif endpoint is not None and not endpoint.needs_key:
            api_key = None
    if not base_url:
        if not api_key:
            raise SettingsError(
                "no endpoint: pass --base-url URL (and --api-key for a hosted one), or run setup on a terminal"
            )
        base_url = "https://api.openai.com/v1"
    hint = endpoint.tools_hint if endpoint and endpoint.tools_hint else _GENERIC_TOOLS_HINT
    report = Report()
    if not args.no_check:
        model, api_key = _models_and_choice(base_url, api_key, model, interactive, report)
        if model is None:
            return 1
        _out(f"Checking {model!r}:")
        anyio.run(check_model, base_url, api_key, model, report, hint)
        anyway = interactive and not report.usable and _ask("Write it anyway? [y/N] ").lower() in ("y", "yes")
        if not report.usable and not anyway:
            _out(f"nothing written: {path} is unchanged")
            return 1
    elif model is None:
        raise SettingsError("--no-check needs --model NAME (the models are not listed without asking the endpoint)")
    values = {"base-url": base_url, "api-key": api_key or None, "model": model}
    write_config(path, _updated(path, getattr(args, "profile", None), values))
    where = f" (profile {args.profile})" if getattr(args, "profile", None) else ""
    _out(
        f"wrote {path}{where}: model {model!r} at {base_url}"
        + ("" if report.tools or args.no_check else " — without tool calling, see above")
    )
    return 0


def _models_and_choice(
    base_url: str, api_key: str | None, model: str | None, interactive: bool, report: Report
) -> tuple[str | None, str | None]:
    """List the endpoint's models (asking for a key when it wants one), say their windows, pick one: the model
    (None: none) and the key."""
    from ..turn import ModelCatalog

    while True:
        try:
            entries = anyio.run(list_models, base_url, api_key)
            break
        except Exception as exc:
            failure = _failure(exc)
            report.say(f"  ✗ GET {base_url}/models: {failure}")
            if interactive and getattr(exc, "status_code", None) == 401:
                api_key = _ask("API key: ", secret=True)
                continue
            if model is not None:
                report.say(f"  the model list is not needed: {model!r} as asked")
                return model, api_key
            return (_ask("Model name: ") or None) if interactive else None, api_key
    names = [entry["id"] for entry in entries if isinstance(entry.get("id"), str) and entry["id"]]
    if not names:
        report.say(f"  ✗ {base_url}/models lists no model")
        return model or ((_ask("Model name: ") or None) if interactive else None), api_key
    catalog = ModelCatalog(names[0])
    catalog.learn(entries)
    windows = {name: catalog.context_window(name) for name in names}
    report.say(f"  ✓ the endpoint lists {len(names)} model{'s' if len(names) != 1 else ''}")
    chosen = _choose_model(names, windows, model) if interactive else (model or names[0])
    window = catalog.context_window(chosen)
    report.say(
        f"  context window of {chosen!r}: "
        + (f"{window} tokens" if window else "not stated by the endpoint (set context-window in the file if known)")
    )
    return chosen, api_key
