"""Calibrate hybrid recall's abstention floors for the configured embedding model, on your own scopes and questions.

Asks each question of each scope given, as recall does (BM25's best match and the query's cosine to every document
with a vector, the nearest 10,000 at most), then prints the distributions an operator judges a floor by (the cosines
of unrelated pairs, each question's best cosine and best lexical share, unrelated and related) and the floors the
rule of ``artifacts.recall.calibration`` chooses, as the POWERCONTEXT_RECALL_FUSION entry that sets them, with what
they would do: the share of unrelated questions answered empty and of related ones lost.

--unrelated: questions about nothing the scopes hold (at least 20; a file of one question per line). --related
(optional, recommended): questions the scopes do answer; the floors never lose more than --loss of them. Run it after
every document has its vector (``recall_embed``); it reads and writes nothing else.
"""

import json
from dataclasses import asdict
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from artifacts.models import Family, Scope
from artifacts.recall import calibration, fusion, hybrid
from artifacts.recall.vectors.providers import EmbeddingUnavailable, configured_provider

MIN_UNRELATED = 20
MAX_QUESTIONS = 2_000
QUANTILES = (0.5, 0.9, 0.95, 0.99, 1.0)


def _questions(path: Path | None, *, name: str) -> list[str]:
    if path is None:
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{name}: cannot read {path}: {exc}") from None
    questions = [line.strip() for line in lines if line.strip()]
    if len(questions) > MAX_QUESTIONS:
        raise CommandError(f"{name}: at most {MAX_QUESTIONS} questions, {len(questions)} given")
    return questions


def _quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    return " / ".join(f"{calibration.quantile(values, q):.3f}" for q in QUANTILES)


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--scope", action="append", required=True, help="a scope id (repeat for more)")
        parser.add_argument("--unrelated", type=Path, required=True, help="unrelated questions, one per line")
        parser.add_argument("--related", type=Path, help="questions the scopes answer, one per line")
        parser.add_argument("--family", choices=hybrid.DENSE_FAMILIES, default=Family.MEMORY)
        parser.add_argument("--target", type=float, default=calibration.ABSTAIN_TARGET, help="unrelated share empty")
        parser.add_argument("--loss", type=float, default=calibration.ABSTAIN_LOSS, help="related share lost, at most")

    def handle(self, *args, scope, unrelated, related, family, target, loss, **options):
        if not (0 < target <= 1 and 0 <= loss < 1):
            raise CommandError("--target must be within (0, 1] and --loss within [0, 1)")
        unrelated_questions = _questions(unrelated, name="--unrelated")
        related_questions = _questions(related, name="--related")
        if len(unrelated_questions) < MIN_UNRELATED:
            raise CommandError(f"--unrelated: at least {MIN_UNRELATED} questions, {len(unrelated_questions)} given")
        scopes = list(Scope.objects.filter(scope_id__in=scope))
        if missing := sorted(set(scope) - {s.scope_id for s in scopes}):
            raise CommandError(f"no such scope: {', '.join(missing)}")
        provider = configured_provider()
        if provider is None:
            raise CommandError("POWERCONTEXT_EMBEDDINGS_PROVIDER is off: there is no model to calibrate")
        pks = [s.pk for s in scopes]
        try:
            unrelated_signals, pair_cosines = self._signals(unrelated_questions, pks, family)
            related_signals, _ = self._signals(related_questions, pks, family)
        except (ImproperlyConfigured, EmbeddingUnavailable) as exc:
            raise CommandError(str(exc)) from None
        if not pair_cosines:
            raise CommandError("no document of these scopes has a vector by this model: run recall_embed first")
        floors = calibration.calibrated(unrelated_signals, related_signals, pair_cosines, target=target, loss=loss)
        model = hybrid.model_name(provider.model_id)
        write = self.stdout.write
        write(f"model {provider.model_id}, {family} of {len(scopes)} scope(s)")
        write(f"quantiles {' / '.join(f'{q:g}' for q in QUANTILES)}:")
        write(f"  unrelated pairs' cosines ({len(pair_cosines):,}): {_quantiles(pair_cosines)}")
        for label, signals in (("unrelated", unrelated_signals), ("related", related_signals)):
            write(f"  {label} questions' best cosine ({len(signals)}): {_quantiles([c for _, c in signals])}")
            write(f"  {label} questions' best lexical share: {_quantiles([s for s, _ in signals])}")
        write(
            f"floors: abstain below share {floors.abstain_share} and cosine {floors.abstain_cosine}; dense floor "
            f"{floors.dense_floor}: {floors.unrelated_empty:.1%} of unrelated answered empty, "
            f"{floors.related_lost:.1%} of related lost"
        )
        weights = fusion.weights_for(model)
        chosen = {
            "abstain_share": floors.abstain_share,
            "abstain_cosine": floors.abstain_cosine,
            "dense_floor": floors.dense_floor,
        }
        measured, hand = asdict(weights), asdict(fusion.HAND_WEIGHTS)
        entry = {name: value for name, value in measured.items() if value != hand[name]}
        write("POWERCONTEXT_RECALL_FUSION=" + json.dumps({model: entry | chosen}, sort_keys=True))

    def _signals(self, questions: list[str], pks: list[int], family: str):
        signals, cosines = [], []
        for number, question in enumerate(questions, start=1):
            for share, pair in hybrid.query_signals(scope_pks=pks, family=family, query=question).values():
                signals.append((share, max(pair, default=-1.0)))
                cosines += pair
            if number % 50 == 0:
                self.stderr.write(f"{number}/{len(questions)} questions asked")
        return signals, cosines
