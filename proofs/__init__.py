"""kvpool.proofs -- z3 proofs: BMC, fixed-N induction, unbounded induction, refinement; cvc5.

>>> from kvpool.proofs import run
>>> rows = run("fast")  # doctest: +SKIP

Each :class:`ObligationResult` carries the obligation, the invariant names
(verbatim INV-* plus ORD-*/RES-*/WATCH-FIRE for ordering and result rules),
the technique ("z3 BMC", "z3 induction (fixed N)", "z3 induction", "refinement",
"cvc5 (SMT-LIB 2 from z3)", "z3 Spacer (fixed N)"), bounds, status and time.
"""

from .runner import PROFILES, ObligationResult, run

__all__ = ["PROFILES", "ObligationResult", "run"]
