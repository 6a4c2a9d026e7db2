"""Where one request's time goes, layer by layer, in process (no socket, no load generator).

    .venv/bin/python bench/http_profile.py [--engine sqlite|postgresql] [--n 1000] [--requests 400]

Loads part 3's dataset (``bench.http_load.setup_worker``) into a throwaway database, then calls Django's WSGI
application directly, as gunicorn would (an environ in, the response iterated and closed), for each endpoint of
part 3, and times each layer with wrappers around the functions that bound it:

- ``wsgi``: the whole call, closing included (what a sync worker spends per request besides the socket)
- ``middleware``: the WSGI handler and every middleware, outside DRF's ``dispatch``
- ``drf``: DRF's ``dispatch`` outside the view's method and the renderer: request wrapping, negotiation,
  authentication's own code, permission and throttle checks, ``finalize_response``
- ``auth SQL``/``SQL``: time inside the database driver (the key's statement, the endpoint's statements)
- ``view``: the view's method outside SQL (validation, selection, serializers)
- ``render``: JSON encoding of the response body
- ``close``: the response's closers (the prepare log's INSERT when it is written inline)

Layers are exclusive and add up to ``wsgi``. Timer overhead is a few microseconds per wrapped call; the figures
are means over the fastest of five blocks of ``--requests``/5 calls after a warm-up (the machine's other work
only ever adds time).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path[0] = str(ROOT)

BLOCKS = 5
LAYERS = ("middleware", "drf", "auth SQL", "SQL", "view", "render", "close")


class _Clock:
    """Exclusive time per layer: entering a layer pauses the one it interrupts."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.stack: list[tuple[str, float]] = []

    @contextmanager
    def layer(self, name: str):
        now = time.perf_counter()
        if self.stack:
            outer, since = self.stack[-1]
            self.totals[outer] += now - since
        self.stack.append((name, now))
        try:
            yield
        finally:
            now = time.perf_counter()
            _, since = self.stack.pop()
            self.totals[name] += now - since
            if self.stack:
                self.stack[-1] = (self.stack[-1][0], now)


def _wrap(stack: ExitStack, owner, attribute: str, clock: _Clock, name: str) -> None:
    original = owner.__dict__[attribute]
    function = original.__func__ if isinstance(original, (staticmethod, classmethod)) else original

    def timed(*args, **kwargs):
        with clock.layer(name):
            return function(*args, **kwargs)

    setattr(owner, attribute, timed)
    stack.callback(setattr, owner, attribute, original)


def _environ(method: str, path: str, query: str, body: bytes, api_key: str | None) -> dict:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_HOST": "127.0.0.1",
    }
    if body:
        environ["CONTENT_TYPE"] = "application/json"
    if api_key:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {api_key}"
    return environ


def profile(setup: dict, api_key: str, requests: int) -> dict[str, dict[str, float]]:
    """Per endpoint: mean milliseconds per layer and in total (``wsgi``)."""
    from django.core.handlers.wsgi import WSGIHandler

    from bench import http_load

    application = WSGIHandler()
    return {
        name: _profile_one(application, name, request, None if request[1] == "/healthz" else api_key, requests)
        for name, request in http_load.profiled_requests(setup).items()
    }


def _profile_one(application, name: str, request: tuple, api_key: str | None, requests: int) -> dict[str, float]:
    from django.db import connection
    from rest_framework.renderers import JSONRenderer
    from rest_framework.views import APIView

    from artifacts import auth

    method, path, query, body = request
    clock = _Clock()

    def call():
        started: list = []
        result = application(_environ(method, path, query, body, api_key), lambda s, h, e=None: started.append(s))
        try:
            for _ in result:
                pass
        finally:
            with clock.layer("close"):
                result.close()
        assert started and started[0][:3] in ("200", "201"), (name, started, b"".join(result))

    def sql_timed(execute, sql, params, many, context):
        with clock.layer("auth SQL" if "key_sha256" in sql else "SQL"):
            return execute(sql, params, many, context)

    for _ in range(20):
        call()
    blocks = []
    with ExitStack() as stack:
        _wrap(stack, APIView, "dispatch", clock, "drf")
        _wrap(stack, APIView, "finalize_response", clock, "drf")
        _wrap(stack, JSONRenderer, "render", clock, "render")
        _wrap(stack, auth.ApiKeyAuthentication, "authenticate", clock, "drf")
        stack.enter_context(connection.execute_wrapper(sql_timed))
        _wrap_handlers(stack, clock)
        # In BLOCKS blocks, of which the fastest is kept: the machine's other work only ever adds time.
        per_block = max(1, requests // BLOCKS)
        for _ in range(BLOCKS):
            clock.totals.clear()
            started = time.perf_counter()
            for _ in range(per_block):
                with clock.layer("middleware"):
                    call()
            wall = time.perf_counter() - started
            figures = {layer: clock.totals.get(layer, 0.0) * 1000 / per_block for layer in LAYERS}
            figures["wsgi"] = wall * 1000 / per_block
            blocks.append(figures)
    return min(blocks, key=lambda figures: figures["wsgi"])


def _wrap_handlers(stack: ExitStack, clock: _Clock) -> None:
    """Time each API view's get/post as ``view`` (the liveness probe, a function, stays in ``middleware``)."""
    from django.urls import get_resolver

    seen = set()
    for pattern in _patterns(get_resolver().url_patterns):
        view_class = getattr(pattern.callback, "view_class", None)
        if view_class is None:
            continue
        for klass in view_class.__mro__:
            for method in ("get", "post"):
                if method in klass.__dict__ and (klass, method) not in seen:
                    seen.add((klass, method))
                    _wrap(stack, klass, method, clock, "view")


def _patterns(patterns):
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            yield from _patterns(pattern.url_patterns)
        else:
            yield pattern


def worker(config: dict) -> dict:
    """Inside a Django worker (``bench/worker.py http_profile``): load part 3's data, profile every endpoint."""
    from bench import http_load

    setup = http_load.setup_worker(config)
    if config.get("cprofile"):
        return {"cprofile": _cprofile(setup, http_load.API_KEY, config["cprofile"], config.get("requests", 400))}
    return {"profile": profile(setup, http_load.API_KEY, config.get("requests", 400))}


def _cprofile(setup: dict, api_key: str, name: str, requests: int) -> str:
    """cProfile's top functions (by own time) of ``requests`` calls of one endpoint, as text."""
    import cProfile
    import pstats

    from django.core.handlers.wsgi import WSGIHandler

    from bench import http_load

    application = WSGIHandler()
    method, path, query, body = http_load.profiled_requests(setup)[name]
    key = None if path == "/healthz" else api_key

    def call():
        result = application(_environ(method, path, query, body, key), lambda s, h, e=None: None)
        for _ in result:
            pass
        result.close()

    for _ in range(20):
        call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(requests):
        call()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(
        int(os.environ.get("PROFILE_LINES", "45"))
    )
    return out.getvalue()


def profile_engine(engine: str, n: int, requests: int) -> dict[str, dict[str, float]]:
    """``profile`` of every read-only endpoint on a throwaway database of ``engine`` loaded with part 3's data."""
    from bench import common

    with common.throwaway_database(engine, "profile") as url:
        return common.run_worker("http_profile", url, {"n": n, "requests": requests})["profile"]


def table(results: dict[str, dict[str, float]]) -> str:
    header = ["endpoint", "wsgi ms", *[f"{layer} ms" for layer in LAYERS]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, figures in results.items():
        cells = [name, f"{figures['wsgi']:.3f}", *[f"{figures[layer]:.3f}" for layer in LAYERS]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--cprofile", metavar="ENDPOINT", help="print cProfile's top functions of one endpoint")
    args = parser.parse_args()
    from bench import common

    os.environ.setdefault("POWERCONTEXT_PREPARE_LOG", "1")
    if args.cprofile:
        with common.throwaway_database(args.engine, "profile") as url:
            config = {"n": args.n, "requests": args.requests, "cprofile": args.cprofile}
            print(common.run_worker("http_profile", url, config)["cprofile"])
        return
    result = profile_engine(args.engine, args.n, args.requests)
    print(table(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
