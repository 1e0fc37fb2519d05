"""The findings on vLLM 0.33.0's real pool, as minimal traces (see docs/errata.md).

Each :class:`Finding` is a short trace, the rule or invariant the oracle reports when
it replays the trace on vLLM, and how the finding arises: ``valid use``, ``bad input``
(a call the semantics refuses) or ``faulty callback`` (a watcher that raises or calls
back into the pool). ``tests/test_oracle_findings.py`` replays every one on vLLM
(the oracle must still report it) and on ``reference`` (which must pass it).
``python -m kvpool.oracle.findings DIR`` writes them as trace files.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvpool.spec.events import BlockRemoved
from kvpool.spec.ops import (
    BlockRef,
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    EmitCachedBlockEvents,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetCachedBlockGroups,
    GetNewBlocks,
    IsBlockWritable,
    MoveBlockHashes,
    Request,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)

from .traceformat import SavedTrace, op_to_json

Pools = tuple[tuple[int, bool, bool], ...]


@dataclass(frozen=True)
class FailsAt:
    """Where vLLM 0.33.0 fails one trace of an erratum, and so what names the erratum.

    ``step``: the erratum's first divergent call, the step (1-based, a watcher script
    counting as a step, as :attr:`.tracereplay.Divergence.step`) where vLLM 0.33.0 fails
    the trace; ``signature``: what it fails with there (:func:`.conformance.signature`;
    its rule comes first). A target is named after the erratum by this trace only when
    it fails the trace at ``step`` (or later, when vLLM's own step varies: ``later``),
    with ``signature`` (or one of ``also``). A target that parts from the trace before
    the erratum's call does so for a reason of its own (a pool whose ``touch`` leaves a
    block free fails every trace that touches a free block, at the touch); one that
    passes the erratum's call and fails a later one shows another bug there (a pool
    that fires a watcher twice passes ``unpin-one-watcher``'s second unpin and breaks
    INV-WATCH at the ``get_new_blocks`` after it). ``tests/test_errata_step.py`` replays
    every trace on vLLM 0.33.0's pool and checks these records.
    """

    step: int
    signature: str
    later: bool = False
    """vLLM's own step varies from process to process (the iteration order of a set of
    bytes keys follows ``PYTHONHASHSEED``): it fails at ``step`` or later, never before."""
    also: tuple[str, ...] = ()
    """Further signatures of the same fault at the same call on a target whose state shows
    more than vLLM's (each with its reason where it is recorded)."""

    def names(self, step: int, signature: str) -> bool:
        """Does a target that fails the trace at ``step`` with ``signature`` show this erratum?"""
        at = step == self.step or (self.later and step > self.step)
        return at and signature in (self.signature, *self.also)

    @property
    def rule(self) -> str:
        """The rule of :attr:`signature` (an invariant's name, else what precedes " at ")."""
        return self.signature.split(" at ", 1)[0].split(" (", 1)[0]


Variant = tuple[Pools, tuple[Any, ...], FailsAt]
"""Another trace of a finding: its pools, its steps (as :attr:`Finding.steps`) and where
vLLM 0.33.0 fails it."""


@dataclass(frozen=True)
class Finding:
    name: str
    title: str
    arises_from: str
    """valid use | bad input | faulty callback"""
    rule: str
    """What the oracle reports when it replays the trace on vLLM 0.33.0."""
    pools: Pools
    steps: tuple[Any, ...]
    """Ops, or ("script", watcher, raise, op-or-None) for a watcher's behaviour."""
    at: FailsAt
    """Where vLLM 0.33.0 fails :attr:`steps`, and with what signature."""
    log_symptom: Callable[[Sequence[object], Sequence[object]], bool] | None = None
    """For an erratum of the KV event log: does a difference between the spec's log and
    the target's (each from their first difference on) show it? A search can meet the
    erratum at another call than its own trace's, so that it shows as another rule (the
    log or a ``take_events`` result differs rather than INV-EVENTS): the oracle names a
    finding by this when its signature names no erratum (:func:`log_erratum`)."""
    other_traces: tuple[Variant, ...] = ()
    """Other minimal traces of the same fault, each failing on vLLM 0.33.0 under another
    signature (another call that reaches the same unchecked code, another bad value
    that makes it crash rather than go through). A search that meets the fault under
    any of them names the finding after this erratum
    (:func:`.conformance.errata_signatures`), so that ``--all`` lists it once."""

    def trace(self) -> SavedTrace:
        return self._saved(self.pools, self.steps, self.at)

    def traces(self) -> list[SavedTrace]:
        """The erratum's trace, then each of :attr:`other_traces`."""
        return [saved for saved, _ in self.traces_at()]

    def traces_at(self) -> list[tuple[SavedTrace, FailsAt]]:
        """Each trace (:meth:`traces`) with where vLLM 0.33.0 fails it."""
        return [
            (self.trace(), self.at),
            *((self._saved(p, s, at), at) for p, s, at in self.other_traces),
        ]

    def _saved(self, pools: Pools, steps_: tuple[Any, ...], at: FailsAt) -> SavedTrace:
        steps: list[dict[str, Any]] = []
        for s in steps_:
            if isinstance(s, tuple) and s and s[0] == "script":
                _, wid, raises, op = s
                note = f"script watcher {wid}: {'raises ' if raises else ''}"
                note += f"calls {op!r}" if op is not None else ""
                steps.append(
                    {
                        "note": note,
                        "script": {
                            "watcher": wid,
                            "raise": raises,
                            "call": op_to_json(op) if op is not None else None,
                        },
                    }
                )
            else:
                steps.append({"call": op_to_json(s)})
        return SavedTrace(
            list(pools),
            steps,
            "vllm==0.33.0",
            "exact" if self.arises_from == "valid use" else "robust",
            {
                "rule": at.rule,
                "finding": self.name,
                "step": at.step,
                "signature": at.signature,
                **({"or_later": True} if at.later else {}),
                **({"also": list(at.also)} if at.also else {}),
            },
        )


def extra_removals(spec: Sequence[object], target: Sequence[object]) -> bool:
    """The target logs every event the spec logs, and more ``BlockRemoved`` besides: a key
    announced removed while another block still held it (the spec announces it once,
    when the last block holding it drops it)."""
    more = Counter(target) - Counter(spec)
    return (
        bool(more)
        and not Counter(spec) - Counter(target)
        and all(isinstance(e, BlockRemoved) for e in more)
    )


def reordered(spec: Sequence[object], target: Sequence[object]) -> bool:
    """The same events in another order."""
    return list(spec) != list(target) and Counter(spec) == Counter(target)


P1 = ((8, True, False),)
P1E = ((8, True, True),)
OFF = ((8, False, False),)
"""One pool with prefix caching off."""
TWO = ((4, True, False), (4, True, False))
ONE_BLOCK = ((1, True, False),)
"""A pool of the null block alone: nothing is ever free."""

_REQ = Request((b"h0:a",), tuple(range(9700, 9716)))
"""A request of one block of 16 tokens (one hash unit at block size 16)."""

_REQ2 = Request((b"h0:a", b"h0:aa"), tuple(range(9700, 9732)))
"""A request of two hash units: one block of 32 tokens."""

_PREFIX = Request(tuple(b"p" + b"abcdef"[: i + 1] for i in range(6)))
"""A request of six prefix hashes: one block can hold a key for each (a primary key and
five further entries: partial prefixes inside the block)."""

_DIFFERS = "error kind differs at {}: spec {}, target success"
"""The signature of a call vLLM takes where the semantics refuses it with a kind."""
_CRASH = "target crashed at {}: spec {}"
"""The signature of a call that crashes vLLM where the semantics refuses it with a kind."""

FINDINGS: tuple[Finding, ...] = (
    Finding(
        "unpin-one-watcher",
        "a second unpin of a shared block drops the first watcher",
        "valid use",
        "state differs",
        P1,
        (GetNewBlocks(1), Touch((1,)), UnpinBlocks((1,), 0), UnpinBlocks((1,), 1), GetNewBlocks(7)),
        # the second unpin replaces the first watcher. vLLM keeps no count of
        # registrations, so its state shows only the pending watchers differing; a pool
        # that counts them (kvpool's, with this bug seeded: mutant watcher-only-last)
        # breaks INV-WATCH at the same call, and the invariants are checked before the
        # states are compared (machine.state_problem)
        FailsAt(4, "state differs at UnpinBlocks (pending watchers)", also=("INV-WATCH",)),
    ),
    Finding(
        "removed-while-held",
        "BlockRemoved is logged while another block still holds the key",
        "valid use",
        "INV-EVENTS",
        P1E,
        (GetNewBlocks(2), CacheBlocks((1,), ("a",)), CacheBlocks((2,), ("a",)), EvictBlocks((1,))),
        FailsAt(4, "INV-EVENTS"),
        extra_removals,
    ),
    Finding(
        "further-entries-unordered",
        "a block's further entries are a set: dropped (BlockRemoved) in hash order, not in "
        "the order they were added",
        "valid use",
        "state differs",
        P1E,
        (
            GetNewBlocks(1),
            *(CachePartialBlock(_PREFIX, 1, 16 * n, 0, 16) for n in (6, 5, 4, 3, 2, 1)),
            EvictBlocks((1,)),
            TakeEvents(),
        ),
        # step 4: the block's second further entry, the first call whose set can be in
        # another order than the entries were added; vLLM fails there or at a later
        # CachePartialBlock, by the process's PYTHONHASHSEED
        FailsAt(4, "state differs at CachePartialBlock (further keys)", later=True),
        reordered,
    ),
    Finding(
        "watcher-sees-half-handout",
        "a reuse watcher runs while the call that fires it is half done: before the block "
        "is handed out (ref_cnt 0, its old key still cached and found by get_cached_block), "
        "or, in reset_prefix_cache, with the other watchers still pending",
        "faulty callback",
        "result differs: value",
        P1,
        (
            ("script", 0, False, IsBlockWritable(BlockRef(0, 1))),
            GetNewBlocks(1),
            UnpinBlocks((1,), 0),
            GetNewBlocks(7),
        ),
        FailsAt(4, "result differs: value at IsBlockWritable run by a watcher in GetNewBlocks"),
        other_traces=(
            # a watcher that resets the cache from inside reset_prefix_cache fires the
            # watchers the outer call has not popped yet: the outer call fires one
            (
                ((3, True, False),),
                (
                    Touch((1, 2)),
                    ("script", 0, False, ResetPrefixCache()),
                    UnpinBlocks((2, 1), 0),
                    ResetPrefixCache(),
                ),
                FailsAt(4, "fired differs at ResetPrefixCache"),
            ),
            # a watcher that looks its block's key up from inside get_new_blocks still
            # finds the block being handed out (its key is dropped after the watchers)
            (
                ((2, True, False),),
                (
                    GetNewBlocks(1),
                    CacheBlocks((1,), ("a",)),
                    ("script", 0, False, GetCachedBlock("a")),
                    UnpinBlocks((1,), 0),
                    GetNewBlocks(1),
                ),
                FailsAt(
                    5, "result differs: value at GetCachedBlock run by a watcher in GetNewBlocks"
                ),
            ),
        ),
    ),
    Finding(
        "watcher-error-escapes",
        "a raising watcher escapes get_new_blocks and loses the blocks it was handing out",
        "faulty callback",
        "target crashed",
        P1,
        (("script", 0, True, None), GetNewBlocks(1), UnpinBlocks((1,), 0), GetNewBlocks(7)),
        FailsAt(4, "target crashed (WatcherRaised)"),
    ),
    Finding(
        "negative-count",
        "get_new_blocks(-1) is accepted (a count that is no int crashes it)",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(-1),),
        FailsAt(1, "error kind differs at GetNewBlocks: spec InvalidArgument, target success"),
        other_traces=(  # TypeError: '>' of str and int
            (
                P1,
                (GetNewBlocks("2"),),
                FailsAt(1, _CRASH.format("GetNewBlocks", "InvalidArgument")),
            ),
        ),
    ),
    Finding(
        "double-free",
        "freeing a free block drives ref_cnt to -1 and queues it twice",
        "bad input",
        "error kind differs",
        P1,
        (FreeBlocks((1,)),),
        FailsAt(1, "error kind differs at FreeBlocks: spec RefCountUnderflow, target success"),
        other_traces=(
            # the same free of a free block, made by a watcher from inside the call that
            # fires it: reset_prefix_cache (a block of another pool) ...
            (
                ((3, False, False), (2, False, False)),
                (
                    GetNewBlocks(1),
                    UnpinBlocks((1,), 0),
                    ("script", 0, False, FreeBlocks((BlockRef(1, 1),), pool=1)),
                    ResetPrefixCache(),
                ),
                FailsAt(
                    4,
                    "error kind differs at FreeBlocks run by a watcher in ResetPrefixCache: "
                    "spec RefCountUnderflow, target success",
                ),
            ),
            # ... or get_new_blocks (fired twice, the watcher frees block 3 twice)
            (
                ((4, False, False),),
                (
                    GetNewBlocks(3),
                    UnpinBlocks((3, 2, 1), 0),
                    Touch((3,)),
                    ("script", 0, False, FreeBlocks((3,))),
                    GetNewBlocks(2),
                ),
                FailsAt(
                    5,
                    "error kind differs at FreeBlocks run by a watcher in GetNewBlocks: "
                    "spec RefCountUnderflow, target success",
                ),
            ),
        ),
    ),
    Finding(
        "over-free-in-one-call",
        "a block listed twice in one free_blocks call is released twice",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(1), FreeBlocks((1, 1))),
        FailsAt(
            2,
            "error kind differs at FreeBlocks: spec RefCountUnderflow, target success "
            "(a block listed twice)",
        ),
    ),
    Finding(
        "touch-foreign",
        "touch accepts another pool's block and unlinks it from that "
        "pool's queue while counting it in its own",
        "bad input",
        "error kind differs",
        ((4, True, False), (4, True, False)),
        (Touch((BlockRef(1, 1),), pool=0),),
        FailsAt(1, "error kind differs at Touch: spec ForeignBlock, target success"),
    ),
    Finding(
        "evict-negative-id",
        "evict_blocks([-1]) evicts the last block (Python indexing); an id past the "
        "last block is an assert",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(7), CacheBlocks((7,), ("a",)), EvictBlocks((-1,))),
        FailsAt(3, "error kind differs at EvictBlocks: spec InvalidArgument, target success"),
        other_traces=(  # AssertionError
            (P1, (EvictBlocks((8,)),), FailsAt(1, _CRASH.format("EvictBlocks", "InvalidArgument"))),
        ),
    ),
    Finding(
        "cache-free-block",
        "cache_blocks (cache_full_blocks, cache_partial_block, move_block_hashes) gives "
        "keys to a block nobody holds",
        "bad input",
        "error kind differs",
        P1,
        (CacheBlocks((1,), ("a",)),),
        FailsAt(1, "error kind differs at CacheBlocks: spec BlockNotInUse, target success"),
        other_traces=(
            (
                P1,
                (CacheFullBlocks(_REQ, (1,), 0, 1, 16, 0),),
                FailsAt(1, _DIFFERS.format("CacheFullBlocks", "BlockNotInUse")),
            ),
            (
                P1,
                (CachePartialBlock(_REQ, 1, 16, 0, 16),),
                FailsAt(1, _DIFFERS.format("CachePartialBlock", "BlockNotInUse")),
            ),
            (  # the keys moved onto block 2, which is free
                P1,
                (GetNewBlocks(1), CacheBlocks((1,), ("a",)), MoveBlockHashes(1, 2)),
                FailsAt(3, _DIFFERS.format("MoveBlockHashes", "BlockNotInUse")),
            ),
            (  # a free block that still holds a key: the assert guarding a promotion
                P1,
                (
                    GetNewBlocks(1),
                    CacheBlocks((1,), ("a",)),
                    FreeBlocks((1,)),
                    CacheBlocks((1,), ("b",)),
                ),
                FailsAt(4, _CRASH.format("CacheBlocks", "BlockNotInUse")),
            ),
        ),
    ),
    Finding(
        "unpin-not-callable",
        "unpin_blocks accepts a watcher that is not callable",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(1), UnpinBlocks((1,), "not callable")),
        FailsAt(2, "error kind differs at UnpinBlocks: spec InvalidArgument, target success"),
    ),
    Finding(
        "unpin-null-block",
        "unpin_blocks on the null block (or on a free block) is an assert, not a typed error",
        "bad input",
        "target crashed",
        P1,
        (UnpinBlocks((0,), 0),),
        FailsAt(1, "target crashed at UnpinBlocks: spec NullBlockMisuse"),
        other_traces=(  # the same assert: ref_cnt > 0
            (
                P1,
                (UnpinBlocks((1,), 0),),
                FailsAt(1, _CRASH.format("UnpinBlocks", "RefCountUnderflow")),
            ),
        ),
    ),
    # -- vLLM's calls on blocks with several keys: their arguments are not validated ----
    Finding(
        "full-blocks-unchecked",
        "cache_full_blocks crashes on a bad block size, group, count or request "
        "(ZeroDivisionError, OverflowError, ValueError, TypeError, AttributeError, "
        "AssertionError) instead of refusing it, or goes through on counts that do not "
        "match its blocks",
        "bad input",
        "target crashed",
        P1,
        (GetNewBlocks(1), CacheFullBlocks(_REQ, (1,), 0, 1, 0, 0)),
        FailsAt(2, "target crashed at CacheFullBlocks: spec InvalidArgument"),
        other_traces=(
            (  # 2 of 1 block
                P1,
                (GetNewBlocks(1), CacheFullBlocks(_REQ, (1,), 0, 2, 16, 0)),
                FailsAt(2, _DIFFERS.format("CacheFullBlocks", "InvalidArgument")),
            ),
            (  # cache_blocks: more keys than blocks
                P1,
                (CacheBlocks((), ("k1", "k2")),),
                FailsAt(1, _DIFFERS.format("CacheBlocks", "InvalidArgument")),
            ),
        ),
    ),
    Finding(
        "partial-block-accepts-bad-size",
        "cache_partial_block accepts a block size of 0 (or a bad token count or flag)",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(1), CachePartialBlock(_REQ, 1, 16, 0, 0)),
        FailsAt(2, _DIFFERS.format("CachePartialBlock", "InvalidArgument")),
    ),
    Finding(
        "partial-block-crashes",
        "cache_partial_block crashes on a bad group, block size or request "
        "(OverflowError, AssertionError, TypeError) instead of refusing it",
        "bad input",
        "target crashed",
        P1,
        (GetNewBlocks(1), CachePartialBlock(_REQ, 1, 16, -1, 16)),
        FailsAt(2, _CRASH.format("CachePartialBlock", "InvalidArgument")),
    ),
    Finding(
        "move-to-null-block",
        "move_block_hashes moves a block's keys onto the null block",
        "bad input",
        "error kind differs",
        P1,
        (GetNewBlocks(1), CacheBlocks((1,), ("a",)), MoveBlockHashes(1, 0)),
        FailsAt(3, _DIFFERS.format("MoveBlockHashes", "NullBlockMisuse")),
    ),
    Finding(
        "move-to-foreign",
        "move_block_hashes moves a block's keys onto another pool's block",
        "bad input",
        "error kind differs",
        ((4, True, False), (4, True, False)),
        (
            GetNewBlocks(1),
            CacheBlocks((1,), ("a",)),
            MoveBlockHashes(BlockRef(0, 1), BlockRef(1, 1)),
        ),
        FailsAt(3, _DIFFERS.format("MoveBlockHashes", "ForeignBlock")),
    ),
    Finding(
        "move-to-non-block",
        "move_block_hashes crashes (AttributeError) on a target that is no block",
        "bad input",
        "target crashed",
        P1,
        (GetNewBlocks(1), CacheBlocks((1,), ("a",)), MoveBlockHashes(1, "x")),
        FailsAt(3, _CRASH.format("MoveBlockHashes", "InvalidArgument")),
    ),
    Finding(
        "groups-crash",
        "get_cached_block by groups crashes on a key that is not bytes (TypeError) or a "
        "group id that does not fit 4 unsigned bytes (OverflowError) instead of refusing it",
        "bad input",
        "target crashed",
        P1,
        (GetCachedBlockGroups("h0:a", (0,)),),
        FailsAt(1, _CRASH.format("GetCachedBlockGroups", "InvalidArgument")),
    ),
    Finding(
        "groups-bad-group-missed",
        "get_cached_block by groups answers a miss when a bad group id comes after a group "
        "that misses, instead of refusing the call",
        "bad input",
        "error kind differs",
        P1,
        (GetCachedBlockGroups(b"h0:a", (0, -1)),),
        FailsAt(1, _DIFFERS.format("GetCachedBlockGroups", "InvalidArgument")),
    ),
    Finding(
        "emit-events-negative-count",
        "emit_cached_block_events accepts a negative count of cached blocks (and crashes, "
        "IndexError, on a count past the request's blocks)",
        "bad input",
        "error kind differs",
        P1E,
        (EmitCachedBlockEvents(_REQ, -1, 16, 0),),
        FailsAt(1, _DIFFERS.format("EmitCachedBlockEvents", "InvalidArgument")),
        other_traces=(
            (
                P1E,
                (EmitCachedBlockEvents(_REQ, 2, 16, 0),),  # 2 blocks of a 1-block request
                FailsAt(1, _CRASH.format("EmitCachedBlockEvents", "InvalidArgument")),
            ),
        ),
    ),
    # -- the rest of the bad input a robust --all run meets (12-05, sorted 12-06) --------
    Finding(
        "insufficient-blocks-untyped",
        "get_new_blocks beyond the free blocks raises a bare ValueError, not a typed "
        "error (from inside a watcher it escapes the outer call)",
        "bad input",
        "target crashed",
        ONE_BLOCK,
        (GetNewBlocks(1),),
        FailsAt(1, _CRASH.format("GetNewBlocks", "InsufficientFreeBlocks")),
        other_traces=(
            (
                ((2, True, False),),
                (
                    GetNewBlocks(1),
                    ("script", 0, False, GetNewBlocks(1)),
                    UnpinBlocks((1,), 0),
                    GetNewBlocks(1),
                ),
                FailsAt(4, "target crashed at GetNewBlocks (ValueError)"),
            ),
            (  # ... or inside reset_prefix_cache
                ((2, True, False),),
                (
                    GetNewBlocks(1),
                    ("script", 0, False, GetNewBlocks(2)),
                    UnpinBlocks((1,), 0),
                    ResetPrefixCache(),
                ),
                FailsAt(4, "target crashed at ResetPrefixCache (ValueError)"),
            ),
        ),
    ),
    Finding(
        "caching-off-caches",
        "with prefix caching off, cache_blocks, cache_full_blocks and cache_partial_block "
        "cache keys all the same",
        "bad input",
        "error kind differs",
        OFF,
        (GetNewBlocks(1), CacheBlocks((1,), ("a",))),
        FailsAt(2, _DIFFERS.format("CacheBlocks", "CachingDisabled")),
        other_traces=(
            (
                OFF,
                (GetNewBlocks(1), CacheFullBlocks(_REQ, (1,), 0, 1, 16, 0)),
                FailsAt(2, _DIFFERS.format("CacheFullBlocks", "CachingDisabled")),
            ),
            (  # and crashes on a bad size
                OFF,
                (CacheFullBlocks(_REQ, (1,), 0, 1, 32, 0),),
                FailsAt(1, _CRASH.format("CacheFullBlocks", "CachingDisabled")),
            ),
            (
                OFF,
                (GetNewBlocks(1), CachePartialBlock(_REQ, 1, 16, 0, 16)),
                FailsAt(2, _DIFFERS.format("CachePartialBlock", "CachingDisabled")),
            ),
        ),
    ),
    Finding(
        "foreign-block-unchecked",
        "is_block_writable, unpin_blocks and the caching calls take another pool's block "
        "(unpin_blocks: an assert when it is free there)",
        "bad input",
        "error kind differs",
        TWO,
        (GetNewBlocks(1), UnpinBlocks((BlockRef(0, 1),), 0, pool=1)),
        FailsAt(2, _DIFFERS.format("UnpinBlocks", "ForeignBlock")),
        other_traces=(
            (
                TWO,
                (GetNewBlocks(1), IsBlockWritable(BlockRef(0, 1), pool=1)),
                FailsAt(2, _DIFFERS.format("IsBlockWritable", "ForeignBlock")),
            ),
            (
                TWO,
                (UnpinBlocks((BlockRef(1, 1),), 0, pool=0),),
                FailsAt(1, _CRASH.format("UnpinBlocks", "ForeignBlock")),
            ),
            (
                TWO,
                (GetNewBlocks(1), CacheBlocks((BlockRef(0, 1),), ("a",), pool=1)),
                FailsAt(2, _DIFFERS.format("CacheBlocks", "ForeignBlock")),
            ),
            (
                TWO,
                (GetNewBlocks(1), CacheFullBlocks(_REQ, (BlockRef(0, 1),), 0, 1, 16, 0, pool=1)),
                FailsAt(2, _DIFFERS.format("CacheFullBlocks", "ForeignBlock")),
            ),
            (  # another pool's block that holds a key: the assert guarding a promotion
                TWO,
                (
                    GetNewBlocks(1),
                    CacheBlocks((1,), ("a",)),
                    CacheFullBlocks(_REQ, (BlockRef(0, 1),), 0, 1, 16, 0, pool=1),
                ),
                FailsAt(3, _CRASH.format("CacheFullBlocks", "ForeignBlock")),
            ),
            (
                TWO,
                (GetNewBlocks(1), CachePartialBlock(_REQ, BlockRef(0, 1), 16, 0, 16, pool=1)),
                FailsAt(2, _DIFFERS.format("CachePartialBlock", "ForeignBlock")),
            ),
        ),
    ),
    Finding(
        "null-block-ignored",
        "cache_blocks and evict_blocks take the null block and do nothing, instead of refusing it",
        "bad input",
        "error kind differs",
        P1,
        (CacheBlocks((0,), ("a",)),),
        FailsAt(1, _DIFFERS.format("CacheBlocks", "NullBlockMisuse")),
        other_traces=(
            (
                P1,
                (EvictBlocks((0,)),),
                FailsAt(1, _DIFFERS.format("EvictBlocks", "NullBlockMisuse")),
            ),
        ),
    ),
    Finding(
        "already-cached-unchecked",
        "giving a key to a block that already holds one is an assert, or, further into "
        "the request, silently replaces its key (cache_blocks, cache_full_blocks, "
        "move_block_hashes)",
        "bad input",
        "target crashed",
        P1,
        (GetNewBlocks(1), CacheBlocks((1,), ("a",)), CacheBlocks((1,), ("b",))),
        FailsAt(3, _CRASH.format("CacheBlocks", "AlreadyCached")),
        other_traces=(
            (
                P1,
                (GetNewBlocks(2), CacheBlocks((1,), ("a",)), CacheBlocks((2, 1), ("b", "c"))),
                FailsAt(3, _DIFFERS.format("CacheBlocks", "AlreadyCached")),
            ),
            (
                P1,
                (
                    GetNewBlocks(1),
                    CacheBlocks((1,), ("a",)),
                    CacheFullBlocks(_REQ, (1,), 0, 1, 16, 0),
                ),
                FailsAt(3, _CRASH.format("CacheFullBlocks", "AlreadyCached")),
            ),
            (  # a block of 32 tokens over block 1's key of 16: taken for a promotion
                P1,
                (
                    GetNewBlocks(1),
                    CacheBlocks((1,), ("a",)),
                    CacheFullBlocks(_REQ2, (1,), 0, 1, 32, 0),
                ),
                FailsAt(3, _DIFFERS.format("CacheFullBlocks", "AlreadyCached")),
            ),
            (
                P1,
                (GetNewBlocks(2), CacheBlocks((1, 2), ("a", "b")), MoveBlockHashes(1, 2)),
                FailsAt(3, _CRASH.format("MoveBlockHashes", "AlreadyCached")),
            ),
        ),
    ),
    Finding(
        "free-non-block",
        "free_blocks crashes (AttributeError) on an entry that is no block",
        "bad input",
        "target crashed",
        P1,
        (FreeBlocks(("x",)),),
        FailsAt(1, _CRASH.format("FreeBlocks", "InvalidArgument")),
    ),
)


def log_erratum(spec: Sequence[object], target: Sequence[object]) -> str | None:
    """The erratum whose :attr:`Finding.log_symptom` a difference of two event logs shows."""
    for f in FINDINGS:
        if f.log_symptom is not None and f.log_symptom(spec, target):
            return f.name
    return None


def by_name(name: str) -> Finding:
    for f in FINDINGS:
        if f.name == name:
            return f
    raise LookupError(name)


def trace_file(name: str, i: int = 0) -> str:
    """The file name of an erratum's ``i``-th trace (0: its own, then its other traces)."""
    return f"{name}.json" if i == 0 else f"{name}.{i}.json"


def write(where: str | Path) -> list[Path]:
    """Every trace of every erratum, each with where vLLM 0.33.0 fails it (``violation``)."""
    out = []
    for f in FINDINGS:
        for i, saved in enumerate(f.traces()):
            out.append(saved.save(Path(where) / trace_file(f.name, i)))
    return out


if __name__ == "__main__":
    for p in write(sys.argv[1] if len(sys.argv) > 1 else "vectors/findings"):
        print(p)
