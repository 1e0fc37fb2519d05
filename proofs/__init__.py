"""kvpool.proofs -- z3 proofs: BMC, unbounded induction, the linked list's refinement.

>>> from kvpool.proofs import run
>>> rows = run("fast")  # doctest: +SKIP

Each :class:`ObligationResult` carries the obligation, the invariant names
(verbatim INV-* plus ORD-*/RES-*/WATCH-FIRE for ordering and result rules),
the technique ("z3 BMC", "z3 induction", "refinement"), bounds, status and time.
"""

from .runner import PROFILES, ObligationResult, run

__all__ = ["PROFILES", "ObligationResult", "run"]
