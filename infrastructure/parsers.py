"""The API's JSON parser: a depth check on the raw body (``vocabulary.json_input``), then the decoder."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from vocabulary.escaping import encodable
from vocabulary.json_input import json_depth_problem, repeated_keys

REPEATED_KEY_SHOWN_CHARACTERS = 64
"""How much of a repeated key the error quotes (a key may be a megabyte long)."""


def _object_given_once(pairs: list[tuple[str, object]]) -> dict:
    """One JSON object, refused when it gives a key twice: which value counts would be a guess (a proxy may read the
    first where ``json.loads`` keeps the last), as for a query parameter given twice."""
    if repeated := repeated_keys(pairs):
        key = repeated[0]
        shown = key if len(key) <= REPEATED_KEY_SHOWN_CHARACTERS else key[:REPEATED_KEY_SHOWN_CHARACTERS] + "…"
        raise ParseError(f"the key {json.dumps(encodable(shown))} is given more than once in one object")
    return dict(pairs)


class BoundedJSONParser(JSONParser):
    """Refuses bodies nested deeper than MAX_JSON_DEPTH before the decoder recurses into them, and objects that give
    a key twice.

    The body is read as UTF-8 whatever ``charset`` the request names, and the text checked is the text decoded: JSON
    has no charset parameter (RFC 8259 §11), and decoding the body again by the named codec would hand the decoder a
    text the depth check never saw (``charset=unicode_escape`` turns ``\\u005b`` into ``[``, 50,000 deep).
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
        constant = json.strict_constant if self.strict else None
        try:
            return json.loads(text, object_pairs_hook=_object_given_once, parse_constant=constant)
        except ValueError as exc:  # what DRF's JSONParser says of a body it cannot decode
            raise ParseError(f"JSON parse error - {exc}") from None
