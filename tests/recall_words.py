"""A small vocabulary and seeded texts and queries over it, for the tests that rank corpora through the search index.

Zipf-like: the first words are much more common, so queries mix rare and common terms.
"""

import random

WORDS = [
    "deploy",
    "release",
    "database",
    "backup",
    "migrate",
    "schema",
    "index",
    "query",
    "cache",
    "token",
    "budget",
    "scope",
    "memory",
    "entry",
    "revision",
    "citation",
    "contract",
    "client",
    "server",
    "worker",
    "queue",
    "retry",
    "timeout",
    "lock",
    "commit",
    "rollback",
    "shard",
    "replica",
    "stream",
    "event",
    "metric",
    "alert",
    "trace",
    "span",
    "log",
    "rotate",
    "archive",
    "purge",
    "compress",
    "encrypt",
    "verify",
]


def words_text(rng: random.Random) -> str:
    """3 to 25 words, the first words of WORDS much more often than the last."""
    return " ".join(rng.choices(WORDS, weights=[1 / (i + 1) for i in range(len(WORDS))], k=rng.randint(3, 25)))


def words_queries(count: int, seed: int = 11) -> list[str]:
    """``count`` queries of 1 to 6 distinct words each."""
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(1, 6))) for _ in range(count)]
