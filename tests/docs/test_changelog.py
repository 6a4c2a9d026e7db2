"""CHANGELOG.md keeps the form of Keep a Changelog 1.1.0: Unreleased on top, then each release as
`## [x.y.z] - YYYY-MM-DD`, newest first, with changes under the form's own headings."""

import datetime
import re
import subprocess

import pytest

from tests.conftest import PROJECT_ROOT

CHANGELOG = (PROJECT_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
RELEASE = re.compile(r"## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})")
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def _sections() -> list[tuple[str, str]]:
    """Each level-2 heading of the changelog with the text below it, in order."""
    parts = re.split(r"^(## .*)$", CHANGELOG, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def _releases() -> list[tuple[tuple[int, int, int], datetime.date, str]]:
    releases = []
    for heading, body in _sections()[1:]:
        match = RELEASE.fullmatch(heading)
        assert match, f"not a release heading `## [x.y.z] - YYYY-MM-DD`: {heading!r}"
        version = tuple(int(part) for part in match.group(1, 2, 3))
        releases.append((version, datetime.date.fromisoformat(match.group(4)), body))
    return releases


def test_the_changelog_opens_with_its_title_and_unreleased_is_the_first_section():
    assert CHANGELOG.startswith("# Changelog\n")
    assert "https://keepachangelog.com/en/1.1.0/" in CHANGELOG
    assert _sections()[0][0] == "## [Unreleased]"


def test_every_release_heading_has_a_version_and_a_date_and_releases_run_newest_first():
    releases = _releases()
    assert len(releases) >= 1
    versions = [version for version, _, _ in releases]
    dates = [date for _, date, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert dates == sorted(dates, reverse=True)


@pytest.mark.parametrize(("heading", "body"), _sections(), ids=[heading for heading, _ in _sections()])
def test_each_section_lists_its_changes_under_the_forms_kinds_each_at_most_once(heading, body):
    kinds = re.findall(r"^### (.*)$", body, flags=re.MULTILINE)
    assert kinds, f"{heading} lists no change"
    assert set(kinds) <= set(KINDS), f"{heading}: {kinds} (Keep a Changelog's kinds: {KINDS})"
    assert len(kinds) == len(set(kinds))
    for kind, entries in zip(kinds, re.split(r"^### .*$", body, flags=re.MULTILINE)[1:], strict=True):
        assert re.search(r"^- \S", entries, flags=re.MULTILINE), f"{heading}, {kind}: no entry"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_each_reconstructed_release_names_the_last_commit_of_main_on_its_day():
    try:
        shallow = _git("rev-parse", "--is-shallow-repository") == "true"
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the commits cannot be looked up")
    if shallow:
        pytest.skip("a shallow clone lacks the history the releases were reconstructed from")
    named = 0
    for version, date, body in _releases():
        match = re.search(r"^Last commit: `([0-9a-f]{7,40})`\.", body, flags=re.MULTILINE)
        if match is None:  # a release made from now on may be tagged instead
            continue
        named += 1
        last = _git("rev-list", "-1", "--first-parent", f"--before={date} 23:59:59 +0000", "HEAD")
        assert last.startswith(match.group(1)), f"{version} - {date}: the day ended at {last[:7]}"
    assert named >= 1
