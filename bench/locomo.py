"""LoCoMo loader: read-only from `bench/run.py --locomo PATH`, by default ../shared/data/locomo/locomo-dev.json
beside the repository (CC BY-NC 4.0, evaluation only; not part of the repository).

Each conversation becomes one scope; each dialogue turn one memory entry whose id is the turn's
dialogue id (``D1:3``) and whose body is ``Speaker: text`` (plus the image caption when the turn shares
an image, as ``[shares <caption>]``). Each question whose evidence resolves to at least one turn of its
conversation is a query. Evidence strings may hold several ids separated by ``;``, commas or spaces.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench.common import LOCOMO_PATH

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    body: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def scope_id(self) -> str:
        return f"locomo:{self.sample_id}"


def _turn_body(turn: dict) -> str:
    body = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        body += f" [shares {caption}]"
    return body


def load(
    path: Path | str = LOCOMO_PATH, *, limit: int | None = None, max_turns: int | None = None
) -> list[Conversation]:
    """The conversations of the LoCoMo file at ``path`` (the first ``limit`` when given), turns in dialogue order.

    ``max_turns`` keeps only each conversation's first turns (smoke runs), and the questions whose
    evidence resolves among them.
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations = []
    for sample in raw[:limit]:
        talk = sample["conversation"]
        sessions = sorted(
            (key for key in talk if re.fullmatch(r"session_\d+", key)), key=lambda key: int(key.split("_")[1])
        )
        turns: list[Turn] = []
        seen: set[str] = set()
        for key in sessions:
            for turn in talk[key]:
                if turn["dia_id"] in seen:  # keep the first occurrence of a (rare) duplicated id
                    continue
                if max_turns is not None and len(turns) >= max_turns:
                    break
                seen.add(turn["dia_id"])
                turns.append(Turn(turn["dia_id"], _turn_body(turn)))
        questions = []
        for qa in sample["qa"]:
            ids = {part for item in qa.get("evidence", []) for part in _EVIDENCE_SPLIT.split(str(item)) if part}
            resolved = frozenset(ids & seen)
            if resolved:
                questions.append(Question(str(qa["question"]), int(qa["category"]), resolved))
        conversations.append(Conversation(sample["sample_id"], tuple(turns), tuple(questions)))
    return conversations
