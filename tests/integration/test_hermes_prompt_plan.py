"""The Hermes provider plans its injected memory block with the client's prompt planner (issue 35), against a
mocked PowerContext: the block is kept or dropped whole under its budgets, the segment decisions are exposed and
logged, and one question's recalled memory never reaches another question or session."""

import logging

import httpx
import pytest
from agent.memory_manager import MemoryManager, build_memory_context_block
from hermes_powercontext.config import (
    DEFAULT_PROMPT_MAX_TOKENS,
    ConfigError,
    ProviderConfig,
    load_config,
    parse_config,
)
from hermes_powercontext.memory_block import MEMORY_SEGMENT
from hermes_powercontext.provider import PowerContextMemoryProvider
from powercontext_client import OMITTED, AssemblyOptions, SegmentDecision, SelectionOptions, estimate_context_tokens

from tests.integration.test_hermes_provider import GUIDE, GUIDE_ASSEMBLY, KEY, QUERY, FakePowerContext, make_provider

CONTENT = GUIDE["content"]
TOKENS = estimate_context_tokens(CONTENT)
OTHER = "Who is on call for payments this week?"


def counting_provider(token_counter, **overrides) -> PowerContextMemoryProvider:
    """A provider of the guide assembly that counts tokens with ``token_counter``."""
    config = ProviderConfig(
        base_url="http://powercontext.test",
        api_key=KEY,
        scope_id="project:demo",
        assembly=AssemblyOptions.model_validate(GUIDE_ASSEMBLY),
        **overrides,
    )
    provider = PowerContextMemoryProvider(
        config=config, transport=httpx.MockTransport(FakePowerContext()), token_counter=token_counter
    )
    provider.initialize("session-1", hermes_home="/nonexistent")
    return provider


def turn(provider, number: int, query: str = QUERY) -> str:
    provider.on_turn_start(number, query)
    return provider.prefetch(query)


def test_by_default_the_prepared_text_fits_and_is_injected_unchanged_with_its_decision():
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY)
    assert turn(provider, 1) == CONTENT
    assert provider.segment_decisions == (
        SegmentDecision(
            MEMORY_SEGMENT, False, "included", "within_budget", len(CONTENT), TOKENS, "powercontext:project:demo"
        ),
    )
    assert provider.last_plan.max_tokens == DEFAULT_PROMPT_MAX_TOKENS


def test_a_block_over_the_token_budget_is_dropped_whole_and_the_reason_logged(caplog):
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY, prompt_max_tokens=TOKENS - 1)
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        assert turn(provider, 1) == ""
    (decision,) = provider.segment_decisions
    assert (decision.status, decision.reason, decision.tokens) == ("rejected", "token_budget_exceeded", TOKENS)
    assert "PowerContext memory not injected: token_budget_exceeded" in caplog.text
    assert provider.last_injected is None


def test_a_block_exactly_at_the_token_budget_is_injected():
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY, prompt_max_tokens=TOKENS)
    assert turn(provider, 1) == CONTENT


def test_a_block_over_the_character_budget_is_dropped_whole():
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY, prompt_max_chars=len(CONTENT) - 1)
    assert turn(provider, 1) == ""
    assert provider.segment_decisions[0].reason == "char_budget_exceeded"
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY, prompt_max_chars=len(CONTENT))
    assert turn(provider, 1) == CONTENT


def test_without_budgets_any_validated_text_is_injected():
    big = "word " * 4000
    payload = {"schema": GUIDE["schema"], "status": "ready", "content": big, "content_bytes": len(big)}
    fake = FakePowerContext((200, payload))
    assert turn(make_provider(fake, max_bytes=20000), 1) == ""  # over the default 3000 units
    assert turn(make_provider(fake, max_bytes=20000, prompt_max_tokens=None), 1) == big


def test_a_real_tokenizer_decides_the_token_budget():
    counted: list[str] = []

    def characters(text: str) -> int:  # stands in for len(encoding.encode(text))
        counted.append(text)
        return len(text)

    provider = counting_provider(characters, prompt_max_tokens=len(CONTENT) - 1)
    assert turn(provider, 1) == ""
    assert CONTENT in counted
    assert provider.segment_decisions[0].tokens == len(CONTENT)
    assert turn(counting_provider(characters, prompt_max_tokens=len(CONTENT)), 1) == CONTENT


def test_a_faulty_token_counter_never_breaks_the_turn(caplog):
    provider = counting_provider(lambda text: "many")
    with caplog.at_level(logging.ERROR, logger="hermes_powercontext"):
        assert turn(provider, 1) == ""
    assert "prompt planning failed" in caplog.text


def test_an_empty_prepare_is_logged_as_an_empty_segment_without_a_warning(caplog):
    empty = {"schema": GUIDE["schema"], "status": "empty", "content": None, "content_bytes": 0}
    provider = make_provider(FakePowerContext((200, empty)), assembly={"sections": []})
    with caplog.at_level(logging.DEBUG, logger="hermes_powercontext"):
        assert turn(provider, 1) == ""
    assert [(d.status, d.reason) for d in provider.segment_decisions] == [("rejected", "empty")]
    assert "not injected" not in caplog.text
    assert f"PowerContext prompt segment {MEMORY_SEGMENT}" in caplog.text


def test_hermes_memory_manager_injects_the_planned_block_or_nothing():
    for budget, expected in ((None, CONTENT), (TOKENS - 1, "")):
        provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY, prompt_max_tokens=budget)
        manager = MemoryManager()
        manager.add_provider(provider)
        manager.on_turn_start(1, QUERY)
        prefetched = manager.prefetch_all(QUERY)
        assert prefetched == expected
        assert (build_memory_context_block(prefetched) != "") == bool(expected)
        manager.shutdown_all()


# --- recalled memory lives for one question -------------------------------------------------------------------


def test_the_recalled_memory_is_held_for_the_turns_scope_and_query():
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY)
    turn(provider, 1)
    assert provider.recalled_memory.key == ("project:demo", QUERY)
    assert provider.recalled_memory.segment("project:demo", QUERY).text == CONTENT


def test_a_new_question_clears_the_previous_memory_before_its_own_prepare():
    answers = iter([GUIDE, None])

    def answer(request):
        body = next(answers)
        if body is None:
            raise httpx.ConnectError("down", request=request)
        return httpx.Response(200, json=body)

    provider = make_provider(FakePowerContext(answer), assembly=GUIDE_ASSEMBLY, prefetch_on_turn_start=False)
    assert turn(provider, 1) == CONTENT
    provider.on_turn_start(2, OTHER)
    assert provider.recalled_memory.key is None  # cleared before anything is asked for the new question
    assert provider.prefetch(OTHER) == ""  # its prepare fails: nothing of question 1 is injected instead
    assert provider.recalled_memory.segment("project:demo", QUERY).is_empty


def test_the_same_question_again_keeps_its_memory_until_the_new_prepare_replaces_it():
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY, prefetch_on_turn_start=False)
    turn(provider, 1)
    provider.on_turn_start(2, QUERY)
    assert provider.recalled_memory.key == ("project:demo", QUERY)


@pytest.mark.parametrize("end", ["session switch", "shutdown"])
def test_a_session_switch_or_shutdown_clears_the_recalled_memory(end):
    provider = make_provider(FakePowerContext(), assembly=GUIDE_ASSEMBLY)
    turn(provider, 1)
    if end == "shutdown":
        provider.shutdown()
    else:
        provider.on_session_switch("session-2", reset=True)
    assert provider.recalled_memory.key is None


def test_a_failed_prepare_clears_the_recalled_memory():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY)
    turn(provider, 1)
    fake.answer = (503, {"error": {"code": "service_unavailable", "message": "x", "fields": []}})
    assert turn(provider, 2) == ""
    assert provider.recalled_memory.key is None
    assert provider.segment_decisions == ()  # no stale decisions of the previous turn


# --- configuration ----------------------------------------------------------------------------------------------

BASE = {"base_url": "http://x", "api_key": KEY, "scope_id": "s"}


def test_prompt_budgets_default_to_3000_tokens_and_no_character_limit():
    config = parse_config(BASE)
    assert (config.prompt_max_tokens, config.prompt_max_chars) == (3000, None)
    assert parse_config(BASE | {"prompt_max_tokens": None}).prompt_max_tokens is None
    assert parse_config(BASE | {"prompt_max_chars": 4000}).prompt_max_chars == 4000


BASE_ENVIRON = {"POWERCONTEXT_URL": "http://x", "POWERCONTEXT_SCOPE": "s", "POWERCONTEXT_API_KEY": KEY}


def test_prompt_budgets_come_from_the_environment(tmp_path):
    environ = BASE_ENVIRON | {"POWERCONTEXT_PROMPT_MAX_TOKENS": "null", "POWERCONTEXT_PROMPT_MAX_CHARS": "6000"}
    config = load_config(tmp_path, environ=environ)
    assert (config.prompt_max_tokens, config.prompt_max_chars) == (None, 6000)


@pytest.mark.parametrize("value", [0, -5, 1.5, True, "100"])
@pytest.mark.parametrize("key", ["prompt_max_tokens", "prompt_max_chars"])
def test_invalid_prompt_budgets_are_refused(key, value):
    with pytest.raises(ConfigError, match=key):
        parse_config(BASE | {key: value})


def test_max_bytes_null_in_the_environment_is_still_refused(tmp_path):
    with pytest.raises(ConfigError):
        load_config(tmp_path, environ=BASE_ENVIRON | {"POWERCONTEXT_MAX_BYTES": "null"})


# --- server-side selection, sent only when configured -----------------------------------------------------------

SELECTION = {"policy": "authority-v1", "max_tokens": 600}


def test_a_configured_selection_is_sent_beside_the_assembly():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY, selection=SelectionOptions.model_validate(SELECTION))
    assert turn(provider, 1) == CONTENT
    assert fake.bodies == [
        {"scope_id": "project:demo", "query": QUERY, "assembly": GUIDE_ASSEMBLY} | {"selection": SELECTION}
    ]


def test_without_a_configured_selection_none_is_sent():
    fake = FakePowerContext()
    turn(make_provider(fake, assembly=GUIDE_ASSEMBLY), 1)
    assert "selection" not in fake.bodies[0]


def test_a_selection_change_is_a_new_prepare_never_the_old_text():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY, freeze_per_turn=False)
    turn(provider, 1)
    provider.configure(assembly=GUIDE_ASSEMBLY, selection=SELECTION)
    provider.prefetch(QUERY)
    assert [body.get("selection") for body in fake.bodies] == [None, SELECTION]


def test_selection_comes_from_the_file_or_the_environment(tmp_path):
    assert parse_config(BASE | {"assembly": {}, "selection": SELECTION}).selection == SelectionOptions(
        policy="authority-v1", max_tokens=600
    )
    assert parse_config(BASE | {"assembly": {}, "selection": None}).selection is OMITTED
    environ = BASE_ENVIRON | {"POWERCONTEXT_ASSEMBLY": "{}", "POWERCONTEXT_SELECTION": '{"policy": "authority-v1"}'}
    assert load_config(tmp_path, environ=environ).selection == SelectionOptions(policy="authority-v1")


@pytest.mark.parametrize(
    "raw",
    [
        {"selection": SELECTION},  # without assembly
        {"assembly": {}, "selection": {"policy": "other"}},
        {"assembly": {}, "selection": {"policy": "authority-v1", "min_score": -1}},
        {"assembly": {}, "selection": "authority-v1"},
    ],
)
def test_an_invalid_selection_is_refused(raw):
    with pytest.raises(ConfigError, match="selection"):
        parse_config(BASE | raw)
