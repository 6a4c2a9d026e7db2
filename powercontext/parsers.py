"""The API's JSON parser: DRF's, after a depth check on the raw body (``vocabulary.json_input``)."""

import io

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from vocabulary.json_input import json_depth_problem


class BoundedJSONParser(JSONParser):
    """Refuses bodies nested deeper than MAX_JSON_DEPTH before the decoder recurses into them.

    The body is read as UTF-8 whatever ``charset`` the request names: JSON has no charset parameter (RFC 8259
    §11), and decoding it again by the named codec would hand the decoder a text the depth check never saw
    (``charset=unicode_escape`` turns ``\\u005b`` into ``[``, 50,000 deep).
    """

    def parse(self, stream, media_type=None, parser_context=None):
        data = stream.read() if stream is not None else b""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"the body is not UTF-8 (byte {exc.start})") from None
        problem = json_depth_problem(text)
        if problem:
            raise ParseError(problem)
        return super().parse(io.BytesIO(data), media_type, {**(parser_context or {}), "encoding": "utf-8"})
