"""The environment variables of the PowerContext integrations: one scheme, read in one place.

Every host integration (the MCP server, the Hermes memory provider, ...) names the three things they all need
the same way, so one set of exports configures them all:

========================  ==============================================================================
variable                  meaning
========================  ==============================================================================
``POWERCONTEXT_URL``      the PowerContext server, e.g. http://127.0.0.1:8000
``POWERCONTEXT_API_KEY``  the API key (sent only as the ``Authorization`` header)
``POWERCONTEXT_SCOPE``    the scope used when a call names none, e.g. ``project:demo``
========================  ==============================================================================

An integration's own options keep the ``POWERCONTEXT_`` prefix followed by the option's name (the Hermes
provider's ``POWERCONTEXT_MAX_BYTES``, ``POWERCONTEXT_TIMEOUT``, ...).

The Hermes provider used to read ``POWERCONTEXT_BASE_URL`` and ``POWERCONTEXT_SCOPE_ID``. For one release those
old names are still read, by every integration, with a ``DeprecationWarning`` and a warning logged on
``powercontext_client.environment`` naming both names (never a value). When the new name is set too, it wins and
the old one is ignored, with the same warning saying so. An empty value counts as unset.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping

URL = "POWERCONTEXT_URL"
API_KEY = "POWERCONTEXT_API_KEY"
SCOPE = "POWERCONTEXT_SCOPE"

# Current name -> the old name still read for one release (after it, the entry goes and the old name is unset).
DEPRECATED_NAMES: Mapping[str, str] = {URL: "POWERCONTEXT_BASE_URL", SCOPE: "POWERCONTEXT_SCOPE_ID"}

logger = logging.getLogger(__name__)


def read_variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the environment variable ``name``, else of its deprecated old name; None when neither is set.

    ``environ`` defaults to ``os.environ``. Reading an old name, or an old name set beside the new one (which
    then wins), warns with a ``DeprecationWarning`` and a logged warning that name both variables.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(name) or None
    old = DEPRECATED_NAMES.get(name)
    if old is None or not environ.get(old):
        return value
    if value is not None:
        _warn(f"{old} is deprecated and ignored: {name} is set and wins; remove {old}")
        return value
    _warn(f"{old} is deprecated: rename it to {name} (the old name stops being read in the next release)")
    return environ[old]


def _warn(message: str) -> None:
    # The warning is for code and test runs (hidden by default outside __main__); the log line is for the
    # person running the host, who sees its log and not Python's warnings.
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    logger.warning(message)
