"""Parts 4 and 6 on LoCoMo: how full the budget gets, and what the two text formats cost.

Budget fill (part 4): every LoCoMo question as a prepare with the largest limits (memory 16,
experience 8) at max_bytes 1024, 2000 and 8000. A request counts when not all of its candidates fit:
its decision log has an entry skipped for ``budget`` or ``truncation_below_minimum``, or an entry included
truncated. Fill = content_bytes / max_bytes.

Format cost (part 6): the same recalled candidates (default limits, memory 6) assembled by
``assemble_markdown`` and ``assemble_legacy``: bytes at 8000, and entries fitted at 1024 and 2000.
"""

from __future__ import annotations

from bench.common import mean

FILL_BUDGETS = (1024, 2000, 8000)
FORMAT_BUDGETS = (1024, 2000, 8000)
LARGEST = {"sections": [{"family": "memory", "limit": 16}, {"family": "experience", "limit": 8}]}
NOT_FITTING = {"budget", "truncation_below_minimum"}


class AllowAll:
    def can_read(self, scope) -> bool:
        return True


def _did_not_fit(result) -> bool:
    return any(d.reason in NOT_FITTING or d.outcome == "included_truncated" for d in result.decisions)


def worker(config: dict) -> dict:
    from artifacts.recall import sources
    from assembly.runtime import assembly_options_parse, context_prepare
    from assembly.selection import assemble_legacy, assemble_markdown
    from bench import locomo
    from bench.recall_quality import write_conversations

    conversations = locomo.load(config["locomo"], limit=config.get("conversations"), max_turns=config.get("max_turns"))
    scopes = write_conversations(conversations)
    principal = AllowAll()
    largest = assembly_options_parse(LARGEST)
    defaults = assembly_options_parse({})

    fill: dict[int, dict] = {}
    for budget in FILL_BUDGETS:
        ratios, requests, truncated_entries = [], 0, 0
        for conversation in conversations:
            for question in conversation.questions:
                requests += 1
                outcome = context_prepare(
                    principal=principal,
                    scope_id=conversation.scope_id,
                    query=question.text,
                    max_bytes=budget,
                    options=largest,
                )
                result = outcome.result
                assert result.content_bytes <= budget
                if _did_not_fit(result):
                    ratios.append(result.content_bytes / budget)
                    truncated_entries += sum(d.outcome == "included_truncated" for d in result.decisions)
        fill[budget] = {
            "requests": requests,
            "not_fitting": len(ratios),
            "mean": mean(ratios) if ratios else None,
            "min": min(ratios) if ratios else None,
            "truncated_entries": truncated_entries,
        }

    sizes: dict[int, dict[str, list[int]]] = {b: {"markdown": [], "legacy": []} for b in FORMAT_BUDGETS}
    entries: dict[int, dict[str, list[int]]] = {b: {"markdown": [], "legacy": []} for b in FORMAT_BUDGETS}
    for conversation in conversations:
        scope = scopes[conversation.scope_id]
        for question in conversation.questions:
            recalled = {"memory": sources.recall_memory(scopes=[scope], query=question.text)}
            if not recalled["memory"][0]:
                continue
            for budget in FORMAT_BUDGETS:
                for name, result in (
                    ("markdown", assemble_markdown(recalled, defaults, max_bytes=budget)),
                    ("legacy", assemble_legacy(recalled, max_bytes=budget)),
                ):
                    sizes[budget][name].append(result.content_bytes)
                    entries[budget][name].append(len(result.origins))
    return {
        "fill": {str(k): v for k, v in fill.items()},
        "format": {
            str(b): {
                name: {
                    "requests": len(sizes[b][name]),
                    "mean_bytes": mean(sizes[b][name]),
                    "mean_entries": mean(entries[b][name]),
                    "total_bytes": sum(sizes[b][name]),
                    "total_entries": sum(entries[b][name]),
                }
                for name in ("markdown", "legacy")
            }
            for b in FORMAT_BUDGETS
        },
    }
