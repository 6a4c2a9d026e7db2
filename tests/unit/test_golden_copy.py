"""tests/golden is the repository's own copy of the project's golden files, kept byte-identical."""

import pytest

from tests.conftest import GOLDEN, PROJECT_ROOT

UPSTREAM = PROJECT_ROOT.parent / "shared" / "golden"


def test_the_golden_copy_holds_every_case_of_its_readme():
    readme = (GOLDEN / "README.md").read_text(encoding="utf-8")
    for case in ("guide", "defaults", "memory-only", "sections-empty", "legacy"):
        assert f"`{case}-" in readme
        for language in ("en", "zh"):
            assert (GOLDEN / f"{case}-{language}.request.json").is_file()
            assert (GOLDEN / f"{case}-{language}.response.json").is_file()


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="no project golden folder beside this clone")
def test_the_golden_copy_is_byte_identical_to_the_project_golden_files():
    upstream = {path.name: path.read_bytes() for path in UPSTREAM.iterdir() if path.is_file()}
    copy = {path.name: path.read_bytes() for path in GOLDEN.iterdir() if path.is_file()}
    assert copy == upstream
