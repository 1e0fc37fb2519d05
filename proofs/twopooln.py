"""Two pools for every N: the obligations ``twopool.every_n_rows`` leaves at fixed N.

:mod:`kvpool.proofs.twopool` proves, for two pools at fixed (N_0, N_1) (``make verify``:
2+2, 3+3, 4+4), each pool's every INV-* and the rules of ``spec/rules.py``'s
:data:`~kvpool.spec.rules.POOL_RULES`; for every N_0, N_1 (``make proofs-deep``,
``twopool.every_n_rows``) only each part of the strengthened invariant ``props.strong``
of each pool. What that every-N part does not prove, listed in :data:`GAPS`:

* INV-CONSERVE and INV-WATCH in the spec's own words, their counts: every-N for two pools
  only in their strengthened forms (PERM, WATCH-PER-BLOCK), the counting module's ghost
  sums (:mod:`kvpool.proofs.counting`) not carried through a two-pool step;
* FREE-FORWARD, DROP-GONE and POOL-FRAME: fixed N only (``twopool.rules2`` counts over
  concrete blocks, and ORD-RELEASE inside FREE-FORWARD is the fixed-N one).
"""

from __future__ import annotations

GAPS: dict[str, str] = {
    "INV-CONSERVE": "each pool's count of free + in-use blocks (ghost sum C, per pool): "
    "every N for two pools only as PERM",
    "INV-WATCH": "each pool's registered == fired + pending (ghost sum P and counters, per "
    "pool): every N for two pools only as WATCH-PER-BLOCK",
    "FREE-FORWARD": "fixed N only (2+2..4+4, deep 6+6)",
    "DROP-GONE": "fixed N only (2+2..4+4, deep 6+6)",
    "POOL-FRAME": "fixed N only (2+2..4+4, deep 6+6)",
}
"""The two-pool obligations with no every-N proof before this module: name -> what was
there."""
