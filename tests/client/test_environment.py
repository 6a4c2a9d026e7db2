"""The integrations' environment variables: the current name is read, an old name still works and is warned about."""

import logging
import warnings

import pytest
from powercontext_client.environment import API_KEY, SCOPE, URL, read_variable

WARNINGS = "powercontext_client.environment"


def test_the_current_name_is_read_without_a_warning(caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_variable(URL, {URL: "http://pc.test"}) == "http://pc.test"
    assert caplog.records == []


@pytest.mark.parametrize(("old", "new"), [("POWERCONTEXT_BASE_URL", URL), ("POWERCONTEXT_SCOPE_ID", SCOPE)])
def test_an_old_name_alone_is_read_with_a_warning_naming_both(caplog, old, new):
    caplog.set_level(logging.WARNING, logger=WARNINGS)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: rename it to {new}"):
        assert read_variable(new, {old: "from the old name"}) == "from the old name"
    assert [(r.name, r.levelname) for r in caplog.records] == [(WARNINGS, "WARNING")]
    assert f"{old} is deprecated: rename it to {new}" in caplog.text


def test_when_both_names_are_set_the_new_one_wins_and_the_old_one_is_said_to_be_ignored(caplog):
    caplog.set_level(logging.WARNING, logger=WARNINGS)
    environ = {SCOPE: "project:new", "POWERCONTEXT_SCOPE_ID": "project:old"}
    with pytest.warns(DeprecationWarning, match="POWERCONTEXT_SCOPE_ID is deprecated and ignored: POWERCONTEXT_SCOPE"):
        assert read_variable(SCOPE, environ) == "project:new"
    assert "POWERCONTEXT_SCOPE_ID is deprecated and ignored: POWERCONTEXT_SCOPE is set and wins" in caplog.text


def test_an_empty_value_counts_as_unset_under_either_name():
    assert read_variable(URL, {URL: ""}) is None
    assert read_variable(URL, {}) is None
    with pytest.warns(DeprecationWarning, match="POWERCONTEXT_BASE_URL is deprecated: rename"):
        assert read_variable(URL, {URL: "", "POWERCONTEXT_BASE_URL": "http://old.test"}) == "http://old.test"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_variable(SCOPE, {SCOPE: "s", "POWERCONTEXT_SCOPE_ID": ""}) == "s"


def test_a_name_without_an_old_one_is_read_as_it_is(caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_variable(API_KEY, {API_KEY: "k"}) == "k"
        assert read_variable("POWERCONTEXT_TIMEOUT", {}) is None
    assert caplog.records == []


def test_the_process_environment_is_read_by_default(monkeypatch):
    monkeypatch.setenv(URL, "http://from-the-process.test")
    assert read_variable(URL) == "http://from-the-process.test"


def test_the_warning_never_carries_a_value(caplog):
    caplog.set_level(logging.WARNING, logger=WARNINGS)
    with pytest.warns(DeprecationWarning) as recorded:
        read_variable(URL, {"POWERCONTEXT_BASE_URL": "http://secret-host.test"})
    assert "secret-host" not in str(recorded[0].message)
    assert "secret-host" not in caplog.text
