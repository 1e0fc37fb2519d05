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


def simplify(e: z3.ExprRef) -> z3.ExprRef:
    """``e`` simplified by z3, the result independent of the process's history."""
    return z3.simplify(e, sort_disjunctions=False)
