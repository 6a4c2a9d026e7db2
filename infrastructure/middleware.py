"""Middleware that only the browser pages need, skipped for the API and the probes.

The admin and the operator tools need sessions, the logged-in user and messages; the API authenticates
every request with its Bearer key (DRF) and has no cookies, forms or messages, and the probes and the metrics
answer without a user at all. Running the three for every such request cost CPU on the hot path (prepare) and
on ``/healthz``, the framework's floor, for nothing. (CSRF protection stays as Django ships it: the
API's views are exempt from it anyway.) Each class here is Django's own
(so the admin's checks recognize it), bypassed for paths under ``/v1/``.
"""

from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware

API_PREFIXES = ("/v1/",)
WITHOUT_PAGES = frozenset({"/healthz", "/readyz", "/metrics"})
"""The probes and the metrics: no session, user or messages either."""


def is_api_request(request) -> bool:
    """Whether the request is one of the API's, or a probe's or the metrics' (none of them a browser page)."""
    path = request.path_info
    return path.startswith(API_PREFIXES) or path in WITHOUT_PAGES


class _PagesOnly:
    """Mixed in before a Django middleware: the API's requests pass straight through."""

    async_capable = False  # served by WSGI (gunicorn, runserver)

    def __call__(self, request):
        if is_api_request(request):
            return self.get_response(request)
        return super().__call__(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if is_api_request(request) or not hasattr(super(), "process_view"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class PagesSessionMiddleware(_PagesOnly, SessionMiddleware):
    pass


class PagesAuthenticationMiddleware(_PagesOnly, AuthenticationMiddleware):
    pass


class PagesMessageMiddleware(_PagesOnly, MessageMiddleware):
    pass
