"""docs/hosts.md's table of the integrations' environment variables names every variable they read, and no other."""

import re
from pathlib import Path

from hermes_powercontext import config as hermes_config
from powercontext_client import environment

HOSTS = Path(__file__).resolve().parents[2] / "docs" / "hosts.md"
ROW = re.compile(r"^\| `(POWERCONTEXT_\w+)` \| ([^|]+) \|[^|]+\| *(?:`(POWERCONTEXT_\w+)`)? *\|$", re.MULTILINE)


def documented() -> dict[str, tuple[str, str | None]]:
    return {name: (readers.strip(), old) for name, readers, old in ROW.findall(HOSTS.read_text(encoding="utf-8"))}


def test_every_variable_hermes_reads_is_in_the_table_as_read_by_hermes():
    table = documented()
    for variable in hermes_config.ENVIRONMENT_VARIABLES.values():
        assert variable in table and "Hermes" in table[variable][0], variable


def test_the_shared_names_are_read_by_the_mcp_server_and_hermes_and_nothing_else_is_listed():
    table = documented()
    shared = {environment.URL, environment.API_KEY, environment.SCOPE}
    assert {name for name, (readers, _) in table.items() if "MCP server" in readers} == shared
    assert set(table) == shared | set(hermes_config.ENVIRONMENT_VARIABLES.values())


def test_each_deprecated_name_is_listed_beside_the_name_that_replaces_it():
    table = documented()
    assert {old: name for name, (_, old) in table.items() if old} == {
        old: new for new, old in environment.DEPRECATED_NAMES.items()
    }
