"""Operator tools in the admin: the citation resolver and the prepare inspector (each behind its permissions).

The tools read through storage (``artifacts.selectors``) and the prepare runtime
(``assembly.runtime``); they write nothing. Nothing imports this app except ``powercontext/urls.py``,
which wires its two views behind the permissions ``access`` names; its ``admin`` module links them from the
admin index (only for staff who may use them).
"""
