"""The client's and the integrations' declared dependencies hold the versions the project tests.

requirements-dev.txt pins what the test suite runs with; each project's pyproject.toml must accept that pin and
nothing from the next minor release on (untested), and the client's README says which versions those are.
"""

import tomllib
from pathlib import Path

import pytest

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:  # pip always brings its own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import Version

import dev
from tests.conftest import PROJECT_ROOT

INTEGRATIONS = PROJECT_ROOT / "integrations"
PROJECTS = sorted([PROJECT_ROOT / "client", *(path.parent for path in INTEGRATIONS.glob("*/pyproject.toml"))])


def _project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _requirement_lines(path: Path):
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-r "):
            yield from _requirement_lines(path.parent / line[3:].strip())
        else:
            yield line


def _versions_installed_by_requirements_dev() -> dict[str, list[Version]]:
    """Every version requirements-dev.txt installs, by canonical name: its pins (one per Python line where a
    marker splits them) and the editable projects' own versions."""
    versions: dict[str, list[Version]] = {}
    for line in _requirement_lines(PROJECT_ROOT / "requirements-dev.txt"):
        if line.startswith("-e "):
            project = _project(PROJECT_ROOT / line[3:].strip())
            versions.setdefault(canonicalize_name(project["name"]), []).append(Version(project["version"]))
            continue
        requirement = Requirement(line)
        [specifier] = requirement.specifier
        assert specifier.operator == "==", f"requirements-dev.txt pins exactly: {line}"
        versions.setdefault(canonicalize_name(requirement.name), []).append(Version(specifier.version))
    return versions


TESTED = _versions_installed_by_requirements_dev()
DEPENDENCIES = [
    (folder.relative_to(PROJECT_ROOT).as_posix(), dependency)
    for folder in PROJECTS
    for dependency in _project(folder)["dependencies"]
]


def test_requirements_dev_installs_every_project_editable_and_dev_py_reinstalls_when_one_changes():
    editable = {
        (PROJECT_ROOT / line[3:].strip()).resolve()
        for line in _requirement_lines(PROJECT_ROOT / "requirements-dev.txt")
        if line.startswith("-e ")
    }
    assert editable == {folder.resolve() for folder in PROJECTS}
    assert {path.parent.resolve() for path in dev.EDITABLE_PROJECTS} == editable


@pytest.mark.parametrize(("project", "dependency"), DEPENDENCIES)
def test_each_declared_range_holds_the_tested_version_and_not_the_next_minor_release(project, dependency):
    requirement = Requirement(dependency)
    name = canonicalize_name(requirement.name)
    assert name in TESTED, f"{project} depends on {requirement.name}, which requirements-dev.txt does not pin"
    for version in TESTED[name]:
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{project}: {dependency} excludes {version}, the version the project tests"
        )
        untested = Version(f"{version.major}.{version.minor + 1}")
        assert not requirement.specifier.contains(untested, prereleases=True), (
            f"{project}: {dependency} accepts {untested}, a minor release the project does not test"
        )


def test_the_client_readme_names_the_tested_versions():
    readme = (PROJECT_ROOT / "client" / "README.md").read_text(encoding="utf-8")
    for dependency in _project(PROJECT_ROOT / "client")["dependencies"]:
        name = Requirement(dependency).name
        [version] = TESTED[canonicalize_name(name)]
        assert f"`{name}` {version.major}.{version.minor} ({version} or later)" in readme
