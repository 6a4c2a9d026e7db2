"""DATABASE_URL naming several PostgreSQL hosts (docs/scaling.md §12), as pg_auto_failover prints it: libpq tries
them in turn and, with target_session_attrs=read-write, keeps the one that accepts writes."""

import pytest

from tests.unit.powercontext.test_replica_settings import _loaded, _settings


def test_a_multi_host_url_passes_every_host_and_port_to_libpq():
    url = "postgres://app:s3cret@10.0.0.1:6001,10.0.0.2:6002/powercontext?target_session_attrs=read-write"
    default = _loaded(url)["databases"]["default"]

    assert (default["NAME"], default["USER"], default["PASSWORD"]) == ("powercontext", "app", "s3cret")
    assert default["OPTIONS"]["host"] == "10.0.0.1,10.0.0.2"
    assert default["OPTIONS"]["port"] == "6001,6002"
    assert default["OPTIONS"]["target_session_attrs"] == "read-write"


def test_a_host_without_a_port_gets_postgresqls_default_port():
    default = _loaded("postgres://db-a,db-b:6432/powercontext")["databases"]["default"]

    assert (default["OPTIONS"]["host"], default["OPTIONS"]["port"]) == ("db-a,db-b", "5432,6432")


def test_a_single_host_url_is_read_as_before():
    default = _loaded("postgres://postgres@127.0.0.1:5432/powercontext")["databases"]["default"]

    assert (default["HOST"], default["PORT"]) == ("127.0.0.1", 5432)
    assert "host" not in default["OPTIONS"]


@pytest.mark.parametrize("url", ["postgres://,db-b/powercontext", "postgres://db-a,/powercontext"])
def test_an_empty_host_stops_start_up_naming_the_variable(url):
    completed = _settings(url)

    assert completed.returncode != 0
    assert "DATABASE_URL: a host of" in completed.stderr
