"""The operator tools' forms: a pasted citation, a citation's fields, and one prepare request."""

from __future__ import annotations

import json

from django import forms

from artifacts import selectors
from artifacts.admin.filters import ROW_ID_TEXT
from artifacts.models import ApiKey, Scope
from vocabulary.citation import Citation
from vocabulary.citation_text import (
    CitationSyntaxError,
    citation_from_fields,
    identity_from_field,
    parse_citation_text,
)
from vocabulary.errors import NotFound
from vocabulary.escaping import is_invisible, json_literal, short_identity
from vocabulary.families import STORED_FAMILIES
from vocabulary.json_input import json_depth_problem
from vocabulary.limits import MAX_BYTES_DEFAULT, MAX_BYTES_MAX, MAX_BYTES_MIN, MAX_REVISION, QUERY_MAX_CHARACTERS

MAX_PASTE_CHARACTERS = 100_000
IDENTITY_FIELD_MAX_CHARACTERS = 1000
"""A generous bound on one typed identity field (a JSON literal may be longer than the identity it
escapes); the citation parser names the real limit."""
DEFAULT_ASSEMBLY = "{}"
_CODE_TEXTAREA = forms.Textarea(attrs={"rows": 6, "cols": 100, "spellcheck": "false", "class": "vLargeTextField"})
"""A wide textarea for pasted citations and JSON (no spell checking)."""


class _EscapedChoiceMixin:
    """A choice field whose refusal names the value sent as an identity is shown (``short_identity``), never raw.

    Django's message echoes the parameter as it came: a shared link could make it read as something else (a bidi
    override turns ``spoof:\u202eevil\u202c`` into "spoof:live").
    """

    def validate(self, value):
        try:
            super().validate(value)
        except forms.ValidationError as exc:
            if exc.code != "invalid_choice":
                raise
            raise forms.ValidationError(
                self.error_messages["invalid_choice"], code="invalid_choice", params={"value": short_identity(value)}
            ) from None


class ChoiceField(_EscapedChoiceMixin, forms.ChoiceField):
    pass


# --- the citation resolver ---------------------------------------------------------------------------


class _CitationForm(forms.Form):
    """A form naming one exact citation: ``cleaned_data["parsed"]``, or an error saying what is malformed."""

    def parse_citation(self, cleaned: dict) -> Citation:
        raise NotImplementedError

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            cleaned["parsed"] = self.parse_citation(cleaned)
        except CitationSyntaxError as exc:
            raise forms.ValidationError(f"Malformed citation: {exc}") from None
        return cleaned


class CitationTextForm(_CitationForm):
    citation = forms.CharField(
        label="Citation",
        strip=False,
        max_length=MAX_PASTE_CHARACTERS,
        widget=_CODE_TEXTAREA,
        help_text=(
            "The Scope, Artifact and (memory) Entry lines of a Markdown entry, or one legacy JSON item, "
            "exactly as the prepared content shows them. A whole entry is fine: body lines are ignored."
        ),
    )

    def parse_citation(self, cleaned: dict) -> Citation:
        return parse_citation_text(cleaned["citation"])


def _identity_field(label: str, *, required: bool = True, help_text: str = "") -> forms.CharField:
    return forms.CharField(
        label=label, strip=False, max_length=IDENTITY_FIELD_MAX_CHARACTERS, required=required, help_text=help_text
    )


class CitationFieldsForm(_CitationForm):
    scope = _identity_field("Scope")
    family = ChoiceField(label="Family", choices=[(family, family) for family in STORED_FAMILIES])
    artifact_id = _identity_field("Artifact id")
    revision = forms.IntegerField(label="Revision", min_value=1, max_value=MAX_REVISION)
    entry_id = _identity_field("Entry id", required=False)
    entry_version = _identity_field("Entry version", required=False)
    literals = forms.BooleanField(
        label="Fields are JSON string literals",
        required=False,
        help_text=(
            'Tick to type identities as prepared content prints them, e.g. "a\\u202eb" or "line\\nbreak"; '
            "otherwise each field is taken exactly as typed."
        ),
    )

    def parse_citation(self, cleaned: dict) -> Citation:
        return citation_from_fields(
            scope_id=cleaned["scope"],
            family=cleaned["family"],
            artifact_id=cleaned["artifact_id"],
            revision=cleaned["revision"],
            entry_id=cleaned.get("entry_id") or None,
            entry_version=cleaned.get("entry_version") or None,
            literals=cleaned.get("literals", False),
        )


# --- the prepare inspector ---------------------------------------------------------------------------

_TYPED = ("scope", "api_key")
"""The fields typed as identities."""


class InspectForm(forms.Form):
    # The scope and the key are typed, each found by one exact lookup: the page costs the same with ten scopes or
    # ten thousand (no select listing every one). A text input cannot carry a line break (browsers drop it), so an
    # identity holding one, or an invisible character, is typed as a JSON string literal with "literals" ticked.
    scope = _identity_field("Scope id", help_text="The scope's id, exactly (e.g. project:demo).")
    query = forms.CharField(
        label="Query",
        strip=False,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 100, "class": "vLargeTextField"}),
        help_text=f"1–{QUERY_MAX_CHARACTERS} characters with at least one non-whitespace one (the API's rule).",
    )
    max_bytes = forms.CharField(
        label="max_bytes",
        required=False,
        initial=str(MAX_BYTES_DEFAULT),
        widget=forms.TextInput(attrs={"size": 8}),
        help_text=(
            f"An integer from {MAX_BYTES_MIN} through {MAX_BYTES_MAX}; "
            f"empty means the API default, {MAX_BYTES_DEFAULT}."
        ),
    )
    assembly = forms.CharField(
        label="Assembly (JSON)",
        strip=False,
        required=False,
        initial=DEFAULT_ASSEMBLY,
        widget=_CODE_TEXTAREA,
        help_text=(
            'The request\'s "assembly" object, e.g. {"sections": [{"family": "experience", "limit": 2}, '
            '{"family": "memory", "limit": 5}], "show": ["confidence", "recall_rank"]}. {} means the defaults.'
        ),
    )
    selection = forms.CharField(
        label="Selection policy (JSON)",
        strip=False,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 100, "spellcheck": "false", "class": "vLargeTextField"}),
        help_text=(
            'The request\'s "selection" object, e.g. {"policy": "authority-v1", "min_score": 0.35, "max_tokens": 800}. '
            "Empty: no policy (today's selection). Each scope's authority tier is the one operators set on it."
        ),
    )
    api_key = _identity_field(
        "Run as API key",
        required=False,
        help_text="Empty: as the operator (every scope readable). A key's exact name, or its id (a whole number; a "
        "name that is one is typed as a literal): only what its grants let it read, refused as the API would refuse "
        "it (403, 404, or 401 for a revoked key).",
    )
    literals = forms.BooleanField(
        label="Scope id and key name are JSON string literals",
        required=False,
        help_text=(
            'Tick to type them as prepared content prints identities, e.g. "a\\u202eb" or "line\\nbreak"; '
            "otherwise each is taken exactly as typed."
        ),
    )
    legacy = forms.BooleanField(
        label="Legacy mode (omit assembly)",
        required=False,
        help_text="Prepare the legacy JSON envelope, as a request without an assembly field does.",
    )

    def __init__(self, data=None, *args, **kwargs):
        super().__init__(_as_literals(data), *args, **kwargs)

    def clean(self):
        cleaned = super().clean()
        literals = cleaned.get("literals", False)
        cleaned["api_key"] = cleaned.get("api_key") or None
        for field, find in (("scope", _scope_typed), ("api_key", _api_key_typed)):
            if cleaned.get(field) is not None:
                try:
                    cleaned[field] = find(cleaned[field], literals=literals)
                except forms.ValidationError as exc:
                    self.add_error(field, exc)
        return cleaned

    def request_body(self) -> tuple[dict, list[dict]]:
        """The JSON body the API would receive for this form, and form-level errors (JSON syntax)."""
        data = self.cleaned_data
        query = data["query"].replace("\r\n", "\n")  # browsers submit textarea line breaks as CRLF
        body: dict = {"scope_id": data["scope"].scope_id, "query": query}
        errors: list[dict] = []
        raw_max = data["max_bytes"].strip()
        if raw_max:
            try:
                body["max_bytes"] = int(raw_max, 10)
            except ValueError:
                body["max_bytes"] = raw_max  # refused by the API's own rule, with its message
        if not data["legacy"]:
            text = data["assembly"]
            if not text.strip():
                errors.append({"path": "assembly", "message": "enter an assembly object (e.g. {}) or tick legacy mode"})
            else:
                _json_into(body, "assembly", text, errors)
        if data["selection"].strip():
            _json_into(body, "selection", data["selection"], errors)
        return body, errors


def _shown_raw(text: str) -> bool:
    return any(char in "\r\n" or is_invisible(char) for char in text)


def _as_literals(data):
    """``data`` with a scope id or key name typed exactly that holds a line break or an invisible character typed as
    its JSON literal instead (and literals ticked): the same request, but the form shows it back escaped, as every
    identity on these pages is (a shared link's bidi control must not make the field read as another id)."""
    ticked = forms.BooleanField(required=False).clean(data.get("literals")) if data is not None else False
    if data is None or ticked or not any(_shown_raw(data.get(name) or "") for name in _TYPED):
        return data
    data = data.copy()
    for name in _TYPED:
        if (value := data.get(name)) and not ROW_ID_TEXT.fullmatch(value):
            data[name] = json_literal(value)
    data["literals"] = "on"
    return data


def _typed_identity(text: str, what: str, *, literals: bool) -> str:
    try:
        return identity_from_field(text, what, literals=literals)
    except CitationSyntaxError as exc:
        raise forms.ValidationError(str(exc)) from None


def scope_label(scope: Scope) -> str:
    """A scope as the inspector names it: its id as a JSON literal, and its title."""
    label = json_literal(scope.scope_id)
    return f"{label} — {scope.title}" if scope.title else label


def _scope_typed(text: str, *, literals: bool) -> Scope:
    """The scope whose id is ``text``; a form error naming the id (escaped) when there is none."""
    scope_id = _typed_identity(text, "scope id", literals=literals)
    try:
        return selectors.scope_get(scope_id=scope_id)
    except NotFound:
        raise forms.ValidationError(f"No scope has the id {json_literal(scope_id)}.") from None


def _api_key_typed(text: str, *, literals: bool) -> ApiKey:
    """The key ``text`` names: by id when it is a whole number (a literal starts with a quote), else by its exact
    name; a form error naming what was typed (escaped) when there is none."""
    if ROW_ID_TEXT.fullmatch(text):
        key, shown = selectors.api_key_find_by_id(api_key_id=int(text)), f"has the id {text}"
    else:
        name = _typed_identity(text, "key name", literals=literals)
        key, shown = selectors.api_key_find_by_name(name=name), f"is named {json_literal(name)}"
    if key is None:
        raise forms.ValidationError(f"No API key {shown}.")
    return key


def _json_into(body: dict, name: str, text: str, errors: list[dict]) -> None:
    """``body[name]`` = the JSON ``text``, or an error at ``name`` saying why it cannot be read."""
    if problem := json_depth_problem(text):
        errors.append({"path": name, "message": problem})
        return
    try:
        body[name] = json.loads(text)
    except json.JSONDecodeError as exc:
        errors.append(
            {"path": name, "message": f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"}
        )
