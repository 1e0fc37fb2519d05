"""The bug catalogue, twice: as a switch in the z3 encoding, and as a patched executable spec.

Each mutant names the obligations it must break. The runner asks z3 to refute
each (mutant, obligation) pair, decodes the counterexample into spec operations
and replays them on :class:`BuggyWorld` -- a subclass of the spec's ``World``
with the same bug (``spec/`` itself is never edited) -- to confirm the violation.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from kvpool.spec import (
    BlockRemoved,
    CacheBlocks,
    EvictBlocks,
    Firing,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    Op,
    Outcome,
    PoolState,
    ResetPrefixCache,
    Touch,
    UnpinBlocks,
    World,
)
from kvpool.spec.state import _HANDLERS, NULL_BLOCK, _Refused


@dataclass(frozen=True)
class Mutant:
    name: str
    idea: str
    bmc: tuple[str, ...]  # BMC obligations it must break
    induction: tuple[str, ...] = ()  # strengthened-invariant parts it must break


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "no-underflow-check", "free_blocks skips the double-free check", ("INV-REF",), ("INV-REF",)
    ),
    Mutant(
        "touch-no-remove",
        "touch forgets to pull a free block out of the queue",
        ("INV-FREE", "INV-CONSERVE"),
        ("PERM",),
    ),
    Mutant(
        "unpin-append-always",
        "unpin_blocks queues every entry, even one still in use",
        ("INV-FREE",),
        ("PERM",),
    ),
    Mutant(
        "touch-null", "touch counts a reference on the null block", ("INV-NULL",), ("INV-NULL",)
    ),
    Mutant(
        "watcher-kept",
        "get_new_blocks fires a watcher but keeps it pending",
        ("INV-WATCH", "WATCH-FIRE"),
        ("WATCH-PER-BLOCK", "WATCH-FIRE"),
    ),
    Mutant(
        "unpin-dup-watcher",
        "unpin_blocks registers a watcher already pending on the block again",
        ("INV-WATCH",),
        ("WATCH-PER-BLOCK",),
    ),
    Mutant(
        "evict-keeps-index",
        "evict_blocks clears the block's key but leaves it in the index",
        ("INV-CACHE",),
        ("INV-CACHE",),
    ),
    Mutant("cache-when-off", "cache_blocks works with caching off", ("INV-CACHE",), ("INV-CACHE",)),
    Mutant(
        "removed-per-block",
        "BlockRemoved for every block dropping a key (vLLM 0.33), not for the last one",
        ("INV-EVENTS",),
        ("INV-EVENTS",),
    ),
    Mutant(
        "stored-event-missing", "cache_blocks logs no BlockStored", ("INV-EVENTS",), ("INV-EVENTS",)
    ),
    Mutant("lifo-handout", "get_new_blocks takes from the back (LIFO/FIFO swap)", ("ORD-HANDOUT",)),
    Mutant("front-reversed", "free_blocks prepends FRONT in reverse list order", ("ORD-RELEASE",)),
    Mutant("evict-first-ignored", "free_blocks ignores evict_first", ("ORD-RELEASE",)),
    Mutant("cached-newest", "get_cached_block returns the newest holder", ("RES-CACHED",)),
    Mutant(
        "reset-ignores-use", "reset_prefix_cache clears even with blocks in use", ("RES-RESET",)
    ),
    Mutant("numfree-counts-null", "get_num_free_blocks counts the null block", ("RES-NUMFREE",)),
)

MUTANT_BY_NAME = {m.name: m for m in MUTANTS}


class BuggyWorld(World):
    """The executable spec with one bug of the catalogue."""

    bug: str = ""
    queued_twice: tuple[int, ...] = ()
    """Blocks a bug appended to the free queue while they were in it already. The spec's
    queue is an ordered set, so it cannot show a block there twice, where the encoding's
    queue (an array) does: a replay counts these as INV-FREE broken ("exactly once")."""

    def _enqueue(self, ps: PoolState, b: int) -> None:
        """Append ``b`` to the free queue's tail, as every bug here that queues a block
        does; a block queued already is recorded in :attr:`queued_twice` (the encoding's
        queue holds it twice, the ordered set here cannot)."""
        if b in ps.free:
            self.queued_twice = (*self.queued_twice, b)
        ps.free[b] = None

    @classmethod
    def make(cls, bug: str, num_blocks: int, caching: bool, events: bool) -> BuggyWorld:
        # BuggyWorld.make(bug) builds whichever class re-creates ``bug`` (see world_class).
        klass = world_class(bug) if cls is BuggyWorld else cls
        w = klass([PoolState.initial(num_blocks, caching, events)], [True])
        w.bug = bug
        return w

    @classmethod
    def from_state(cls, bug: str, ps: PoolState) -> BuggyWorld:
        klass = world_class(bug) if cls is BuggyWorld else cls
        w = klass([ps.copy()], [True])
        w.bug = bug
        return w

    def apply(self, op: Op) -> Outcome:
        name = _HANDLERS[type(op)].__name__
        try:
            result: Outcome = getattr(self, name)(op)
            return result
        except _Refused as refusal:
            return Outcome(error=refusal.kind, detail=refusal.detail)

    # -- the bugs ---------------------------------------------------------------------

    def _check_multiplicity(self, ps: PoolState, ids: list[int], pi: int) -> None:  # type: ignore[override]
        if getattr(self, "_in_free", False) and self.bug == "no-underflow-check":
            return
        World._check_multiplicity(ps, ids, pi)

    def _op_free_blocks(self, op: FreeBlocks) -> Outcome:
        if self.bug == "evict-first-ignored":
            op = replace(op, evict_first=False)
        self._in_free = True
        try:
            return super()._op_free_blocks(op)
        finally:
            self._in_free = False

    def _release(self, ps: PoolState, ids: list[int], evict_first: bool) -> None:  # type: ignore[override]
        if self.bug != "front-reversed":
            World._release(ps, ids, evict_first)
            return
        front: list[int] = []
        back: list[int] = []
        for b in ids:
            ps.ref[b] -= 1
            if ps.ref[b] == 0:
                (front if ps.key[b] is None or not ps.caching or evict_first else back).append(b)
        for b in front:  # bug: front[-1] ends up the head
            self._enqueue(ps, b)
            ps.free.move_to_end(b, last=False)
        for b in back:
            self._enqueue(ps, b)

    def _op_get_new_blocks(self, op: GetNewBlocks) -> Outcome:
        if self.bug not in ("lifo-handout", "watcher-kept"):
            return super()._op_get_new_blocks(op)
        ps = self.pool(op.pool)
        n = op.n
        if type(n) is not int or n < 0:
            raise _Refused(_kind("InvalidArgument"), "bad n")
        if n > len(ps.free):
            raise _Refused(_kind("InsufficientFreeBlocks"), f"Cannot get {n} free blocks")
        last = self.bug == "lifo-handout"
        taken = [ps.free.popitem(last=last)[0] for _ in range(n)]
        for b in taken:
            self._drop_key(ps, b)
            ps.ref[b] = 1
        fired: list[Firing] = []
        for b in taken:
            ws = ps.pending.get(b, []) if self.bug == "watcher-kept" else ps.pending.pop(b, [])
            fired += [Firing(w, op.pool, b) for w in ws]
        ps.fired += len(fired)
        return Outcome(value=tuple(taken), fired=tuple(fired))

    def _op_touch(self, op: Touch) -> Outcome:
        if self.bug not in ("touch-no-remove", "touch-null"):
            return super()._op_touch(op)
        ps = self.pool(op.pool)
        refs = [self._entry(e) for e in op.blocks]
        for r in refs:
            b = r.block
            if b == NULL_BLOCK and self.bug != "touch-null":
                continue
            if ps.ref[b] == 0 and b != NULL_BLOCK and self.bug != "touch-no-remove":
                del ps.free[b]
            ps.ref[b] += 1
        return Outcome()

    def _op_unpin_blocks(self, op: UnpinBlocks) -> Outcome:
        if self.bug not in ("unpin-dup-watcher", "unpin-append-always"):
            return super()._op_unpin_blocks(op)
        ps = self.pool(op.pool)
        ids = self._own_blocks(op.pool, op.blocks, null="refuse")
        self._check_multiplicity(ps, ids, op.pool)
        w = op.watcher
        released: list[int] = []
        for b in ids:
            ps.ref[b] -= 1
            ws = ps.pending.setdefault(b, [])
            if self.bug == "unpin-dup-watcher" or w not in ws:
                ws.append(w)  # type: ignore[arg-type]
                ps.registered += 1
            if ps.ref[b] == 0 or self.bug == "unpin-append-always":
                released.append(b)
        for b in released:
            self._enqueue(ps, b)
        return Outcome()

    def _op_cache_blocks(self, op: CacheBlocks) -> Outcome:
        ps = self.pool(op.pool)
        if self.bug == "cache-when-off":
            saved, ps.caching = ps.caching, True
            try:
                return super()._op_cache_blocks(op)
            finally:
                ps.caching = saved
        if self.bug == "stored-event-missing":
            saved, ps.events_on = ps.events_on, False
            try:
                return super()._op_cache_blocks(op)
            finally:
                ps.events_on = saved
        return super()._op_cache_blocks(op)

    def _op_evict_blocks(self, op: EvictBlocks) -> Outcome:
        if self.bug != "evict-keeps-index":
            return super()._op_evict_blocks(op)
        ps = self.pool(op.pool)
        for i in op.block_ids:
            if type(i) is not int or not 0 <= i < ps.num_blocks:
                raise _Refused(_kind("InvalidArgument"), "bad id")
            if i == NULL_BLOCK:
                raise _Refused(_kind("NullBlockMisuse"), "null")
        for i in op.block_ids:
            ps.key[int(i)] = None  # type: ignore[call-overload]  # bug: the index keeps it
        return Outcome()

    def _drop_key(self, ps: PoolState, b: int) -> None:
        if self.bug != "removed-per-block":
            super()._drop_key(ps, b)
            return
        k = ps.key[b]
        if k is None:
            return
        ps.key[b] = None
        holders = ps.index[k]
        del holders[b]
        if not holders:
            del ps.index[k]
        self._log(ps, BlockRemoved(k))  # bug: logged even while another block holds k

    def _op_get_cached_block(self, op: GetCachedBlock) -> Outcome:
        if self.bug != "cached-newest":
            return super()._op_get_cached_block(op)
        holders = self.pool(op.pool).index.get(op.key)
        return Outcome(value=list(holders)[-1] if holders else None)

    def _op_reset_prefix_cache(self, op: ResetPrefixCache) -> Outcome:
        if self.bug != "reset-ignores-use":
            return super()._op_reset_prefix_cache(op)
        ps = self.pool(op.pool)
        saved = OrderedDict(ps.free)
        ps.free = OrderedDict.fromkeys(range(1, ps.num_blocks))  # pretend nothing is in use
        try:
            out = super()._op_reset_prefix_cache(op)
        finally:
            ps.free = saved
        return out

    def _op_get_num_free_blocks(self, op: GetNumFreeBlocks) -> Outcome:
        out = super()._op_get_num_free_blocks(op)
        if self.bug == "numfree-counts-null":
            return Outcome(value=int(out.value) + 1)  # type: ignore[call-overload]
        return out


def _kind(name: str) -> Any:
    from kvpool.spec import ErrorKind

    return ErrorKind(name)


# -- appended for the fixed-N induction (ORD-UNPIN, ERR-ATOMIC) ---------------------------


class _StepRuleBugs(BuggyWorld):
    """The executable spec with one of the bugs of ``STEP_RULE_MUTANTS``."""

    def _op_unpin_blocks(self, op: UnpinBlocks) -> Outcome:
        if self.bug != "unpin-reversed":
            return super()._op_unpin_blocks(op)
        ps = self.pool(op.pool)
        ids = self._own_blocks(op.pool, op.blocks, null="refuse")
        World._check_multiplicity(ps, ids, op.pool)
        w = op.watcher
        released: list[int] = []
        for b in ids:
            ps.ref[b] -= 1
            ws = ps.pending.setdefault(b, [])
            if w not in ws:
                ws.append(w)  # type: ignore[arg-type]
                ps.registered += 1
            if ps.ref[b] == 0:
                released.append(b)
        for b in reversed(released):  # bug: the tail gets them in reverse list order
            self._enqueue(ps, b)
        return Outcome()

    def _op_free_blocks(self, op: FreeBlocks) -> Outcome:
        if self.bug != "free-partial-on-refusal":
            return super()._op_free_blocks(op)
        try:
            return super()._op_free_blocks(op)
        except _Refused as refusal:
            if refusal.kind.value == "RefCountUnderflow":
                ps = self.pool(op.pool)
                ids = [self._entry(e).block for e in op.blocks]
                World._release(ps, [b for b in ids if b != NULL_BLOCK], bool(op.evict_first))
            raise


STEP_RULE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "unpin-reversed",
        "unpin_blocks appends the blocks reaching ref_cnt 0 in reverse list order",
        ("ORD-UNPIN",),
    ),
    Mutant(
        "free-partial-on-refusal",
        "free_blocks refused for an over-free still releases the blocks it listed",
        ("ERR-ATOMIC",),
    ),
)
MUTANTS = (*MUTANTS, *STEP_RULE_MUTANTS)
MUTANT_BY_NAME.update({m.name: m for m in STEP_RULE_MUTANTS})


# -- appended for lists of symbolic length (proofs/symlists.py) ------------------------------


class _LongListBugs(BuggyWorld):
    """The executable spec with the bug of ``LONG_LIST_MUTANTS``: only a block list of at
    least 3 entries shows it."""

    def _op_unpin_blocks(self, op: UnpinBlocks) -> Outcome:
        if self.bug != "unpin-replaces-watcher":
            return super()._op_unpin_blocks(op)
        ps = self.pool(op.pool)
        ids = self._own_blocks(op.pool, op.blocks, null="refuse")
        World._check_multiplicity(ps, ids, op.pool)
        w = op.watcher
        released: list[int] = []
        for b in ids:
            ps.ref[b] -= 1
            ws = ps.pending.setdefault(b, [])
            if w not in ws:
                ps.pending[b] = [w]  # type: ignore[list-item]  # bug: the others are dropped
                ps.registered += 1
            if ps.ref[b] == 0:
                released.append(b)
        for b in released:
            self._enqueue(ps, b)
        return Outcome()

    def _op_free_blocks(self, op: FreeBlocks) -> Outcome:
        if self.bug == "free-refusal-keeps-prefix":
            return self._free_keeping_prefix(op)
        if self.bug != "free-third-unqueued":
            return super()._op_free_blocks(op)
        ps = self.pool(op.pool)
        listed = [(i, self._entry(e).block) for i, e in enumerate(op.blocks)]
        listed = [(i, b) for i, b in listed if b != NULL_BLOCK]
        World._check_multiplicity(ps, [b for _, b in listed], op.pool)
        front: list[int] = []
        back: list[int] = []
        for i, b in listed:
            ps.ref[b] -= 1
            if ps.ref[b] == 0 and i != 2:  # bug: the third entry is never queued
                (front if ps.key[b] is None or not ps.caching or op.evict_first else back).append(b)
        for b in reversed(front):
            self._enqueue(ps, b)
            ps.free.move_to_end(b, last=False)
        for b in back:
            self._enqueue(ps, b)
        return Outcome()

    def _free_keeping_prefix(self, op: FreeBlocks) -> Outcome:
        """free_blocks checked entry by entry as it goes: refused at its third entry or
        later, it keeps the releases of the entries before (the bug)."""
        ps = self.pool(op.pool)
        done: list[int] = []
        for i, e in enumerate(op.blocks):
            try:
                b = self._entry(e).block
                if b != NULL_BLOCK and ps.ref[b] - done.count(b) < 1:
                    raise _Refused(_kind("RefCountUnderflow"), f"block {b} over-freed")
            except _Refused:
                if i >= 2:
                    World._release(ps, done, bool(op.evict_first))
                raise
            if b != NULL_BLOCK:
                done.append(b)
        return super()._op_free_blocks(op)


LONG_LIST_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "free-third-unqueued",
        "free_blocks does not queue its third entry when it reaches ref_cnt 0",
        (),
        ("PERM",),
    ),
    Mutant(
        "unpin-replaces-watcher",
        "unpin_blocks' new watcher replaces the ones pending on the block (never fired)",
        (),
        ("WATCH-FIRE",),
    ),
    Mutant(
        "free-refusal-keeps-prefix",
        "free_blocks refused at its third entry or later keeps what the entries before did",
        (),
        ("ERR-ATOMIC",),
    ),
)
"""Bugs of proofs/symlists.py's loops, not in ``MUTANTS`` (BMC and the every-N induction
do not run them): free-third-unqueued shows only with a list of >= 3 entries;
unpin-replaces-watcher is WATCH-FIRE's mutant for the list-taking calls;
free-refusal-keeps-prefix is ERR-ATOMIC's, and shows only with >= 3 entries too."""


def world_class(bug: str) -> type[BuggyWorld]:
    """The buggy spec class that re-creates ``bug``."""
    if bug in {m.name for m in LONG_LIST_MUTANTS}:
        return _LongListBugs
    return _StepRuleBugs if bug in {m.name for m in STEP_RULE_MUTANTS} else BuggyWorld
