"""docs/erasure.md's commands, run as written (its blocks carry ``docs-test: skip`` for run_examples.py: they erase the
demo's data), each ``manage.py`` line through ``call_command`` on a database holding the guide's ids."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest
from django.core.management import call_command

from artifacts import services
from artifacts.models import Erasure, MemoryEntryVersion
from tests.api.conftest import engine_on  # noqa: F401 - the search index fixture
from tests.api.factories import add_experience, add_memory

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "erasure.md"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
MANAGE = ".venv/bin/python manage.py "


def guide_blocks() -> list[list[list[str]]]:
    """Per sh block of the guide, its ``manage.py`` commands as argument lists (output redirections left out)."""
    blocks = []
    for text in BLOCK.findall(GUIDE.read_text(encoding="utf-8")):
        lines = text.replace("\\\n", " ").splitlines()
        commands = [shlex.split(line[len(MANAGE) :].split(" > ")[0]) for line in lines if line.startswith(MANAGE)]
        blocks.append(commands)
    return blocks


def run(argv: list[str]) -> str:
    out = io.StringIO()
    call_command(*argv, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def demo(db):
    scope = services.scope_create(scope_id="project:demo")
    add_memory(scope, [("e1", "the vault password is hunter2", "e1-v1"), ("e2", "deploys run on fridays", "e2-v1")])
    add_experience(scope, "exp-1", "rotated hunter2")
    return scope


def test_the_guide_s_erase_commands_erase_what_they_say_and_verify_history_lists_them(demo):
    erase_block, verify_block, *_ = guide_blocks()

    printed = [run(argv) for argv in erase_block]

    assert [line.split(":")[0] for line in printed] == [
        "erasure #1 (entry_version)",
        "erasure #2 (revision)",
        "erasure #3 (scope)",
    ]
    assert set(MemoryEntryVersion.objects.values_list("body", flat=True)) == {""}
    (verify,) = verify_block
    assert "3 erasures" in run(verify)


def test_the_guide_s_index_rebuild_runs_on_a_machine_keeping_an_index(demo, engine_on):  # noqa: F811
    (rebuild,) = guide_blocks()[2]
    run(rebuild)


def test_the_guide_s_erase_again_after_a_restore_erases_the_restored_text(demo):
    *_, restore_block = guide_blocks()
    export, erase_again, verify = restore_block
    assert '"ok":true' in run(export).replace(" ", "")

    run(erase_again)

    assert MemoryEntryVersion.objects.get(version_id="e1-v1").body == ""
    assert "again after the restore" in Erasure.objects.get().reason
    assert "1 erasures" in run(verify)
