"""The operator tools' forms: a pasted citation, a citation's fields, and one prepare request."""

from __future__ import annotations

import json

from django import forms

from artifacts import selectors
from artifacts.models import Scope
from vocabulary.citation import Citation
from vocabulary.citation_text import CitationSyntaxError, citation_from_fields, parse_citation_text
from vocabulary.escaping import json_literal, short_identity
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


class TypedChoiceField(_EscapedChoiceMixin, forms.TypedChoiceField):
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


def _identity_field(label: str, *, required: bool = True) -> forms.CharField:
    return forms.CharField(label=label, strip=False, max_length=IDENTITY_FIELD_MAX_CHARACTERS, required=required)


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


def _scope_label(scope: Scope) -> str:
    label = json_literal(scope.scope_id)
    return f"{label} — {scope.title}" if scope.title else label


class InspectForm(forms.Form):
    # Scopes are chosen by primary key: option values never carry identities, which browsers would
    # submit with line breaks normalized to CRLF.
    scope = TypedChoiceField(label="Scope", coerce=int)
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
    api_key = TypedChoiceField(
        label="Run as API key",
        coerce=int,
        required=False,
        empty_value=None,
        help_text="Empty: as the operator (every scope readable). A key: only what its grants let it read, "
        "refused as the API would refuse it (403, 404, or 401 for a revoked key).",
    )
    legacy = forms.BooleanField(
        label="Legacy mode (omit assembly)",
        required=False,
        help_text="Prepare the legacy JSON envelope, as a request without an assembly field does.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scopes = {scope.pk: scope for scope in selectors.scope_list_all()}
        self.fields["scope"].choices = [(pk, _scope_label(scope)) for pk, scope in self.scopes.items()]
        keys = [
            (key.pk, f"{json_literal(key.name)}{' (revoked)' if key.revoked_at else ''}")
            for key in selectors.api_key_list_all()
        ]
        self.fields["api_key"].choices = [("", "— the operator (every scope) —"), *keys]

    def request_body(self) -> tuple[dict, list[dict]]:
        """The JSON body the API would receive for this form, and form-level errors (JSON syntax)."""
        data = self.cleaned_data
        query = data["query"].replace("\r\n", "\n")  # browsers submit textarea line breaks as CRLF
        body: dict = {"scope_id": self.scopes[data["scope"]].scope_id, "query": query}
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
