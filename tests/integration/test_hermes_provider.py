"""The Hermes memory provider against a mocked PowerContext (no database, no model).

Covers the integration delivery contract: assembly only when configured, fail-open on every failure
without retries (a 422 is never retried with a relaxed request), the shared prefetch key, the frozen turn,
and content that reaches Hermes' context block byte for byte.
"""

import hashlib
import json
import logging

import httpx
import pytest
from agent.memory_manager import MemoryManager, build_memory_context_block
from hermes_powercontext.config import ConfigError, ProviderConfig, load_config, parse_config, save_config
from hermes_powercontext.install import install
from hermes_powercontext.provider import READ_TOOL, PowerContextMemoryProvider, memory_entry_id
from powercontext_client import OMITTED, AssemblyOptions
from powercontext_client.client import ENTRIES_PAGE_MAX

from tests.conftest import golden_json

QUERY = "After an HTTP API change, how should we investigate a client-contract mismatch?"
GUIDE = golden_json("guide-en.response.json")
LEGACY = golden_json("legacy-en.response.json")
EMPTY = golden_json("sections-empty-en.response.json")
GUIDE_ASSEMBLY = golden_json("guide-en.request.json")["assembly"]
KEY = "pc_test_0123456789abcdef0123456789abcdef"


class FakePowerContext:
    """A MockTransport handler: records prepare bodies, answers with a payload or raises."""

    def __init__(self, answer=None):
        self.bodies: list[dict] = []
        self.raw: list[bytes] = []
        self.requests: list[httpx.Request] = []
        self.answer = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.raw.append(request.content)
        self.bodies.append(json.loads(request.content) if request.content else {})
        answer = self.answer
        if callable(answer):
            return answer(request)
        if answer is None:
            body = GUIDE if "assembly" in self.bodies[-1] else LEGACY
            return httpx.Response(200, json=body)
        status, payload = answer
        return httpx.Response(status, json=payload)


def make_provider(fake: FakePowerContext, *, assembly=OMITTED, **overrides) -> PowerContextMemoryProvider:
    config = ProviderConfig(
        base_url="http://powercontext.test",
        api_key=KEY,
        scope_id="project:demo",
        assembly=assembly if assembly is OMITTED else AssemblyOptions.model_validate(assembly),
        **overrides,
    )
    provider = PowerContextMemoryProvider(config=config, transport=httpx.MockTransport(fake))
    provider.initialize("session-1", hermes_home="/nonexistent")
    return provider


def turn(provider: PowerContextMemoryProvider, number: int, query: str = QUERY) -> str:
    provider.on_turn_start(number, query)
    return provider.prefetch(query)


# --- assembly only when configured -------------------------------------------------------------------


def test_without_assembly_configured_the_request_omits_it_and_legacy_text_is_returned():
    fake = FakePowerContext()
    provider = make_provider(fake)
    assert turn(provider, 1) == LEGACY["content"]
    assert fake.raw == [json.dumps({"scope_id": "project:demo", "query": QUERY}, separators=(",", ":")).encode()]


def test_configured_assembly_is_sent_exactly_and_markdown_returned():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY)
    assert turn(provider, 1) == GUIDE["content"]
    assert fake.bodies == [{"scope_id": "project:demo", "query": QUERY, "assembly": GUIDE_ASSEMBLY}]


@pytest.mark.parametrize("assembly", [{}, {"sections": []}])
def test_minimal_assemblies_are_sent_as_written(assembly):
    fake = FakePowerContext()
    make_provider(fake, assembly=assembly).prefetch(QUERY)
    assert fake.bodies == [{"scope_id": "project:demo", "query": QUERY, "assembly": assembly}]


def test_max_bytes_is_sent_only_when_configured():
    fake = FakePowerContext()
    make_provider(fake, max_bytes=4096).prefetch(QUERY)
    assert fake.bodies == [{"scope_id": "project:demo", "query": QUERY, "max_bytes": 4096}]


def test_empty_result_injects_nothing():
    provider = make_provider(FakePowerContext((200, EMPTY)), assembly={"sections": []})
    assert turn(provider, 1) == ""


# --- fail-open without retries -------------------------------------------------------------------------


def _raise(exception_type):
    def answer(request):
        raise exception_type("boom", request=request)

    return answer


FAILURES = {
    "timeout": _raise(httpx.ReadTimeout),
    "connect timeout": _raise(httpx.ConnectTimeout),
    "connection refused": _raise(httpx.ConnectError),
    "500": (500, {"error": {"code": "internal_error", "message": "x", "fields": []}}),
    "503": (503, {"error": {"code": "service_unavailable", "message": "x", "fields": []}}),
    "502 html": lambda request: httpx.Response(502, text="<html>"),
    "401": (401, {"error": {"code": "unauthenticated", "message": "x", "fields": []}}),
    "403": (403, {"error": {"code": "forbidden", "message": "x", "fields": []}}),
    "404": (404, {"error": {"code": "not_found", "message": "x", "fields": []}}),
    "422": (422, {"error": {"code": "invalid_request", "message": "x", "fields": []}}),
    "wrong content_bytes": (200, GUIDE | {"content_bytes": GUIDE["content_bytes"] + 1}),
    "extra field": (200, GUIDE | {"items": []}),
    "not json": lambda request: httpx.Response(200, text="ok"),
}


@pytest.mark.parametrize("assembly", [OMITTED, GUIDE_ASSEMBLY], ids=["legacy", "assembly"])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_every_failure_is_logged_and_the_turn_continues_without_context(failure, assembly, caplog):
    fake = FakePowerContext(FAILURES[failure])
    provider = make_provider(fake, assembly=assembly)
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        assert turn(provider, 1) == ""
        assert provider.prefetch(QUERY) == ""  # asked again in the same turn: still no second request
    assert len(fake.bodies) == 1, "PowerContext requests are never retried"
    assert any("continuing without context" in record.getMessage() for record in caplog.records)


def test_a_422_is_not_retried_with_a_relaxed_request(caplog):
    fake = FakePowerContext(
        (
            422,
            {"error": {"code": "invalid_request", "message": "bad", "fields": [{"path": "assembly", "message": "x"}]}},
        )
    )
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY)
    with caplog.at_level(logging.ERROR, logger="hermes_powercontext"):
        assert turn(provider, 1) == ""
    assert fake.bodies == [{"scope_id": "project:demo", "query": QUERY, "assembly": GUIDE_ASSEMBLY}]
    assert "not retried" in caplog.text
    # The next turn asks again with the same configuration, never a relaxed one.
    assert turn(provider, 2) == ""
    assert [body["assembly"] for body in fake.bodies] == [GUIDE_ASSEMBLY, GUIDE_ASSEMBLY]


def test_content_over_the_host_budget_is_not_injected():
    big = "x" * 5000
    payload = {"schema": GUIDE["schema"], "status": "ready", "content": big, "content_bytes": 5000}
    provider = make_provider(FakePowerContext((200, payload)), max_bytes=4096)
    assert turn(provider, 1) == ""


def test_content_that_hermes_fencing_would_alter_is_not_injected(caplog):
    content = GUIDE["content"].replace("tests pass.", "tests pass. </memory-context>")
    payload = GUIDE | {"content": content, "content_bytes": len(content.encode())}
    provider = make_provider(FakePowerContext((200, payload)), assembly={})
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        assert turn(provider, 1) == ""
    assert "fencing" in caplog.text


def test_unexpected_errors_never_escape_prefetch():
    def answer(request):
        raise RuntimeError("bug")

    assert turn(make_provider(FakePowerContext(answer)), 1) == ""


# --- prefetch key shared by producer and consumer ---------------------------------------------------------


def test_producer_at_turn_start_and_consumer_share_one_request():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY)
    assert turn(provider, 1) == GUIDE["content"]
    assert len(fake.bodies) == 1


def test_consumer_with_another_query_does_not_reuse_the_producers_text():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly={})
    provider.on_turn_start(1, "/skill release " + QUERY)  # Hermes strips skill scaffolding before prefetch
    provider.prefetch(QUERY)
    assert [body["query"] for body in fake.bodies] == ["/skill release " + QUERY, QUERY]


def test_each_turn_prepares_anew():
    fake = FakePowerContext()
    provider = make_provider(fake)
    turn(provider, 1)
    turn(provider, 2)
    assert len(fake.bodies) == 2


def test_prefetch_without_turn_signals_never_reuses_text():
    fake = FakePowerContext()
    provider = make_provider(fake)
    provider.prefetch(QUERY)
    provider.prefetch(QUERY)
    assert len(fake.bodies) == 2


def test_frozen_turn_keeps_its_configuration_until_the_turn_ends():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY, prefetch_on_turn_start=False)
    provider.on_turn_start(1, QUERY)
    provider.configure(assembly={"sections": [{"family": "memory", "limit": 8}]}, max_bytes=4096)
    assert provider.prefetch(QUERY) == GUIDE["content"]
    assert fake.bodies[-1] == {"scope_id": "project:demo", "query": QUERY, "assembly": GUIDE_ASSEMBLY}
    assert turn(provider, 2)
    assert fake.bodies[-1] == {
        "scope_id": "project:demo",
        "query": QUERY,
        "max_bytes": 4096,
        "assembly": {"sections": [{"family": "memory", "limit": 8}]},
    }


def test_unfrozen_change_within_a_turn_prepares_again_under_the_new_configuration():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY, freeze_per_turn=False)
    assert turn(provider, 1) == GUIDE["content"]
    provider.configure()  # legacy from now on
    assert provider.prefetch(QUERY) == LEGACY["content"]
    provider.configure(assembly=GUIDE_ASSEMBLY, max_bytes=2048)
    provider.prefetch(QUERY)
    assert [("assembly" in body, body.get("max_bytes")) for body in fake.bodies] == [
        (True, None),
        (False, None),
        (True, 2048),
    ]


# --- inside Hermes' own memory manager --------------------------------------------------------------------


def test_hermes_memory_manager_injects_the_content_unchanged():
    fake = FakePowerContext()
    provider = make_provider(fake, assembly=GUIDE_ASSEMBLY)
    manager = MemoryManager()
    manager.add_provider(provider)
    manager.on_turn_start(1, QUERY)
    prefetched = manager.prefetch_all(QUERY)
    assert prefetched == GUIDE["content"]
    block = build_memory_context_block(prefetched)
    assert GUIDE["content"] in block
    assert block.count("BEGIN_POWERCONTEXT_PREPARED_TEXT_V1") == 1
    manager.shutdown_all()


def test_hermes_memory_manager_survives_an_unreachable_server():
    provider = make_provider(FakePowerContext(_raise(httpx.ConnectError)), assembly={})
    manager = MemoryManager()
    manager.add_provider(provider)
    manager.on_turn_start(1, QUERY)
    assert manager.prefetch_all(QUERY) == ""
    manager.shutdown_all()


# --- exact-read tool ----------------------------------------------------------------------------------------


ENTRY_ARGS = {
    "scope_id": "project:demo",
    "family": "memory",
    "artifact_id": "memory",
    "revision": 3,
    "entry_id": "entry-1",
    "entry_version": "entry-1-v2",
}
REVISION_ARGS = {"scope_id": "team:platform", "family": "experience", "artifact_id": "release-lesson", "revision": 7}


def exact_read_server(args: dict, payload: dict) -> FakePowerContext:
    """Answers the exact read that ``args`` names with ``payload``, and any other request with a 404."""
    expected = {key: str(value) for key, value in args.items()}

    def answer(request: httpx.Request) -> httpx.Response:
        read = (request.method, request.url.path, dict(request.url.params))
        if read == ("GET", "/v1/artifacts/revision", expected):
            return httpx.Response(200, json=payload)
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no such revision", "fields": []}})

    return FakePowerContext(answer)


def sent_reads(fake: FakePowerContext) -> list[tuple[str, str, dict]]:
    return [(r.method, r.url.path, dict(r.url.params)) for r in fake.requests]


def test_read_citation_tool_asks_for_exactly_the_cited_entry_version():
    entry = {
        "scope_id": "project:demo",
        "family": "memory",
        "artifact_id": "memory",
        "revision": 3,
        "entry": {
            "id": "entry-1",
            "version": "entry-1-v2",
            "body": "After changing …",
            "content_sha256": "0" * 64,
            "conflict_key": None,
        },
    }
    fake = exact_read_server(ENTRY_ARGS, entry)
    provider = make_provider(fake)
    assert [schema["name"] for schema in provider.get_tool_schemas()] == [READ_TOOL]
    result = provider.handle_tool_call(READ_TOOL, dict(ENTRY_ARGS))
    # What the provider asked for: the cited scope, artifact, revision, entry and version, nothing else.
    assert sent_reads(fake) == [("GET", "/v1/artifacts/revision", {**ENTRY_ARGS, "revision": "3"})]
    assert fake.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert json.loads(result) == entry


def test_read_citation_tool_asks_for_exactly_the_cited_revision():
    revision = {
        "scope_id": "team:platform",
        "family": "experience",
        "artifact_id": "release-lesson",
        "revision": 7,
        "content_sha256": "1" * 64,
        "created_at": "2026-01-01T00:00:00Z",
        "author": "fixture",
        "body": "Tag only after the contract tests pass.",
        "title": "Release lesson",
        "summary": None,
        "entries": None,
    }
    fake = exact_read_server(REVISION_ARGS, revision)
    result = make_provider(fake).handle_tool_call(READ_TOOL, dict(REVISION_ARGS))
    assert sent_reads(fake) == [
        (
            "GET",
            "/v1/artifacts/revision",
            {"scope_id": "team:platform", "family": "experience", "artifact_id": "release-lesson", "revision": "7"},
        )
    ]
    assert json.loads(result)["revision"] == 7
    assert json.loads(result)["body"] == revision["body"]


def test_read_citation_tool_reports_errors_as_json():
    fake = FakePowerContext((404, {"error": {"code": "not_found", "message": "no such revision", "fields": []}}))
    result = make_provider(fake).handle_tool_call(
        READ_TOOL, {"scope_id": "project:demo", "family": "experience", "artifact_id": "x", "revision": 9}
    )
    assert "not_found" in json.loads(result)["error"]
    assert sent_reads(fake) == [
        (
            "GET",
            "/v1/artifacts/revision",
            {"scope_id": "project:demo", "family": "experience", "artifact_id": "x", "revision": "9"},
        )
    ]


def test_read_tool_can_be_disabled():
    assert make_provider(FakePowerContext(), read_tool=False).get_tool_schemas() == []


# --- configuration and installation --------------------------------------------------------------------------


def test_config_file_and_environment(tmp_path):
    (tmp_path / "powercontext.json").write_text(
        json.dumps({"base_url": "http://127.0.0.1:8000", "scope_id": "project:demo", "assembly": {}}), encoding="utf-8"
    )
    config = load_config(tmp_path, environ={"POWERCONTEXT_API_KEY": KEY})
    assert config.assembly_enabled
    assert config.assembly == AssemblyOptions()
    overridden = load_config(
        tmp_path,
        environ={"POWERCONTEXT_API_KEY": KEY, "POWERCONTEXT_ASSEMBLY": "null", "POWERCONTEXT_MAX_BYTES": "900"},
    )
    assert not overridden.assembly_enabled
    assert overridden.max_bytes == 900


def test_the_server_and_scope_come_from_the_variables_every_integration_shares(tmp_path):
    (tmp_path / "powercontext.json").write_text(
        json.dumps({"base_url": "http://file.test", "scope_id": "project:file"}), encoding="utf-8"
    )
    environ = {"POWERCONTEXT_URL": "http://env.test", "POWERCONTEXT_SCOPE": "project:env", "POWERCONTEXT_API_KEY": KEY}
    config = load_config(tmp_path, environ=environ)
    assert (config.base_url, config.scope_id, config.api_key) == ("http://env.test", "project:env", KEY)


def test_the_deprecated_variable_names_still_override_the_file_with_a_warning(tmp_path, caplog):
    (tmp_path / "powercontext.json").write_text(
        json.dumps({"base_url": "http://file.test", "scope_id": "project:file"}), encoding="utf-8"
    )
    environ = {"POWERCONTEXT_BASE_URL": "http://old.test", "POWERCONTEXT_SCOPE_ID": "project:old"}
    with pytest.warns(DeprecationWarning):
        config = load_config(tmp_path, environ=environ | {"POWERCONTEXT_API_KEY": KEY})
    assert (config.base_url, config.scope_id) == ("http://old.test", "project:old")
    assert "POWERCONTEXT_BASE_URL is deprecated: rename it to POWERCONTEXT_URL" in caplog.text
    assert "POWERCONTEXT_SCOPE_ID is deprecated: rename it to POWERCONTEXT_SCOPE" in caplog.text

    environ |= {"POWERCONTEXT_URL": "http://new.test", "POWERCONTEXT_SCOPE": "project:new"}
    with pytest.warns(DeprecationWarning) as recorded:
        config = load_config(tmp_path, environ=environ | {"POWERCONTEXT_API_KEY": KEY})
    assert (config.base_url, config.scope_id) == ("http://new.test", "project:new")
    assert [str(warning.message).split(":")[0] for warning in recorded] == [
        "POWERCONTEXT_BASE_URL is deprecated and ignored",
        "POWERCONTEXT_SCOPE_ID is deprecated and ignored",
    ]


@pytest.mark.parametrize("assembly", [None, "absent"])
def test_absent_or_null_assembly_means_legacy(assembly):
    raw = {"base_url": "http://x", "api_key": KEY, "scope_id": "s"}
    if assembly != "absent":
        raw["assembly"] = assembly
    assert parse_config(raw).assembly is OMITTED


@pytest.mark.parametrize(
    "raw",
    [
        {"scope_id": "s", "api_key": KEY},
        {"base_url": "http://x", "scope_id": "s"},
        {
            "base_url": "http://x",
            "api_key": KEY,
            "scope_id": "s",
            "assembly": {"sections": [{"family": "skill", "limit": 1}]},
        },
        {"base_url": "http://x", "api_key": KEY, "scope_id": "s", "max_bytes": 100},
        {"base_url": "http://x", "api_key": KEY, "scope_id": "s", "timeout_seconds": 0},
        {"base_url": "http://x", "api_key": KEY, "scope_id": "s", "freeze_per_turn": "yes"},
        {"base_url": "http://x", "api_key": KEY, "scope_id": "s", "write_memory": "no"},
        {"base_url": "http://x", "api_key": KEY, "scope_id": "s", "assembly_enabled": True},
    ],
)
def test_invalid_configuration_is_refused(raw):
    with pytest.raises(ConfigError):
        parse_config(raw)


def test_memory_writes_are_mirrored_unless_the_configuration_turns_them_off():
    raw = {"base_url": "http://x", "api_key": KEY, "scope_id": "s"}
    assert parse_config(raw).write_memory is True
    assert parse_config(raw | {"write_memory": False}).write_memory is False


def test_unconfigured_provider_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    assert PowerContextMemoryProvider().is_available() is False


def test_save_config_keeps_the_key_out_of_the_file(tmp_path):
    path = save_config(
        {"base_url": "http://127.0.0.1:8000", "scope_id": "project:demo", "api_key": KEY, "assembly": "{}"}, tmp_path
    )
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "base_url": "http://127.0.0.1:8000",
        "scope_id": "project:demo",
        "assembly": {},
    }


def test_installed_shim_is_found_by_hermes_plugin_discovery(tmp_path, monkeypatch):
    from plugins.memory import load_memory_provider

    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    target = install(tmp_path)
    assert (target / "__init__.py").exists() and (target / "plugin.yaml").exists()
    provider = load_memory_provider("powercontext")
    assert isinstance(provider, PowerContextMemoryProvider)
    assert provider.name == "powercontext"


# --- mirrored memory writes ---------------------------------------------------------------------------------

FRIDAY = "Deploys freeze on Fridays."
THURSDAY = "Deploys freeze on Thursdays."
NOT_FOUND = {"error": {"code": "not_found", "message": "no such artifact", "fields": []}}
ENTRIES_PAGE = 2


class FakeMemoryServer:
    """A MockTransport handler keeping memory artifacts like PowerContext does, recording every request.

    Answers the history and exact-revision reads, creates (409 for a live entry) and removals (404 for a
    missing one), honours expected_head_revision (409) and replays a seen Idempotency-Key. ``failures``
    are answered first, one per request (a callable raising, or a (status, payload) pair).
    """

    def __init__(self, live: dict[str, dict[str, str]] | None = None, failures=()):
        # artifact id -> (head revision, {entry id: body})
        self.artifacts = {artifact: [len(entries), dict(entries)] for artifact, entries in (live or {}).items()}
        self.failures = list(failures)
        self.requests: list[httpx.Request] = []
        self.replies: dict[str, dict] = {}

    def sent(self) -> list[tuple]:
        """(method, path, query or JSON body) of every request, in order."""
        return [
            (r.method, r.url.path, dict(r.url.params) if r.method == "GET" else json.loads(r.content))
            for r in self.requests
        ]

    def keys(self) -> list[str | None]:
        return [r.headers.get("Idempotency-Key") for r in self.requests]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.failures:
            failure = self.failures.pop(0)
            if callable(failure):
                return failure(request)
            return httpx.Response(failure[0], json=failure[1])
        if request.method == "GET":
            return self._read(dict(request.url.params), request.url.path)
        key = request.headers.get("Idempotency-Key")
        if key in self.replies:
            return httpx.Response(201, json=self.replies[key], headers={"Idempotent-Replayed": "true"})
        body = json.loads(request.content)
        head, entries = self.artifacts.setdefault(body["artifact_id"], [0, {}])
        if body.get("expected_head_revision", head) != head:
            return httpx.Response(409, json={"error": {"code": "conflict", "message": "head moved", "fields": []}})
        entry_id = body["entry_id"]
        if request.url.path == "/v1/memory/entries":
            if entry_id in entries:
                return httpx.Response(409, json={"error": {"code": "conflict", "message": "exists", "fields": []}})
            entries[entry_id] = body["body"]
        else:
            if entry_id not in entries:
                return httpx.Response(404, json=NOT_FOUND)
            del entries[entry_id]
        self.artifacts[body["artifact_id"]][0] = head + 1
        citation = {"scope_id": body["scope_id"], "family": "memory", "artifact_id": body["artifact_id"]}
        citation["revision"] = head + 1
        if request.url.path == "/v1/memory/entries":
            citation |= {"entry_id": entry_id, "entry_version": f"{entry_id}-v{head + 1}"}
        self.replies[key] = reply = {"citation": citation, "content_sha256": "0" * 64}
        return httpx.Response(201, json=reply)

    def _read(self, params: dict, path: str) -> httpx.Response:
        head, entries = self.artifacts.get(params["artifact_id"], (0, {}))
        if head == 0:  # an artifact exists from its first revision on
            return httpx.Response(404, json=NOT_FOUND)
        citation = {key: params[key] for key in ("scope_id", "family", "artifact_id")} | {"revision": head}
        common = {"content_sha256": "0" * 64, "author": "api-key:test", "created_at": "2026-01-01T00:00:00Z"}
        if path == "/v1/artifacts/history":
            return httpx.Response(200, json={"revisions": [{"citation": citation} | common], "next_before": None})
        live = [
            {
                "id": entry_id,
                "version": f"{entry_id}-v1",
                "body": body,
                "content_sha256": "0" * 64,
                "conflict_key": None,
            }
            for entry_id, body in sorted(entries.items())
            if "entries_after" not in params or entry_id > params["entries_after"]
        ]
        # Pages as small as ENTRIES_PAGE, so that a mirror reading a head of a few entries follows the cursor.
        page, more = live[:ENTRIES_PAGE], len(live) > ENTRIES_PAGE
        paged = {"entries": page, "next_entries_after": page[-1]["id"] if more else None}
        return httpx.Response(200, json=citation | common | {"body": None, "title": None, "summary": None} | paged)


def history(artifact_id: str) -> tuple:
    params = {"scope_id": "project:demo", "family": "memory", "artifact_id": artifact_id, "limit": "1"}
    return ("GET", "/v1/artifacts/history", params)


def exact(artifact_id: str, revision: int) -> tuple:
    """The head read of a mirrored memory: its entries in the largest pages the contract allows."""
    params = {"scope_id": "project:demo", "family": "memory", "artifact_id": artifact_id, "revision": str(revision)}
    return ("GET", "/v1/artifacts/revision", params | {"entries_limit": str(ENTRIES_PAGE_MAX)})


def create(artifact_id: str, text: str, **condition) -> tuple:
    body = {"scope_id": "project:demo", "artifact_id": artifact_id, "entry_id": memory_entry_id(text), "body": text}
    return ("POST", "/v1/memory/entries", body | condition)


def remove(artifact_id: str, text: str, **condition) -> tuple:
    body = {"scope_id": "project:demo", "artifact_id": artifact_id, "entry_id": memory_entry_id(text)}
    return ("POST", "/v1/memory/entries/remove", body | condition)


def not_mirrored(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "not mirrored" in r.getMessage()]


def test_an_entry_id_is_derived_from_the_text_alone():
    assert memory_entry_id(FRIDAY) == memory_entry_id(FRIDAY)
    assert memory_entry_id(FRIDAY) != memory_entry_id(THURSDAY)
    assert memory_entry_id(FRIDAY) == "hermes-" + hashlib.sha256(FRIDAY.encode()).hexdigest()[:32]


def test_an_added_memory_is_created_as_an_entry_of_the_targets_artifact_under_an_idempotency_key(caplog):
    server = FakeMemoryServer()
    provider = make_provider(server)
    with caplog.at_level(logging.INFO, logger="hermes_powercontext"):
        provider.on_memory_write("add", "memory", f"  {FRIDAY}\n", metadata={"session_id": "s", "tool_name": "memory"})
        provider.on_memory_write("add", "user", "Prefers short answers.")
    # Hermes stores the text stripped; so does the mirror.
    assert server.sent() == [create("hermes-memory", FRIDAY), create("hermes-user", "Prefers short answers.")]
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.requests)
    first, second = server.keys()
    assert first.startswith("hermes-add-create-") and second.startswith("hermes-add-create-") and first != second
    assert server.artifacts["hermes-memory"] == [1, {memory_entry_id(FRIDAY): FRIDAY}]
    assert not_mirrored(caplog) == []


def test_adding_a_text_that_is_already_live_sends_one_create_and_warns_of_nothing(caplog):
    server = FakeMemoryServer({"hermes-memory": {memory_entry_id(FRIDAY): FRIDAY}})
    with caplog.at_level(logging.INFO, logger="hermes_powercontext"):
        make_provider(server).on_memory_write("add", "memory", FRIDAY)
    assert server.sent() == [create("hermes-memory", FRIDAY)]
    assert not_mirrored(caplog) == []
    assert "already in PowerContext" in caplog.text


def test_a_replace_creates_the_new_entry_and_then_retires_the_one_containing_old_text_each_on_the_head_read():
    server = FakeMemoryServer(
        {"hermes-memory": {memory_entry_id("Other note."): "Other note.", memory_entry_id(FRIDAY): FRIDAY}}
    )
    make_provider(server).on_memory_write("replace", "memory", THURSDAY, metadata={"old_text": " on Fri "})
    assert server.sent() == [
        history("hermes-memory"),
        exact("hermes-memory", 2),
        create("hermes-memory", THURSDAY, expected_head_revision=2),
        remove("hermes-memory", FRIDAY, expected_head_revision=3),
    ]
    keys = server.keys()
    assert keys[:2] == [None, None]
    assert keys[2].startswith("hermes-replace-create-") and keys[3].startswith("hermes-replace-retire-")
    assert server.artifacts["hermes-memory"][1] == {
        memory_entry_id("Other note."): "Other note.",
        memory_entry_id(THURSDAY): THURSDAY,
    }


def test_a_remove_retires_the_entry_containing_old_text_on_the_head_read():
    server = FakeMemoryServer({"hermes-user": {memory_entry_id(FRIDAY): FRIDAY}})
    make_provider(server).on_memory_write("remove", "user", "", metadata={"old_text": "Fridays"})
    assert server.sent() == [
        history("hermes-user"),
        exact("hermes-user", 1),
        remove("hermes-user", FRIDAY, expected_head_revision=1),
    ]
    assert server.keys()[2].startswith("hermes-remove-retire-")
    assert server.artifacts["hermes-user"] == [2, {}]


def test_a_remove_finds_the_entry_on_a_later_page_of_the_head():
    notes = [f"Note {i}." for i in range(2 * ENTRIES_PAGE)] + [FRIDAY]
    server = FakeMemoryServer({"hermes-memory": {memory_entry_id(text): text for text in notes}})
    make_provider(server).on_memory_write("remove", "memory", "", metadata={"old_text": "Fridays"})
    reads = [params for method, path, params in server.sent() if path == "/v1/artifacts/revision"]
    # Every page of the head, each after the last entry id of the one before (the entries sorted by id).
    ids = sorted(memory_entry_id(text) for text in notes)
    assert [read.get("entries_after") for read in reads] == [None, ids[ENTRIES_PAGE - 1], ids[2 * ENTRIES_PAGE - 1]]
    assert server.sent()[-1] == remove("hermes-memory", FRIDAY, expected_head_revision=len(notes))
    assert memory_entry_id(FRIDAY) not in server.artifacts["hermes-memory"][1]


def test_replacing_a_text_with_itself_writes_nothing():
    server = FakeMemoryServer({"hermes-memory": {memory_entry_id(FRIDAY): FRIDAY}})
    make_provider(server).on_memory_write("replace", "memory", FRIDAY, metadata={"old_text": "Fridays"})
    assert [method for method, _, _ in server.sent()] == ["GET", "GET"]


@pytest.mark.parametrize(
    ("live", "old_text", "reason"),
    [
        ({"other": "Other note."}, "Fridays", "no live entry of 'hermes-memory' contains old_text 'Fridays'"),
        ({"a": "Deploys freeze on Fridays.", "b": "Builds freeze on Fridays."}, "Fridays", "2 different entries"),
    ],
    ids=["no match", "ambiguous"],
)
def test_a_remove_that_cannot_name_one_entry_retires_none_and_says_why(live, old_text, reason, caplog):
    server = FakeMemoryServer({"hermes-memory": live})
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        make_provider(server).on_memory_write("remove", "memory", "", metadata={"old_text": old_text})
    assert [method for method, _, _ in server.sent()] == ["GET", "GET"]
    assert len(not_mirrored(caplog)) == 1 and reason in not_mirrored(caplog)[0]


def test_a_replace_without_a_match_still_writes_the_new_entry_and_warns_that_none_was_retired(caplog):
    server = FakeMemoryServer()
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        make_provider(server).on_memory_write("replace", "memory", THURSDAY, metadata={"old_text": "Fridays"})
    assert server.sent() == [history("hermes-memory"), create("hermes-memory", THURSDAY, expected_head_revision=0)]
    assert "the new entry is written, but no live entry" in not_mirrored(caplog)[0]


def test_a_replace_or_remove_without_old_text_sends_nothing_and_says_why(caplog):
    server = FakeMemoryServer({"hermes-memory": {memory_entry_id(FRIDAY): FRIDAY}})
    provider = make_provider(server)
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        provider.on_memory_write("remove", "memory", "")
        provider.on_memory_write("replace", "memory", THURSDAY, metadata={})
    assert server.requests == []
    assert [
        message.endswith("Hermes gave no old_text, so the entry to change cannot be found")
        for message in not_mirrored(caplog)
    ] == [True, True]


def test_a_write_whose_answer_was_lost_is_retried_once_with_the_same_idempotency_key(caplog):
    server = FakeMemoryServer(failures=[_raise(httpx.ReadTimeout)])
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        make_provider(server).on_memory_write("add", "memory", FRIDAY)
    assert server.sent() == [create("hermes-memory", FRIDAY)] * 2
    assert server.keys()[0] == server.keys()[1]
    assert server.artifacts["hermes-memory"][0] == 1
    assert not_mirrored(caplog) == []


RETRIED = {
    "timeout": _raise(httpx.ReadTimeout),
    "connection refused": _raise(httpx.ConnectError),
    "503": (503, {"error": {"code": "service_unavailable", "message": "database down", "fields": []}}),
}
NOT_RETRIED = {
    "500": (500, {"error": {"code": "internal_error", "message": "x", "fields": []}}),
    "403": (403, {"error": {"code": "forbidden", "message": "this key may only read the scope", "fields": []}}),
    "404": (404, NOT_FOUND),
    "422": (422, {"error": {"code": "invalid_request", "message": "body: bad", "fields": []}}),
    "not json": lambda request: httpx.Response(201, text="ok"),
}


@pytest.mark.parametrize("failure", list(RETRIED) + list(NOT_RETRIED))
def test_a_failed_write_is_logged_as_a_warning_with_its_reason_and_the_turn_goes_on(failure, caplog):
    retried = failure in RETRIED
    answer = RETRIED.get(failure) or NOT_RETRIED[failure]
    server = FakeMemoryServer(failures=[answer, answer])
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        assert make_provider(server).on_memory_write("add", "memory", FRIDAY) is None
    assert server.sent() == [create("hermes-memory", FRIDAY)] * (2 if retried else 1)
    assert len(set(server.keys())) == 1, "a retry reuses the write's Idempotency-Key"
    [warning] = not_mirrored(caplog)
    assert warning.startswith("Hermes memory 'add' on 'memory' not mirrored to PowerContext: ")
    assert len(warning) > len("Hermes memory 'add' on 'memory' not mirrored to PowerContext: ") + 10


def test_a_head_that_moved_between_read_and_write_retires_nothing_and_says_why(caplog):
    server = FakeMemoryServer({"hermes-memory": {memory_entry_id(FRIDAY): FRIDAY}})
    read = server._read

    def read_then_another_writer(params, path):
        response = read(params, path)
        if path == "/v1/artifacts/revision":  # another writer appends a revision right after the provider's read
            server.artifacts["hermes-memory"][0] += 1
        return response

    server._read = read_then_another_writer
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        make_provider(server).on_memory_write("replace", "memory", THURSDAY, metadata={"old_text": "Fridays"})
    assert server.sent()[2:] == [create("hermes-memory", THURSDAY, expected_head_revision=1)]
    assert server.artifacts["hermes-memory"][1] == {memory_entry_id(FRIDAY): FRIDAY}
    [warning] = not_mirrored(caplog)
    assert warning.endswith("not mirrored to PowerContext: Conflict: HTTP 409 conflict: head moved")


def test_no_write_is_sent_when_write_memory_is_off():
    server = FakeMemoryServer()
    make_provider(server, write_memory=False).on_memory_write("add", "memory", FRIDAY)
    assert server.requests == []


@pytest.mark.parametrize("agent_context", ["cron", "subagent", "flush"])
def test_writes_of_an_agent_other_than_the_primary_are_not_mirrored(agent_context):
    server = FakeMemoryServer()
    provider = make_provider(server)
    provider.initialize("session-2", hermes_home="/nonexistent", agent_context=agent_context)
    provider.on_memory_write("add", "memory", FRIDAY)
    assert server.requests == []


def test_the_primary_agent_s_writes_are_mirrored_when_hermes_names_it():
    server = FakeMemoryServer()
    provider = make_provider(server)
    provider.initialize("session-2", hermes_home="/nonexistent", agent_context="primary")
    provider.on_memory_write("add", "memory", FRIDAY)
    assert server.artifacts["hermes-memory"][1] == {memory_entry_id(FRIDAY): FRIDAY}


def test_an_uninitialized_provider_warns_that_the_write_was_not_mirrored(caplog):
    config = ProviderConfig(base_url="http://powercontext.test", api_key=KEY, scope_id="project:demo")
    with caplog.at_level(logging.WARNING, logger="hermes_powercontext"):
        PowerContextMemoryProvider(config=config).on_memory_write("add", "memory", FRIDAY)
    assert "not mirrored to PowerContext: the provider is not initialized" in caplog.text


def test_hermes_memory_manager_mirrors_a_committed_memory_tool_replace_through_the_provider():
    server = FakeMemoryServer({"hermes-user": {memory_entry_id(FRIDAY): FRIDAY}})
    manager = MemoryManager()
    manager.add_provider(make_provider(server))
    arguments = {"action": "replace", "target": "user", "old_text": "Fridays", "content": THURSDAY}
    manager.notify_memory_tool_write(json.dumps({"success": False, "error": "x"}), arguments)
    assert server.requests == [], "a write Hermes did not commit is not mirrored"
    manager.notify_memory_tool_write(json.dumps({"success": True}), arguments)
    assert server.sent()[2:] == [
        create("hermes-user", THURSDAY, expected_head_revision=1),
        remove("hermes-user", FRIDAY, expected_head_revision=2),
    ]
    manager.shutdown_all()


def test_the_turn_after_a_mirrored_memory_write_prepares_with_that_writes_consistency_token():
    # docs/scaling.md §11: a server serving prepares on replicas answers writes with a token; the provider's
    # client sends it with the next prepare, so the replica (or the primary) answers with the write in it.
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/context/prepare":
            return httpx.Response(200, json=LEGACY)
        citation = {"scope_id": "project:demo", "family": "memory", "artifact_id": "hermes-memory", "revision": 1}
        reply = {"citation": citation | {"entry_id": "e", "entry_version": "e-v1"}, "content_sha256": "0" * 64}
        return httpx.Response(201, json=reply, headers={"PowerContext-Consistency-Token": "0/16B3748"})

    fake = FakePowerContext(answer)
    provider = make_provider(fake)
    turn(provider, 1)
    provider.on_memory_write("add", "memory", FRIDAY)
    turn(provider, 2)

    prepares = [r for r in fake.requests if r.url.path == "/v1/context/prepare"]
    assert [r.headers.get("PowerContext-Consistency-Token") for r in prepares] == [None, "0/16B3748"]
