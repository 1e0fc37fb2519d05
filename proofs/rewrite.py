"""One ``simplify`` for every formula the proofs build: z3's, with nothing ordered by term ids.

``z3.simplify`` sorts the arguments of a disjunction it flattens by term id (its
``sort_disjunctions`` option, on by default), and a term's id is the order in which the
process first made it. The same source, translated after other formulas, then gave
another (equivalent) formula, and z3's search on quantified formulas follows their
shape: one obligation translated from ``unpin_blocks`` was proved in 5 s in a fresh
process and unknown at 240 s in ``make proofs-deep``, where ``touch`` and
``free_blocks`` were translated first. With the option off a disjunction keeps the
order in which it was written, and a formula depends on what it was made from alone
(``tests/test_rewrite.py`` shows both; the other orderings by id, ``sort_sums``,
``sort_store`` and ``bv_sort_ac``, are off by default and stay off).
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]

_IN_WRITTEN_ORDER = {"sort_disjunctions": False}
"""z3's options that keep a formula independent of term ids (the rest are off by default)."""


def simplify(e: z3.ExprRef) -> z3.ExprRef:
    """``e`` simplified by z3, the result independent of the process's history."""
    return z3.simplify(e, **_IN_WRITTEN_ORDER)


def selects_expanded(e: z3.ExprRef) -> z3.ExprRef:
    """:func:`simplify`, with a read of a conditional array pushed into its branches
    (``select(ite(c, a, b), i)`` as ``ite(c, select(a, i), select(b, i))``, z3's
    ``expand_select_ite``), so that a read of an array the spec builds as a lambda
    becomes its body at the index (z3 reduces ``select(lambda x. t, i)`` to ``t[i/x]``).
    An equivalent formula; on an instantiated hot-path query it leaves no lambda for
    the SMT-LIB export to lift into a quantified definition (``smtlib.lift_lambdas``):
    measured on ``touch``'s queue [5/9] (2026-12-06), its cores were then
    quantifier-free and cvc5 proved them in about 2 s each, against unknown at 8 s
    under each of its settings, and 35 s at a 60 s limit, with the definitions."""
    return z3.simplify(e, **_IN_WRITTEN_ORDER, expand_select_ite=True)
