"""The shared infrastructure every app builds on: the error shape and its handler, failover retry and standby
confirmation, metrics, the request context and log, the JSON parser and content negotiation, serializer fields,
OpenAPI helpers, query parameters, read-replica routing, and the settings accessors' machinery.

It imports Django, DRF and ``vocabulary``, never an app nor the project's wiring (``powercontext``): an app adds to it
from its own ``AppConfig.ready`` (``artifacts/apps.py`` registers its metrics collector and settings checks), and
``tests/unit/test_import_contract.py`` fails on any import against that direction (docs/architecture.md).
"""
