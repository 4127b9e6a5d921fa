"""``acp-server config show`` (the effective settings and where each came from) and ``acp-server setup`` (the
interactive endpoint set-up that writes the configuration file): the commands about the configuration itself.

Invariant: they never start the agent; a usage error is one line on stderr and exit 2, a secret is shown as
``***`` only.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..config import ConfigFileError, SettingsError, add_common_options, config_file, setting_sources

__all__ = ["CONFIG_COMMANDS", "add_config_commands", "run_config_command"]

CONFIG_COMMANDS = frozenset({"config", "setup"})


def add_config_commands(commands: Any) -> None:
    """Add ``config show`` and ``setup`` to the subcommands ``commands`` (argparse's ``_SubParsersAction``)."""
    config = commands.add_parser("config", help="show the effective settings and where each comes from")
    actions = config.add_subparsers(dest="config_command", metavar="{show}", required=True)
    show = actions.add_parser(
        "show",
        help="print every setting's effective value (secrets masked) and its source: flag, environment "
        "variable, configuration file line, or default",
    )
    add_common_options(show, subcommand=True)
    show.add_argument("--serve", action="store_true", help="also the settings of acp-server serve")
    from ._setup import add_setup_arguments

    setup = commands.add_parser(
        "setup", help="choose the model endpoint interactively (or with --yes), check it, write the configuration file"
    )
    add_common_options(setup, subcommand=True)
    add_setup_arguments(setup)


def _show(args: argparse.Namespace) -> int:
    try:
        rows = setting_sources(args, serve=args.serve)
        file = config_file(args, os.environ)
    except (SettingsError, ConfigFileError) as exc:
        sys.stderr.write(f"acp-server config show: {exc}\n")
        return 2
    state = "" if file.exists else " (none there: every setting comes from flags, environment or defaults)"
    profile = f", profile {file.profile}" if file.profile else ""
    out = [f"configuration file: {file.path}{state}{profile}"]
    width = max(len(option.flag) for option, _, _ in rows)
    for option, value, source in rows:
        out.append(f"  {option.flag.removeprefix('--'):<{width}}  {value}  ({source})")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def run_config_command(args: argparse.Namespace) -> int:
    """Run ``config show`` or ``setup``; the exit code."""
    if args.command == "setup":
        from ._setup import run_setup

        return run_setup(args)
    return _show(args)
