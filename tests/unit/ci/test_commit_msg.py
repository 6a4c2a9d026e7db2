"""The commit-msg check (.ci/commit_msg.py), run as git's commit-msg hook runs it: a message file, or stdin."""

import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / ".ci" / "commit_msg.py"


def _check(tmp_path, message: str) -> subprocess.CompletedProcess:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True, timeout=60)


def test_a_subject_of_72_characters_passes_and_one_of_73_is_refused_with_its_length(tmp_path):
    assert _check(tmp_path, "a" * 72 + "\n").returncode == 0
    refused = _check(tmp_path, "Add " + "b" * 69 + "\n")
    assert refused.returncode == 1
    assert "The commit subject is 73 characters; at most 72 (CONTRIBUTING.md)." in refused.stderr
    assert "Add " + "b" * 69 in refused.stderr


def test_a_long_body_after_a_blank_line_is_not_the_subject(tmp_path):
    message = "Bound the history page in bytes\n\n" + "Why and the figures. " * 20 + "\n"
    assert _check(tmp_path, message).returncode == 0


def test_lines_without_a_blank_line_between_them_are_one_subject_as_git_log_shows_it(tmp_path):
    first, second = "Bound the history page in bytes, and", "the exact revision read in pages of entries"
    refused = _check(tmp_path, f"{first}\n{second}\n\nBody.\n")
    assert refused.returncode == 1
    assert f"The commit subject is {len(first) + 1 + len(second)} characters" in refused.stderr
    assert f"  {first} {second}\n" in refused.stderr


def test_characters_are_counted_not_bytes(tmp_path):
    assert _check(tmp_path, "記" * 72 + "\n").returncode == 0
    assert _check(tmp_path, "記" * 73 + "\n").returncode == 1


def test_git_comment_lines_and_the_verbose_diff_below_the_scissors_are_not_counted(tmp_path):
    message = (
        "# a comment git strips, longer than the limit: " + "c" * 80 + "\n"
        "Refuse a duplicate key\n"
        "# Please enter the commit message for your changes.\n"
        "# ------------------------ >8 ------------------------\n"
        "diff --git a/x b/x\n" + "+" + "d" * 200 + "\n"
    )
    assert _check(tmp_path, message).returncode == 0


@pytest.mark.parametrize("prefix", ["fixup! ", "squash! ", "amend! ", "fixup! fixup! "])
def test_the_prefix_git_commit_fixup_adds_is_not_counted(tmp_path, prefix):
    assert _check(tmp_path, prefix + "e" * 72 + "\n").returncode == 0
    assert _check(tmp_path, prefix + "e" * 73 + "\n").returncode == 1


def test_an_empty_message_is_left_to_git_which_aborts_it(tmp_path):
    assert _check(tmp_path, "# only comments\n\n").returncode == 0


def test_the_message_can_come_on_standard_input():
    ok = subprocess.run([sys.executable, SCRIPT, "-"], input="Short\n", capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0
    long = subprocess.run([sys.executable, SCRIPT, "-"], input="f" * 80, capture_output=True, text=True, timeout=60)
    assert long.returncode == 1
    assert "80 characters" in long.stderr


def test_without_exactly_one_argument_it_prints_its_usage():
    completed = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert ".ci/commit_msg.py MESSAGE_FILE" in completed.stderr
