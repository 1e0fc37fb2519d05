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

POOL_RULES: dict[str, str] = {
    "FREE-FORWARD": "free_blocks on any live pool: each live pool's state changes exactly "
    "as a direct free_blocks of the entries naming its blocks (list order, same evict_first) "
    "would change it; refused (RefCountUnderflow, nothing changed) iff some live pool's "
    "entries over-free a block",
    "DROP-GONE": "drop_pool changes no state; a dropped pool never comes back, its state never "
    "changes again, and free_blocks drops the entries naming its blocks",
    "POOL-FRAME": "every call but free_blocks changes only its own pool, and names no other "
    "pool's non-null block unless refused (ForeignBlock); a refused call changes no pool",
}
"""The rules of a world of several pools (docs/semantics.md: free_blocks's forwarding, the
ForeignBlock refusals, DropPool), beside RULES, which speak of one pool. Proved for two
pools at fixed N by ``proofs/twopool.py``."""
