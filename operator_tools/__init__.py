"""Operator tools in the admin (staff only): the citation resolver and the prepare inspector.

The tools read through storage (``artifacts.selectors``) and the prepare runtime
(``assembly.runtime``); they write nothing. Nothing imports this app except ``powercontext/urls.py``,
which wires its two views; its ``admin`` module links them from the admin index.
"""
