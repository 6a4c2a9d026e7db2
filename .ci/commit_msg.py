#!/usr/bin/env python3
"""Refuse a commit whose subject is longer than 72 characters (CONTRIBUTING.md, "Commits").

    .ci/commit_msg.py MESSAGE_FILE    # what git's commit-msg hook passes (pre-commit runs it so)
    .ci/commit_msg.py -               # the message on standard input

The subject is what `git log --oneline` shows: the message's first paragraph with its lines joined by a space,
after the lines git strips (comments, and everything below the scissors line of `git commit -v`). A fixup!,
squash! or amend! prefix that `git commit --fixup` adds is not counted: `git rebase --autosquash` removes it.
Standard library only, so that the hook needs nothing installed.
"""

import sys
from pathlib import Path

SUBJECT_MAX_CHARACTERS = 72
AUTOSQUASH_PREFIXES = ("fixup! ", "squash! ", "amend! ")
# git commit -v appends the diff below this line (after the comment character); git drops it with the rest.
SCISSORS = "------------------------ >8 ------------------------"


def subject_of(message: str, *, comment_char: str = "#") -> str:
    """The subject git shows for ``message``: its first paragraph of uncommented lines, joined by spaces."""
    paragraph: list[str] = []
    for line in message.splitlines():
        if line.startswith(comment_char):
            if line[len(comment_char) :].strip() == SCISSORS:
                break
            continue
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            break
    return " ".join(paragraph)


def subject_problem(message: str) -> str | None:
    """Why ``message``'s subject is refused, or None. An empty message is left to git, which aborts it."""
    subject = subject_of(message)
    counted = subject
    while counted.startswith(AUTOSQUASH_PREFIXES):
        counted = counted.split(" ", 1)[1]
    if len(counted) <= SUBJECT_MAX_CHARACTERS:
        return None
    return (
        f"The commit subject is {len(counted)} characters; at most {SUBJECT_MAX_CHARACTERS} (CONTRIBUTING.md).\n"
        f"  {subject}\n"
        "Keep the subject to what changed, in the imperative; the why and the figures go in the body, after a\n"
        "blank line. git kept the message in .git/COMMIT_EDITMSG: `git commit -e -F .git/COMMIT_EDITMSG` edits it."
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    message = sys.stdin.read() if argv[0] == "-" else Path(argv[0]).read_text(encoding="utf-8", errors="replace")
    problem = subject_problem(message)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
