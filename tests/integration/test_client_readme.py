"""client/README.md's examples, in order, against a live server holding the demo data."""

import re

import pytest
from django.core.management import call_command

from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.django_db(transaction=True)

README = PROJECT_ROOT / "client" / "README.md"


def test_every_python_example_of_the_client_readme_runs(live_server, capsys):
    call_command("load_context_fixtures", str(PROJECT_ROOT / "demo" / "demo.json"), verbosity=0)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 8
    script = "\n".join(blocks).replace("http://127.0.0.1:8000", live_server.url)

    exec(compile(script, str(README), "exec"), {"__name__": "client_readme"})  # noqa: S102

    printed = capsys.readouterr().out
    assert "ready lexical\nmemory 1 project:demo oncall-handover\n" in printed  # the search (the tests rank by BM25)
    assert "\nbm25 None " in printed and "\nempty [] {}\n" in printed
    assert "409 conflict" in printed
    assert "invalid_request [('assembly.sections[0].family'" in printed
    assert "404 " in printed
    assert "no context this turn" not in printed
    assert "rejected" in printed
    assert "('recalled_memory', 'rejected', 'char_budget_exceeded')" in printed  # the prompt planner's example
    assert "('base', 'project', 'recalled_memory', 'mode')" in printed
