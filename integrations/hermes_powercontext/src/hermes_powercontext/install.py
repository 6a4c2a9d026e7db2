"""Install the Hermes plugin shim: ``python -m hermes_powercontext install [--hermes-home DIR]``.

Hermes loads memory providers from ``$HERMES_HOME/plugins/<name>/``. The shim written there only imports
this package (which must be installed in Hermes' Python environment) and registers the provider; select it
with ``memory.provider: powercontext`` in ``$HERMES_HOME/config.yaml``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .config import config_path

PLUGIN_NAME = "powercontext"

SHIM = '''"""PowerContext memory provider for Hermes Agent (written by `python -m hermes_powercontext install`).

The implementation lives in the installed `hermes_powercontext` package; this file only registers it.
"""

from hermes_powercontext.provider import PowerContextMemoryProvider


def register(ctx):
    ctx.register_memory_provider(PowerContextMemoryProvider())
'''

MANIFEST = """name: powercontext
version: 0.1.0
description: "PowerContext: cited, budgeted historical context prepared before each turn."
"""


def default_hermes_home() -> Path:
    """The directory Hermes itself uses: ``$HERMES_HOME``, else its default (``~/.hermes``)."""
    try:
        from hermes_constants import get_hermes_home
    except ImportError:  # Hermes is installed in another environment
        home = os.environ.get("HERMES_HOME", "").strip()
        return Path(home) if home else Path.home() / ".hermes"
    return Path(get_hermes_home())


def install(hermes_home: str | os.PathLike[str]) -> Path:
    """Write (or refresh) ``$HERMES_HOME/plugins/powercontext/``; returns that directory."""
    target = Path(hermes_home) / "plugins" / PLUGIN_NAME
    target.mkdir(parents=True, exist_ok=True)
    (target / "__init__.py").write_text(SHIM, encoding="utf-8")
    (target / "plugin.yaml").write_text(MANIFEST, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hermes-powercontext", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("install", help="write the plugin shim into $HERMES_HOME/plugins/powercontext")
    command.add_argument("--hermes-home", type=Path, default=None, help="default: $HERMES_HOME or ~/.hermes")
    args = parser.parse_args(argv)
    home = args.hermes_home or default_hermes_home()
    target = install(home)
    print(f"installed the PowerContext memory provider in {target}")
    print(f"configure it in {config_path(home)} (base_url, scope_id, optional assembly) and POWERCONTEXT_API_KEY,")
    print(f"then set `memory: {{provider: {PLUGIN_NAME}}}` in {Path(home) / 'config.yaml'}")
    print("and check the set-up with `hermes memory status` (with the same HERMES_HOME)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
