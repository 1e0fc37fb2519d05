"""A BMC counterexample of a seeded bug is confirmed by replaying it on the spec with the
same bug (``runner._replay_ops``): the replay must see what the encoding saw.

Found on 2026-12-06: ``unpin-append-always`` appends a block to the free queue at every
decrement. With the block listed twice, the encoding's queue (an array) holds it twice
and breaks INV-FREE's "exactly once"; the spec's queue is an ordered set, where the
second append changes nothing, so the replay said "NOT confirmed" and failed
``make verify`` whenever z3 happened to pick that counterexample (which counterexample
it picks depends on what the process built before)."""

from __future__ import annotations

from kvpool.proofs import runner
from kvpool.proofs.mutants import BuggyWorld
from kvpool.spec.ops import BlockRef, Touch, UnpinBlocks

TWICE = (BlockRef(0, 1), BlockRef(0, 1))
TRACE = [Touch(blocks=TWICE), UnpinBlocks(blocks=TWICE, watcher=0)]


def test_a_block_appended_twice_is_confirmed_as_inv_free() -> None:
    w = BuggyWorld.make("unpin-append-always", 5, False, False)
    verdict = runner._replay_ops(w, "INV-FREE", list(TRACE))
    assert verdict == "confirmed at step 2: INV-FREE: block 1 queued twice"


def test_the_same_trace_without_the_bug_confirms_nothing() -> None:
    # seeded the other way: the check must not fire on a correct unpin
    w = BuggyWorld.make("watcher-kept", 5, False, False)
    assert runner._replay_ops(w, "INV-FREE", list(TRACE)) == "NOT confirmed by replay"
    assert w.queued_twice == ()
