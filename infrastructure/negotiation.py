"""Content negotiation: the API answers JSON, whatever the request accepts.

The API renders JSON only, so it disregards ``Accept`` rather than refusing it (RFC 9110 §12.5.1 lets a server
answer as if the response were not negotiated) and takes no ``?format=``: DRF negotiates before it authenticates,
so a 406 or a format's 404 answered a request without a key before its 401. ``format`` is thus a query parameter
like any other (unknown to every endpoint: 422 once authenticated). Also the cheap path: DRF's negotiation parses
the header and ranks it against every renderer, about a tenth of an exact read's time in Python.
"""

from rest_framework.negotiation import DefaultContentNegotiation


class ApiContentNegotiation(DefaultContentNegotiation):
    """DRF's choice of parser (by Content-Type); always the first renderer (JSON)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type
