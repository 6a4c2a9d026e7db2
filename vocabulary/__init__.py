"""The shared vocabulary of PowerContext: pure Python, no Django, imported by every layer.

Families, limits, identity escaping, the envelope markers, the citation identity (and the parser of
citations as prepared content prints them), the bounds on client JSON and the domain errors are each
defined once here. The assembly core, storage, recall, the HTTP layer, the operator
tools and the fixture loader import them; this package imports nothing of theirs.
"""
