# Everything here uses the project's own virtual environment, created by `make venv`: .venv, or the directory
# POWERCONTEXT_VENV names (one venv per Python line). `make test` is `python3 dev.py test`, which keeps its own
# (.venv-test, unless POWERCONTEXT_VENV names one), apart from the .venv that `dev.py serve` runs from.
PY ?= $(or $(POWERCONTEXT_VENV),.venv)/bin/python
PG_URL ?= postgres://postgres@127.0.0.1:5432/powercontext
# Development targets run Django with DEBUG off, which refuses to start without a real secret: a throwaway
# one per make run unless the environment gives one (a deployment sets its own, see docs/deployment.md).
SECRET_KEY ?= $(shell python3 -c 'import secrets; print(secrets.token_urlsafe(50))')
export SECRET_KEY

.PHONY: venv serve test test-postgres test-pgbouncer test-replica test-failover check format docs-test api-generate contract-test bench bench-smoke \
	mutation

venv:
	python3 -c "import dev; dev.ensure_environment(dev=True)"

serve:
	python3 dev.py serve

test:
	python3 dev.py test

test-postgres:
	DATABASE_URL=$(PG_URL) python3 dev.py test

# The API tests through a PgBouncer of their own in transaction mode (docs/scaling.md); needs `pgbouncer`
# installed and PostgreSQL on 127.0.0.1:5432. PGBOUNCER_ARGS=--compare-direct also times them straight.
test-pgbouncer: venv
	$(PY) tests/pgbouncer/run.py --timeout 1200 $(PGBOUNCER_ARGS) tests/api -q -p no:cacheprovider

# Stateless app servers and read replicas with real processes (docs/scaling.md §9): a streaming replica of the
# PostgreSQL 15 on 127.0.0.1:5432 (pg_basebackup, as the postgres OS user), PgBouncer and four gunicorn servers
# over a scratch database, a bounded mixed load, exact reads on every path, the replica stopped mid-load.
# Prints throughput figures, prepare req/s with 0 and 1 replicas and the lag at which a paused replica stops
# serving prepares; REPLICA_ARGS="--replicas 2" adds a second replica (the figures of docs/scaling.md §11).
# Stops and removes everything it started (a pg_hba.conf line it added too).
test-replica: venv
	$(PY) tests/replica/run.py --timeout 600 $(REPLICA_ARGS)

# Failover without losing an acknowledged write (docs/scaling.md §12): pg_auto_failover's monitor, a primary and a
# synchronous standby on free ports (never the cluster on 5432), two gunicorn servers on the multi-host URL, a
# mixed load, five kills of the primary's postmaster, a write in doubt and a switchover. Needs root and `pg_autoctl`
# (postgresql-<major>-auto-failover); prints the failover table; stops and removes everything it started.
test-failover: venv
	$(PY) tests/failover/run.py --timeout 900 $(FAILOVER_ARGS)

check: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) manage.py check --fail-level WARNING
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m mypy

format: venv
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

docs-test: venv
	$(PY) tests/docs/run_examples.py README.md docs/*.md

api-generate: venv
	$(PY) manage.py spectacular --file openapi/powercontext.yaml --validate --fail-on-warn

contract-test: venv
	$(PY) -m pytest tests/contract -q

# Mutation testing of the pure assembly core and the citation parser ([tool.mutmut] in pyproject.toml):
# mutants/ is rebuilt each run; `mutmut results` lists survivors, `mutmut show NAME` shows one.
mutation: venv
	rm -rf mutants
	POWERCONTEXT_PROPERTY_EXAMPLES=40 $(PY) -m mutmut run --max-children 2
	$(PY) -m mutmut results

bench: venv
	$(PY) bench/run.py

bench-smoke: venv
	$(PY) bench/run.py --smoke

bench-assembly: venv
	$(PY) bench/assembly_micro.py

bench-json-depth: venv
	$(PY) bench/json_depth.py
