"""The abstract pool: its state, and the one entry point that applies an operation to it.

Read this file next to ``docs/semantics.md``; each ``_op_*`` method is
one bullet of its "Operations" section, in the same words. The data structures
are chosen so that every operation is O(1) amortised per block it names:

* the free queue is an ``OrderedDict`` used as an ordered set (``popitem(last=False)``
  takes the head, ``move_to_end(b, last=False)`` prepends, ``del`` removes from the
  middle -- all O(1));
* the cache index maps a key to an insertion-ordered dict of the blocks holding
  it, oldest first;
* pending watchers live in an insertion-ordered dict keyed by block, so its order
  is "the order blocks first got a pending watcher", which ``reset_prefix_cache``
  fires in.

Every operation validates the whole call before it changes anything: a refused
call is an :class:`~kvpool.spec.ops.Outcome` with an error kind and an untouched
state.
"""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from .errors import ErrorKind
from .events import AllBlocksCleared, BlockStored, Event, apply_event
from .keys import removed
from .ops import (
    BlockRef,
    CacheBlocks,
    DropPool,
    EvictBlocks,
    Firing,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    Outcome,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)

NULL_BLOCK = 0
DEFAULT_HASH_BLOCK_SIZE = 16
"""``hash_block_size`` when none is given (vLLM requires one; 16 is its default block size)."""
MEDIUM_GPU = "GPU"
"""The storage medium vLLM's events report by default."""

MAX_COUNT = 2**63 - 1
"""The largest count or block id any pool reads (an int64). A larger int is ``InvalidArgument``:
so is any int Python will not print (more than ``sys.get_int_max_str_digits()`` digits)."""


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` for a message: never raises (a huge int, a raising ``__repr__``)."""
    if type(value) is int:
        if value.bit_length() > 200:
            return f"<an int of {value.bit_length()} bits>"
        return repr(value)
    try:
        text = repr(value)
    except BaseException:
        return f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class TraceError(Exception):
    """The operation cannot be applied at all: it names a pool that does not exist or is gone.

    This is a malformed trace, not a pool behaviour; pools never see such calls.
    """


class _Refused(Exception):
    """Internal: a validation failure, turned into an ``Outcome`` by :meth:`World.apply`."""

    def __init__(self, kind: ErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@dataclass
class PoolState:
    """One pool of ``num_blocks`` blocks; block 0 is the null block.

    Contracts (PEP 316; see ``kvpool.contracts``). The ``# INV-...`` line above a
    condition names the invariant it states (``kvpool.spec.invariants`` has all of them).

    inv:
        len(self.ref) == len(self.key) == self.num_blocks >= 1
        # INV-REF
        all(r >= 0 for r in self.ref)
        # INV-FREE
        all(0 < b < self.num_blocks and self.ref[b] == 0 for b in self.free)
        len(self.free) == sum(r == 0 for r in self.ref[1:])
        # INV-NULL
        self.ref[0] == 0 and self.key[0] is None and 0 not in self.free
        0 not in self.pending and all(0 not in holders for holders in self.index.values())
    """

    num_blocks: int
    caching: bool
    events_on: bool
    ref: list[int]
    """``ref[b]`` is block b's reference count."""
    key: list[Hashable | None]
    """``key[b]`` is the cache key block b holds, or None."""
    free: OrderedDict[int, None]
    """The free queue, front first: handed out and evicted from the front."""
    index: dict[Hashable, dict[int, None]]
    """key -> the blocks holding it, oldest first."""
    pending: dict[int, list[int]]
    """block -> its pending watcher ids in registration order; blocks in first-watched order."""
    log: list[Event] = field(default_factory=list)
    """Events not yet taken by ``take_events``."""
    view: set[Hashable] = field(default_factory=set)
    """A consumer's replay of every event ever logged (INV-EVENTS compares it to the index)."""
    registered: int = 0
    """Watcher registrations ever made."""
    fired: int = 0
    """Watcher firings ever made."""
    tokens: dict[int, int] = field(default_factory=dict)
    """block -> prefix tokens its primary key covers (absent: none recorded, or no key)."""
    entries: dict[int, list[Hashable]] = field(default_factory=dict)
    """block -> its further keys (beyond ``key[b]``), oldest first; absent when it has none."""
    hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE
    """The granularity of a request's ``block_hashes``."""
    lookahead: int = 0
    """``num_hash_lookahead_tokens``: tokens after each block that its hash also covers."""
    medium: str = MEDIUM_GPU
    """The storage medium events report."""

    @classmethod
    def initial(
        cls,
        num_blocks: int,
        caching: bool = True,
        events: bool = False,
        hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE,
        lookahead: int = 0,
        medium: str = MEDIUM_GPU,
    ) -> PoolState:
        """The pool as built: every non-null block free, in id order."""
        # TraceError guards (here, in World.pool and World.apply) reject malformed traces, not
        # pool calls: no golden vector can expect one; tests/test_oracle_vectors.py checks them.
        if type(num_blocks) is not int or num_blocks < 1:  # pragma: no cover
            raise TraceError(f"num_blocks must be an int >= 1, got {shown(num_blocks)}")
        return cls(
            num_blocks=num_blocks,
            caching=bool(caching),
            events_on=bool(events),
            ref=[0] * num_blocks,
            key=[None] * num_blocks,
            free=OrderedDict.fromkeys(range(1, num_blocks)),
            index={},
            pending={},
            hash_block_size=hash_block_size,
            lookahead=lookahead,
            medium=medium,
        )

    # Helpers below marked ``no cover`` are for callers (renderers, proofs, tests), not part
    # of any operation: the golden vectors' spec coverage is measured without them.
    def copy(self) -> PoolState:  # pragma: no cover
        return copy.deepcopy(self)

    def snapshot(self) -> tuple[object, ...]:  # pragma: no cover
        """Everything observable, as plain values in which every order that matters is kept.

        Two states with equal snapshots are indistinguishable by any operation
        (``==`` on the dataclass would ignore the order of holders under a key).
        """
        return (
            self.num_blocks,
            self.caching,
            self.events_on,
            tuple(self.ref),
            tuple(self.key),
            tuple(self.free),
            frozenset((k, tuple(holders)) for k, holders in self.index.items()),
            tuple((b, tuple(ws)) for b, ws in self.pending.items()),
            tuple(self.log),
            frozenset(self.view),
            self.registered,
            self.fired,
            tuple(sorted(self.tokens.items())),
            tuple(sorted((b, tuple(ks)) for b, ks in self.entries.items() if ks)),
            self.hash_block_size,
            self.lookahead,
            self.medium,
        )

    # -- queries shared by operations and invariants --------------------------------

    def num_in_use(self) -> int:
        """Non-null blocks with ``ref_cnt > 0``, by INV-CONSERVE (O(1))."""
        return self.num_blocks - 1 - len(self.free)

    def keys_of(self, b: int) -> list[Hashable]:
        """Every key block ``b`` holds: its primary key first, then its further entries."""
        k = self.key[b]
        if k is None:
            return []
        return [k, *self.entries.get(b, ())]

    def describe(self) -> str:  # pragma: no cover
        """One line a person can read: the free queue, and who holds what."""
        used = [f"{b}x{r}" for b, r in enumerate(self.ref) if r and b != NULL_BLOCK]
        keys = [f"{b}={self.keys_of(b)!r}" for b, k in enumerate(self.key) if k is not None]
        watch = [f"{b}:{ws}" for b, ws in self.pending.items()]
        return (
            f"free=[{' '.join(map(str, self.free))}] in_use=[{' '.join(used)}]"
            f" keys=[{' '.join(keys)}] watchers=[{' '.join(watch)}]"
        )


@dataclass
class World:
    """Every pool the caller built, in build order. Most traces use one pool, pool 0.

    Contracts (PEP 316; see ``kvpool.contracts``); each live pool keeps PoolState's.

    inv: len(self.pools) == len(self.alive)
    """

    pools: list[PoolState]
    alive: list[bool]

    @classmethod  # pragma: no cover
    def single(cls, num_blocks: int, caching: bool = True, events: bool = False) -> World:
        return cls([PoolState.initial(num_blocks, caching, events)], [True])

    @classmethod
    def of(cls, *pools: PoolState) -> World:
        return cls(list(pools), [True] * len(pools))

    def copy(self) -> World:  # pragma: no cover
        return copy.deepcopy(self)

    def pool(self, index: int = 0) -> PoolState:
        if type(index) is not int or not 0 <= index < len(self.pools):  # pragma: no cover
            raise TraceError(f"there is no pool {index!r}")
        if not self.alive[index]:  # pragma: no cover
            raise TraceError(f"pool {index} is gone")
        return self.pools[index]

    # -- the entry point ------------------------------------------------------------

    def apply(self, op: Op) -> Outcome:
        """Apply ``op`` to the pool it names; return what it observably did.

        A refused call returns its error kind and leaves the world exactly as it was.

        raises: TraceError
        post: __return__.error is None or [p.snapshot() for p in self.pools] == [p.snapshot() for p in __old__.self.pools]
        post: __return__.error is None or self.alive == __old__.self.alive
        post: type(op) is not GetNewBlocks or __return__.error is not None or list(__return__.value) == list(__old__.self.pools[op.pool].free)[: op.n]
        post: type(op) is not GetNumFreeBlocks or __return__.value == len(self.pools[op.pool].free)
        post: type(op) is not ResetPrefixCache or __return__.value == (__old__.self.pools[op.pool].num_in_use() == 0)
        """  # noqa: E501
        handler = _HANDLERS.get(type(op))
        if handler is None:  # pragma: no cover
            raise TraceError(f"not an operation: {op!r}")
        try:
            return handler(self, op)
        except _Refused as refusal:
            return Outcome(error=refusal.kind, detail=refusal.detail)

    def run(self, ops: Iterable[Op]) -> list[Outcome]:  # pragma: no cover
        """Apply ``ops`` in order; the outcome of each."""
        return [self.apply(op) for op in ops]

    # -- helpers ----------------------------------------------------------------------

    def _entry(self, entry: object, what: str = "block") -> BlockRef:
        """Check that ``entry`` names a block that exists (in a live or a gone pool)."""
        if (
            not isinstance(entry, BlockRef)
            or type(entry.pool) is not int
            or type(entry.block) is not int
            or not 0 <= entry.pool < len(self.pools)
            or not 0 <= entry.block < self.pools[entry.pool].num_blocks
        ):
            raise _Refused(ErrorKind.INVALID_ARGUMENT, f"{what} {shown(entry)} is not a block")
        return entry

    def _own_blocks(self, pi: int, entries: tuple[object, ...], null: str) -> list[int]:
        """Validate a list of blocks that must all be pool ``pi``'s.

        ``null`` says what the null block means here: "skip" or "refuse".
        Per entry, in order: is a block, then null, then ownership.
        """
        ids: list[int] = []
        for e in entries:
            ref = self._entry(e)
            if ref.block == NULL_BLOCK:
                if null == "skip":
                    continue
                raise _Refused(ErrorKind.NULL_BLOCK_MISUSE, f"block {ref!r} is the null block")
            if ref.pool != pi:
                raise _Refused(
                    ErrorKind.FOREIGN_BLOCK, f"block {ref!r} belongs to pool {ref.pool}, not {pi}"
                )
            ids.append(ref.block)
        return ids

    @staticmethod
    def _check_multiplicity(ps: PoolState, ids: list[int], pi: int) -> None:
        """A block listed m times must have ``ref_cnt >= m``."""
        for b, m in Counter(ids).items():
            if ps.ref[b] < m:
                raise _Refused(
                    ErrorKind.REF_COUNT_UNDERFLOW,
                    f"block {pi}:{b} is released {m} time(s) but has ref_cnt {ps.ref[b]}",
                )

    @staticmethod
    def _log(ps: PoolState, event: Event) -> None:
        if ps.events_on:
            ps.log.append(event)
            apply_event(ps.view, event)

    def _drop_key(self, ps: PoolState, b: int) -> None:
        """Block ``b`` forgets every key it holds (primary first, then its further entries).

        Each key is announced removed if b was its last holder.
        """
        for k in self._unindex(ps, b):
            self._log(ps, removed(k, ps.medium))

    @staticmethod
    def _unindex(ps: PoolState, b: int) -> list[Hashable]:
        """Take every key of ``b`` out of the index; the keys nobody holds any more, in order."""
        keys = ps.keys_of(b)
        ps.key[b] = None
        ps.tokens.pop(b, None)
        ps.entries.pop(b, None)
        gone: list[Hashable] = []
        for k in keys:
            holders = ps.index[k]
            del holders[b]
            if not holders:
                del ps.index[k]
                gone.append(k)
        return gone

    # -- operations, one per bullet of the semantics ----------------------------------

    def _op_get_new_blocks(self, op: GetNewBlocks) -> Outcome:
        pi, n = op.pool, op.n
        ps = self.pool(pi)
        if type(n) is not int:
            raise _Refused(ErrorKind.INVALID_ARGUMENT, f"num_blocks must be an int, got {shown(n)}")
        if n < 0:
            raise _Refused(ErrorKind.INVALID_ARGUMENT, f"num_blocks must be >= 0, got {shown(n)}")
        if n > len(ps.free):
            if n > MAX_COUNT:
                raise _Refused(
                    ErrorKind.INVALID_ARGUMENT, f"num_blocks {shown(n)} exceeds {MAX_COUNT}"
                )
            raise _Refused(
                ErrorKind.INSUFFICIENT_FREE_BLOCKS, f"Cannot get {n} free blocks from the pool"
            )
        taken = [ps.free.popitem(last=False)[0] for _ in range(n)]
        for b in taken:
            self._drop_key(ps, b)
            ps.ref[b] = 1
        # The state is complete; now the watchers of the handed-out blocks fire.
        fired: list[Firing] = []
        if ps.pending:
            for b in taken:
                for w in ps.pending.pop(b, ()):
                    fired.append(Firing(w, pi, b))
            ps.fired += len(fired)
        return Outcome(value=tuple(taken), fired=tuple(fired))

    def _op_free_blocks(self, op: FreeBlocks) -> Outcome:
        pi = op.pool
        self.pool(pi)
        if type(op.evict_first) is not bool:
            raise _Refused(
                ErrorKind.INVALID_ARGUMENT,
                f"evict_first must be a bool, got {shown(op.evict_first)}",
            )
        # Group entries by owning pool, in first-seen order; skip null blocks and
        # blocks whose pool is gone.
        groups: dict[int, list[int]] = {}
        for e in op.blocks:
            ref = self._entry(e)
            if ref.block == NULL_BLOCK or not self.alive[ref.pool]:
                continue
            groups.setdefault(ref.pool, []).append(ref.block)
        for p, ids in groups.items():
            self._check_multiplicity(self.pools[p], ids, p)
        # This pool first, then each forwarded pool, as vLLM does.
        own = groups.pop(pi, [])
        self._release(self.pools[pi], own, op.evict_first)
        for p, ids in groups.items():
            self._release(self.pools[p], ids, op.evict_first)
        return Outcome()

    @staticmethod
    def _release(ps: PoolState, ids: list[int], evict_first: bool) -> None:
        front: list[int] = []
        back: list[int] = []
        for b in ids:
            ps.ref[b] -= 1
            if ps.ref[b] == 0:
                if ps.key[b] is None or not ps.caching or evict_first:
                    front.append(b)
                else:
                    back.append(b)
        # FRONT goes in as a group: front[0] becomes the head.
        for b in reversed(front):
            ps.free[b] = None
            ps.free.move_to_end(b, last=False)
        for b in back:
            ps.free[b] = None

    def _op_touch(self, op: Touch) -> Outcome:
        pi = op.pool
        ps = self.pool(pi)
        ids = self._own_blocks(pi, op.blocks, null="skip")
        for b in ids:
            if ps.ref[b] == 0:
                del ps.free[b]
            ps.ref[b] += 1
        return Outcome()

    def _op_unpin_blocks(self, op: UnpinBlocks) -> Outcome:
        pi, w = op.pool, op.watcher
        ps = self.pool(pi)
        if type(w) is not int:
            raise _Refused(ErrorKind.INVALID_ARGUMENT, f"on_reuse must be callable, got {shown(w)}")
        ids = self._own_blocks(pi, op.blocks, null="refuse")
        self._check_multiplicity(ps, ids, pi)
        released: list[int] = []
        for b in ids:
            ps.ref[b] -= 1
            watchers = ps.pending.setdefault(b, [])
            if w not in watchers:
                watchers.append(w)
                ps.registered += 1
            if ps.ref[b] == 0:
                released.append(b)
        for b in released:
            ps.free[b] = None
        return Outcome()

    def _op_cache_blocks(self, op: CacheBlocks) -> Outcome:
        pi = op.pool
        ps = self.pool(pi)
        if len(op.blocks) != len(op.keys):
            raise _Refused(
                ErrorKind.INVALID_ARGUMENT,
                f"{len(op.blocks)} blocks but {len(op.keys)} keys",
            )
        for k in op.keys:
            if k is None or not _hashable(k):
                raise _Refused(
                    ErrorKind.INVALID_ARGUMENT, f"key {shown(k)} is not a hashable non-None"
                )
        if not ps.caching:
            raise _Refused(ErrorKind.CACHING_DISABLED, "prefix caching is disabled on this pool")
        ids = self._own_blocks(pi, op.blocks, null="refuse")
        seen: set[int] = set()
        for b in ids:
            if ps.ref[b] < 1:
                raise _Refused(ErrorKind.BLOCK_NOT_IN_USE, f"block {pi}:{b} has ref_cnt 0")
            if ps.key[b] is not None:
                raise _Refused(
                    ErrorKind.ALREADY_CACHED, f"block {pi}:{b} already holds key {shown(ps.key[b])}"
                )
            if b in seen:
                raise _Refused(ErrorKind.INVALID_ARGUMENT, f"block {pi}:{b} is listed twice")
            seen.add(b)
        if not ids:
            return Outcome()
        for b, k in zip(ids, op.keys, strict=True):
            ps.key[b] = k
            ps.index.setdefault(k, {})[b] = None
        self._log(ps, BlockStored(tuple(op.keys)))
        return Outcome()

    def _op_get_cached_block(self, op: GetCachedBlock) -> Outcome:
        ps = self.pool(op.pool)
        if not _hashable(op.key):
            raise _Refused(ErrorKind.INVALID_ARGUMENT, f"key {shown(op.key)} is not hashable")
        holders = ps.index.get(op.key)
        return Outcome(value=next(iter(holders)) if holders else None)

    def _op_evict_blocks(self, op: EvictBlocks) -> Outcome:
        ps = self.pool(op.pool)
        for i in op.block_ids:
            if type(i) is not int or not 0 <= i < ps.num_blocks:
                raise _Refused(
                    ErrorKind.INVALID_ARGUMENT,
                    f"block id {shown(i)} is not an int in 0..{ps.num_blocks - 1}",
                )
            if i == NULL_BLOCK:
                raise _Refused(ErrorKind.NULL_BLOCK_MISUSE, "block id 0 is the null block")
        for i in op.block_ids:
            self._drop_key(ps, cast(int, i))  # every id was checked above
        return Outcome()

    def _op_reset_prefix_cache(self, op: ResetPrefixCache) -> Outcome:
        pi = op.pool
        ps = self.pool(pi)
        if ps.num_in_use():
            return Outcome(value=False)
        for holders in ps.index.values():
            for b in holders:
                ps.key[b] = None
        ps.index.clear()
        ps.tokens.clear()
        ps.entries.clear()
        fired = tuple(Firing(w, pi, b) for b, ws in ps.pending.items() for w in ws)
        ps.pending.clear()
        ps.fired += len(fired)
        self._log(ps, AllBlocksCleared())
        return Outcome(value=True, fired=fired)

    def _op_get_num_free_blocks(self, op: GetNumFreeBlocks) -> Outcome:
        return Outcome(value=len(self.pool(op.pool).free))

    def _op_get_usage(self, op: GetUsage) -> Outcome:
        ps = self.pool(op.pool)
        total = ps.num_blocks - 1
        return Outcome(value=0.0 if not total else 1.0 - len(ps.free) / total)

    def _op_is_block_writable(self, op: IsBlockWritable) -> Outcome:
        pi = op.pool
        ps = self.pool(pi)
        ref = self._entry(op.block)
        if ref.block == NULL_BLOCK:
            return Outcome(value=False)
        if ref.pool != pi:
            raise _Refused(
                ErrorKind.FOREIGN_BLOCK, f"block {ref!r} belongs to pool {ref.pool}, not {pi}"
            )
        b = ref.block
        return Outcome(value=ps.ref[b] == 1 and ps.key[b] is None)

    def _op_take_events(self, op: TakeEvents) -> Outcome:
        ps = self.pool(op.pool)
        events = tuple(ps.log)
        ps.log.clear()
        return Outcome(value=events)

    def _op_drop_pool(self, op: DropPool) -> Outcome:
        self.pool(op.pool)
        self.alive[op.pool] = False
        return Outcome()


_HANDLERS: dict[type, Callable[[World, Any], Outcome]] = {
    GetNewBlocks: World._op_get_new_blocks,
    FreeBlocks: World._op_free_blocks,
    Touch: World._op_touch,
    UnpinBlocks: World._op_unpin_blocks,
    CacheBlocks: World._op_cache_blocks,
    GetCachedBlock: World._op_get_cached_block,
    EvictBlocks: World._op_evict_blocks,
    ResetPrefixCache: World._op_reset_prefix_cache,
    GetNumFreeBlocks: World._op_get_num_free_blocks,
    GetUsage: World._op_get_usage,
    IsBlockWritable: World._op_is_block_writable,
    TakeEvents: World._op_take_events,
    DropPool: World._op_drop_pool,
}


def step(world: World, op: Op) -> tuple[World, Outcome]:  # pragma: no cover
    """The pure form of :meth:`World.apply`: a new world and the outcome; ``world`` is untouched."""
    after = world.copy()
    return after, after.apply(op)
