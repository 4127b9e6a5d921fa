"""Settings shared by every face (stdio agent, ``ask``, ``serve``): command-line flags with environment fallbacks.

Precedence: flag > environment variable > configuration file (``_file.py``) > default. An invalid value is a usage
error (exit 2) that names the flag, variable or file line; nothing is started. The package's parts:
``_options.py`` (the table of every setting), ``_file.py`` (the configuration file),
``_parsers.py`` (their values' parsers), ``_settings.py`` (the resolved dataclasses, and each component's part of
them: ``stream_policy()``, ``model_settings()``, ``bridge_arguments()``, ``daemon_options()``...),
``_secrets.py`` (which settings are secrets), ``_args.py`` (flags and environment resolved; the one reader of the
settings' variables). Defaults are the components' own (see ``_settings.py``).
"""

from ._args import (
    SettingsError,
    add_common_options,
    add_serve_options,
    config_file,
    resolve_settings,
    serve_settings_from_args,
    setting_sources,
    settings_from_args,
    was_given,
)
from ._file import (
    CONFIG_ENV,
    PROFILE_ENV,
    ConfigFile,
    ConfigFileError,
    config_key,
    default_config_path,
    load_config,
    locate_config,
)
from ._options import OPTIONS, SERVE_OPTIONS, Option, option_table
from ._parsers import LOG_LEVELS, MAX_SYSTEM_PROMPT_BYTES
from ._secrets import SECRET_OPTIONS, store_password
from ._settings import BridgeArguments, ServeSettings, Settings

__all__ = [
    "CONFIG_ENV",
    "LOG_LEVELS",
    "MAX_SYSTEM_PROMPT_BYTES",
    "OPTIONS",
    "PROFILE_ENV",
    "SECRET_OPTIONS",
    "SERVE_OPTIONS",
    "BridgeArguments",
    "ConfigFile",
    "ConfigFileError",
    "Option",
    "ServeSettings",
    "Settings",
    "SettingsError",
    "add_common_options",
    "add_serve_options",
    "config_file",
    "config_key",
    "default_config_path",
    "load_config",
    "locate_config",
    "option_table",
    "resolve_settings",
    "serve_settings_from_args",
    "setting_sources",
    "settings_from_args",
    "store_password",
    "was_given",
]
