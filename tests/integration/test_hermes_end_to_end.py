"""RFC acceptance 7 in a real host: Hermes Agent runs a turn against a live PowerContext server.

The provider is installed the way a user installs it (the plugin shim in HERMES_HOME, ``memory.provider:
powercontext`` in config.yaml, settings in powercontext.json, the key in the environment). A fake
OpenAI-compatible model on 127.0.0.1 records what Hermes sends it. Each golden case's configuration must
reach PowerContext (the prepared text is the golden text of exactly that configuration: Markdown V1 when
assembly is configured, the legacy envelope when it is not) and the prepared bytes must appear unchanged in
the model request. With PowerContext unreachable the turn completes without context.
"""

import json

import pytest

from tests.conftest import GOLDEN_KEY, golden_json
from tests.integration.conftest import ANSWER, MODEL, closed_port

MARKDOWN_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_TEXT_V1"
LEGACY_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1"


def run_turn(hermes_home, fake_model, monkeypatch, provider_config: dict, message: str) -> tuple[dict, dict]:
    """One Hermes turn; returns (Hermes' result, the chat-completions request the model received)."""
    from run_agent import AIAgent

    (hermes_home / "powercontext.json").write_text(json.dumps(provider_config), encoding="utf-8")
    monkeypatch.setenv("POWERCONTEXT_API_KEY", GOLDEN_KEY)
    agent = AIAgent(
        base_url=fake_model.base_url,
        api_key="sk-test",
        model=MODEL,
        quiet_mode=True,
        enabled_toolsets=[],
        skip_context_files=True,
        platform="cli",
        max_iterations=2,
    )
    try:
        manager = agent._memory_manager
        assert manager is not None and [p.name for p in manager.providers] == ["powercontext"], (
            "Hermes did not activate the PowerContext provider"
        )
        result = agent.run_conversation(message)
    finally:
        agent.shutdown_memory_provider()
        agent.close()
    requests = fake_model.chat_requests()
    assert len(requests) == 1
    return result, {"raw": requests[0], "json": json.loads(requests[0])}


def last_user_message(request: dict) -> str:
    return [m for m in request["json"]["messages"] if m["role"] == "user"][-1]["content"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", ["legacy-en", "guide-en", "defaults-en", "memory-only-en"])
def test_configuration_reaches_powercontext_and_text_reaches_the_model_unchanged(
    case, powercontext_url, hermes_home, fake_model, monkeypatch, loopback_only
):
    golden_request = golden_json(f"{case}.request.json")
    expected = golden_json(f"{case}.response.json")["content"]
    config = {"base_url": powercontext_url, "scope_id": golden_request["scope_id"]}
    config |= {key: golden_request[key] for key in ("assembly", "max_bytes") if key in golden_request}

    result, request = run_turn(hermes_home, fake_model, monkeypatch, config, golden_request["query"])

    assert result["final_response"] == ANSWER
    assert loopback_only, "the turn made no connection at all?"
    user_message = last_user_message(request)
    assert user_message.startswith(golden_request["query"])
    # The exact prepared bytes are in the model's context, once, unchanged.
    assert user_message.encode("utf-8").count(expected.encode("utf-8")) == 1
    assert (
        json.dumps(expected)[1:-1].encode() in request["raw"]
        or json.dumps(expected, ensure_ascii=False)[1:-1].encode() in request["raw"]
    )
    # The configuration reached the server: this is the text of exactly this configuration.
    if "assembly" in golden_request:
        assert MARKDOWN_BEGIN in user_message and LEGACY_BEGIN not in user_message
    else:
        assert LEGACY_BEGIN in user_message and MARKDOWN_BEGIN not in user_message


@pytest.mark.django_db(transaction=True)
def test_no_selected_families_injects_nothing(powercontext_url, hermes_home, fake_model, monkeypatch, loopback_only):
    golden_request = golden_json("sections-empty-en.request.json")
    config = {"base_url": powercontext_url, "scope_id": "project:demo", "assembly": golden_request["assembly"]}
    result, request = run_turn(hermes_home, fake_model, monkeypatch, config, golden_request["query"])
    assert result["final_response"] == ANSWER
    assert last_user_message(request) == golden_request["query"]
    assert b"POWERCONTEXT" not in request["raw"]


@pytest.mark.parametrize("assembly", [None, {}], ids=["legacy", "assembly"])
def test_unreachable_powercontext_leaves_the_turn_running_without_context(
    assembly, hermes_home, fake_model, monkeypatch, caplog, loopback_only
):
    config = {"base_url": f"http://127.0.0.1:{closed_port()}", "scope_id": "project:demo", "timeout_seconds": 2}
    if assembly is not None:
        config["assembly"] = assembly
    query = golden_json("guide-en.request.json")["query"]
    result, request = run_turn(hermes_home, fake_model, monkeypatch, config, query)
    assert result["final_response"] == ANSWER
    assert last_user_message(request) == query
    assert b"POWERCONTEXT" not in request["raw"]
    assert "continuing without context" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_prepared_text_over_the_prompt_token_budget_is_left_out_whole(
    powercontext_url, hermes_home, fake_model, monkeypatch, caplog, loopback_only
):
    golden_request = golden_json("guide-en.request.json")  # its prepared text is 235 offline units
    config = {"base_url": powercontext_url, "scope_id": golden_request["scope_id"], "prompt_max_tokens": 200}
    config |= {key: golden_request[key] for key in ("assembly", "max_bytes")}
    result, request = run_turn(hermes_home, fake_model, monkeypatch, config, golden_request["query"])
    assert result["final_response"] == ANSWER
    assert last_user_message(request) == golden_request["query"]
    assert b"POWERCONTEXT" not in request["raw"]
    assert "PowerContext memory not injected: token_budget_exceeded" in caplog.text
