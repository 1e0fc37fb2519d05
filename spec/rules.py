"""Names for the rules about results and order, beside the INV-* state invariants.

Invariants say what holds in every state; these say what each operation must do.
They are the rows of ``make verify``'s matrix after the invariants, and the names
the proofs, the lockstep tests and the oracle use when a result is wrong.
"""

from __future__ import annotations

RULES: dict[str, str] = {
    "ORD-HANDOUT": "get_new_blocks hands out the first n blocks of the queue, in order, "
    "each keyless with ref_cnt 1",
    "ORD-RELEASE": "free_blocks: the new queue is FRONT (list order) ++ old queue ++ BACK "
    "(list order)",
    "ORD-UNPIN": "unpin_blocks: blocks reaching ref_cnt 0 join the tail in list order, "
    "keyed or not",
    "WATCH-FIRE": "a watcher fires once, only when its block is handed out or the cache "
    "is reset, in registration order",
    "ERR-ATOMIC": "a refused call raises its error kind and changes nothing",
    "RES-CACHED": "get_cached_block returns the oldest holder of the key, None iff none",
    "RES-RESET": "reset_prefix_cache succeeds iff no non-null block is in use",
    "RES-NUMFREE": "get_num_free_blocks is the number of non-null blocks with ref_cnt 0",
}
