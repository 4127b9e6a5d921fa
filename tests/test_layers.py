"""The package's layers, checked mechanically from the source: imports point down only, there is no import cycle,
and no layer reaches into another's ``_private`` module. With them, the house rules a test can check: no module over
500 lines, no bare task without its owner named, and the environment read for settings only in ``config``.

Layers, lowest first (a module may import its own layer's modules and any lower layer's public names)::

    ground     the package root (``__version__``; it imports nothing), errors, domain, tasks, modes, urls,
               grammar_bounds, system_prompts
    provider   the openai client factory and the offline model
    pipeline   watchdog, retries, streaming  tools   the built-in tools, the registry (beside each other)
    mcp        the MCP client: servers' connections, their tools (into tools' registry) and prompts
    checkpoints  beside mcp: files' states before a prompt changed them, the rewind (the tools' hooks feed it)
    turn       one model turn    store   durable sessions    commands   slash commands, MCP prompts as commands
               (the three beside each other: none imports another; the commands reach the turn by a protocol)
    bridge     sessions, FIFOs, prompt event streams
    acp        ACP handlers (transport-neutral)
    rpc        JSON-RPC framing, dispatcher, transports
    faces      daemon, client            then config (which hands each component its part, the daemon's too),
               then cli (which starts the daemon)

The daemon is three parts, one job each, over a common ground, put together by its package's own modules::

    daemon._exceptions, _errors, _options, _sse_frames      the ground every part may use
    daemon.server                                           the HTTP server runtime (uvicorn, connection defences)
    daemon.rest     daemon.remote                           the REST + SSE API; ACP over HTTP and WebSocket (/acp):
                                                            each may use server, neither the other
    daemon (the package and its other modules)              puts them together (the app, serving)

and a part is used through its package (``from ..server import X``), never through its private modules.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "acp_server"

RANKS: dict[str, int] = {
    "errors": 0,
    "domain": 0,
    "tasks": 0,
    "limits": 0,
    "retry_after": 0,
    "urls": 0,
    "modes": 0,
    "grammar_bounds": 0,
    "system_prompts": 0,
    "collector": 0,
    "atomic": 0,
    "frontmatter": 0,
    "provider": 1,
    "pipeline": 2,
    "tools": 2,
    "mcp": 3,
    "checkpoints": 3,
    "turn": 4,
    "store": 4,
    "commands": 4,
    "bridge": 5,
    "acp": 6,
    "rpc": 7,
    "daemon": 8,
    "client": 8,
    "config": 9,
    "cli": 10,
    "__init__": 0,
    "__main__": 11,
}


def _modules() -> dict[str, Path]:
    """Dotted module name (without the ``acp_server.`` prefix) → file."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()  # the package root is "" (its layer: "__init__")
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """Every ``acp_server`` module this file imports (absolute or relative), with its line."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    targets: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                dotted = ".".join([*base, *(node.module.split(".") if node.module else [])])
                names = [alias.name for alias in node.names]
                if node.module is None:  # from . import x
                    targets += [(f"{dotted}.{name}".strip("."), node.lineno) for name in names]
                else:
                    targets.append((dotted, node.lineno))
            elif node.module and (node.module == "acp_server" or node.module.startswith("acp_server.")):
                targets.append((node.module.removeprefix("acp_server").lstrip("."), node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("acp_server."):
                    targets.append((alias.name.removeprefix("acp_server."), node.lineno))
    return targets


def _layer(module: str) -> str:
    return module.split(".")[0] if module else "__init__"


def _graph() -> dict[str, list[tuple[str, int]]]:
    modules = _modules()
    graph: dict[str, list[tuple[str, int]]] = {}
    for module, path in modules.items():
        resolved: list[tuple[str, int]] = []
        for target, line in _imports(module, path):
            # ``from .pkg import name`` may name a submodule or an attribute: keep the longest existing module.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target != module:
                resolved.append((target, line))
        graph[module] = resolved
    return graph


def test_the_package_root_imports_nothing() -> None:
    assert _graph()[""] == []


def test_every_layer_is_ranked() -> None:
    unranked = {_layer(module) for module in _modules()} - set(RANKS)
    assert not unranked, f"give these top-level modules a rank in RANKS: {sorted(unranked)}"


def test_imports_point_down_only() -> None:
    wrong: list[str] = []
    for module, targets in _graph().items():
        layer = _layer(module)
        for target, line in targets:
            other = _layer(target)
            if other != layer and RANKS[other] >= RANKS[layer]:
                wrong.append(f"acp_server.{module}:{line} imports acp_server.{target} ({layer} → {other})")
    assert not wrong, "\n".join(wrong)


def test_no_layer_imports_another_layers_private_module() -> None:
    wrong: list[str] = []
    for module, targets in _graph().items():
        layer = _layer(module)
        for target, line in targets:
            if _layer(target) == layer:
                continue
            private = [part for part in target.split(".") if part.startswith("_")]
            if private:
                wrong.append(f"acp_server.{module}:{line} imports the private acp_server.{target}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph = {module: {target for target, _ in targets} for module, targets in _graph().items()}
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state[target] == 1:
                cycle = [*stack[stack.index(target) :], target]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if state[target] == 0:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if state[module] == 0:
            visit(module)


DAEMON_GROUND = frozenset({"daemon._exceptions", "daemon._errors", "daemon._options", "daemon._sse_frames"})
DAEMON_PARTS: dict[str, int] = {"server": 1, "rest": 2, "remote": 2}
"""The daemon's parts and their ranks (the ground is 0, the package's composition 3): equal ranks are siblings."""


def _daemon_part(module: str) -> tuple[str, int]:
    """The daemon part a ``daemon.*`` module belongs to, and its rank."""
    if module in DAEMON_GROUND:
        return "ground", 0
    part = module.split(".")[1] if module.count(".") >= 1 else ""
    if part in DAEMON_PARTS:
        return part, DAEMON_PARTS[part]
    return "composition", 3


def test_the_daemon_parts_import_down_only_and_each_other_through_their_packages() -> None:
    wrong: list[str] = []
    for module, targets in _graph().items():
        if _layer(module) != "daemon":
            continue
        part, rank = _daemon_part(module)
        for target, line in targets:
            if _layer(target) != "daemon":
                continue
            other, other_rank = _daemon_part(target)
            if other == part:
                continue
            if other_rank >= rank:
                wrong.append(f"acp_server.{module}:{line} imports acp_server.{target} ({part} → {other})")
            elif other in DAEMON_PARTS and target != f"daemon.{other}":
                wrong.append(f"acp_server.{module}:{line} imports the private acp_server.{target}")
    assert not wrong, "\n".join(wrong)


def test_the_daemon_has_its_three_parts() -> None:
    modules = _modules()
    assert {part for part in DAEMON_PARTS if f"daemon.{part}" in modules} == set(DAEMON_PARTS)
    assert set(modules) >= DAEMON_GROUND


def test_the_daemon_part_checker_sees_its_parts() -> None:
    assert _daemon_part("daemon.rest._sse") == ("rest", 2)
    assert _daemon_part("daemon.remote") == ("remote", 2)
    assert _daemon_part("daemon._errors") == ("ground", 0)
    assert _daemon_part("daemon._app") == ("composition", 3)
    assert _daemon_part("daemon") == ("composition", 3)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The import resolution itself: a relative import two levels up is found and resolved to its module."""
    fake = tmp_path / "acp_server" / "bridge"
    fake.mkdir(parents=True)
    source = fake / "_x.py"
    source.write_text("from ..acp._agent import AcpAgent\nfrom . import _y\nimport acp_server.daemon\n")
    assert _imports("bridge._x", source) == [("acp._agent", 1), ("bridge._y", 2), ("daemon", 3)]


# -- house rules a test can check ----------------------------------------------------------------------------------

MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    """One concern per module: past 500 lines a module holds more than one, and is split along its seams."""
    long = {
        name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def _calls(tree: ast.AST, attributes: set[str]) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in attributes
    ]


def test_every_bare_task_says_who_owns_it() -> None:
    """Tasks belong to task groups; where a callback forces a bare asyncio task, the line above says who owns it."""
    unowned = []
    for name, path in _modules().items():
        lines = path.read_text().splitlines()
        for call in _calls(ast.parse("\n".join(lines)), {"create_task", "ensure_future"}):
            above = lines[call.lineno - 2].strip() if call.lineno > 1 else ""
            if not above.startswith("# owner:"):
                unowned.append(f"{name}:{call.lineno}")
    assert unowned == []


ENVIRONMENT_READERS = {
    "turn._system_prompt": "SHELL, to describe the user's environment to the model (not a setting of ours)",
    "client._options": "ACP_SERVER_TOKEN: the client SDK is a program of its own, with no config of ours",
}
"""Modules outside ``config`` that read a variable, and why. Copying the environment for a child is no read, nor is
a function that takes the environment as a parameter (``store.default_state_dir(env)``: the XDG rule)."""


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr == "getenv" or (
                node.func.attr == "get" and isinstance(owner, ast.Attribute) and owner.attr == "environ"
            ):
                return True
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            return True
    return False


def test_only_config_reads_the_environment_for_settings() -> None:
    readers = {
        name
        for name, path in _modules().items()
        if not (name == "config" or name.startswith("config.")) and _reads_environment(ast.parse(path.read_text()))
    }
    assert readers == set(ENVIRONMENT_READERS)


def test_the_house_rule_checkers_see_violations() -> None:
    assert _reads_environment(ast.parse("import os\nx = os.environ.get('A')"))
    assert _reads_environment(ast.parse("import os\nx = os.environ['A']"))
    assert not _reads_environment(ast.parse("import os\nx = dict(os.environ)"))
    assert len(_calls(ast.parse("loop.create_task(f())"), {"create_task", "ensure_future"})) == 1
