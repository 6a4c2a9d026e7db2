"""The floor of part 3: a bare WSGI callable under the same gunicorn, no Django (what the server alone costs)."""

_BODY = b'{"status": "ok"}'
_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(_BODY)))]


def application(environ, start_response):
    """Answer every request 200 with a small JSON body, as ``/healthz`` does."""
    start_response("200 OK", _HEADERS)
    return [_BODY]
