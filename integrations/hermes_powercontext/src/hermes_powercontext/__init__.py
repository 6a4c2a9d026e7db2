"""PowerContext memory provider for Hermes Agent.

``python -m hermes_powercontext install`` writes the plugin shim into ``$HERMES_HOME/plugins/powercontext``;
the provider itself is :class:`hermes_powercontext.provider.PowerContextMemoryProvider` (importing it needs
Hermes Agent installed).
"""

__version__ = "0.1.0"
