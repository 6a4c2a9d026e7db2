"""The assembly core and the shared vocabulary are pure: no Django, no clock, no I/O, no randomness."""

from __future__ import annotations

import ast
import subprocess
import sys

from .helpers import PROJECT_ROOT

CORE_MODULES = (
    "assembly.types",
    "assembly.options",
    "assembly.selection",
    "assembly.budget",
    "assembly.rendering",
    "assembly.policy",
    "assembly.arbitration",
    "assembly.token_budget",
    "assembly.memo",
    "vocabulary",
    "vocabulary.authority",
    "vocabulary.slots",
    "vocabulary.tokens",
    "vocabulary.citation",
    "vocabulary.envelope",
    "vocabulary.errors",
    "vocabulary.escaping",
    "vocabulary.families",
    "vocabulary.limits",
    "vocabulary.text",
    "vocabulary.citation_text",
)
FORBIDDEN_IMPORTS = {
    "django",
    "rest_framework",
    "artifacts",
    "assembly",
    "powercontext",
    "time",
    "datetime",
    "random",
    "os",
    "io",
    "pathlib",
}


def test_importing_the_core_modules_loads_no_django_module():
    # The parent test process may already have Django loaded (pytest-django), so check in a fresh one.
    code = (
        "import sys\n"
        f"for name in {CORE_MODULES!r}:\n"
        "    __import__(name)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework'))\n"
        "print(','.join(loaded))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == ""


def test_core_sources_import_nothing_impure():
    for module in CORE_MODULES:
        path = PROJECT_ROOT / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = PROJECT_ROOT / module.replace(".", "/") / "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{module} imports {name}"
