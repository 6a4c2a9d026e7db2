"""PowerContext as a LangGraph ``BaseStore``: puts are immutable memory revisions, reads carry exact citations."""

from .store import CitedItem, PowerContextStore, artifact_id_for, canonical_json

__all__ = ["CitedItem", "PowerContextStore", "artifact_id_for", "canonical_json"]
