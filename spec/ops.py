"""Operations as plain data, and what applying one yields.

Every call a caller can make on a pool is one small frozen class holding its
arguments. Traces, the oracle and the proofs all speak this language. Arguments
are stored as given (after light normalisation) and validated when the
operation is applied, so that ill-formed calls -- a negative count, a bool where
an int belongs, a non-callable watcher -- are expressible and get their error kind.

Blocks are named by :class:`BlockRef` ``(pool, block)``; a plain ``int`` given
where a block is expected means "that block of the pool the call is made on".
Watchers are named by an ``int`` id: the spec's stand-in for a callable. Two
registrations with the same id are "that very object" twice.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import ErrorKind


class BlockRef(NamedTuple):
    """Block ``block`` of pool ``pool`` (pools are numbered in the order they were built)."""

    pool: int
    block: int

    def __repr__(self) -> str:
        return f"{self.pool}:{self.block}"


def _refs(entries: object, pool: int) -> tuple[object, ...]:
    """Normalise a block list: ints become refs into ``pool``; anything else is kept as is."""
    if not isinstance(entries, (list, tuple)):
        return (entries,)  # not a list at all: one ill-formed entry, refused when applied
    out: list[object] = []
    for e in entries:
        if isinstance(e, BlockRef):
            out.append(e)
        elif isinstance(e, (list, tuple)) and len(e) == 2 and all(type(x) is int for x in e):
            out.append(BlockRef(e[0], e[1]))
        elif type(e) is int:
            out.append(BlockRef(pool, e))
        else:
            out.append(e)
    return tuple(out)


def _seq(values: object) -> tuple[object, ...]:
    return tuple(values) if isinstance(values, (list, tuple)) else (values,)


@dataclass(frozen=True)
class GetNewBlocks:
    """Take the first ``n`` blocks of the free queue."""

    n: object
    pool: int = 0


@dataclass(frozen=True)
class FreeBlocks:
    """Release one reference per entry; blocks reaching zero rejoin the free queue."""

    blocks: tuple[object, ...]
    evict_first: object = False
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", _refs(self.blocks, self.pool))


@dataclass(frozen=True)
class Touch:
    """One more reference per entry (a prefix-cache hit); pulls free blocks out of the queue."""

    blocks: tuple[object, ...]
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", _refs(self.blocks, self.pool))


@dataclass(frozen=True)
class UnpinBlocks:
    """Release references to blocks that stay readable until reused; ``watcher`` fires on reuse."""

    blocks: tuple[object, ...]
    watcher: object
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", _refs(self.blocks, self.pool))


@dataclass(frozen=True)
class CacheBlocks:
    """Give each block its key in the prefix-cache index."""

    blocks: tuple[object, ...]
    keys: tuple[object, ...]
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", _refs(self.blocks, self.pool))
        object.__setattr__(self, "keys", _seq(self.keys))


@dataclass(frozen=True)
class GetCachedBlock:
    """The oldest block holding ``key``, or None."""

    key: object
    pool: int = 0


@dataclass(frozen=True)
class EvictBlocks:
    """Drop the cache key of each named block id; blocks stay where they are."""

    block_ids: tuple[object, ...]
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_ids", _seq(self.block_ids))


@dataclass(frozen=True)
class ResetPrefixCache:
    """Clear every key, if no block is in use; fire every pending watcher."""

    pool: int = 0


@dataclass(frozen=True)
class GetNumFreeBlocks:
    """The length of the free queue."""

    pool: int = 0


@dataclass(frozen=True)
class GetUsage:
    """``1 - free / (N - 1)``; 0.0 for a pool of only the null block."""

    pool: int = 0


@dataclass(frozen=True)
class IsBlockWritable:
    """Whether ``block`` is referenced once, holds no key and is not the null block."""

    block: object
    pool: int = 0

    def __post_init__(self) -> None:
        (ref,) = _refs([self.block], self.pool)
        object.__setattr__(self, "block", ref)


@dataclass(frozen=True)
class TakeEvents:
    """Return the event log and empty it."""

    pool: int = 0


@dataclass(frozen=True)
class DropPool:
    """The pool is garbage collected: its blocks become blocks of a gone pool."""

    pool: int = 0


Op = (
    GetNewBlocks
    | FreeBlocks
    | Touch
    | UnpinBlocks
    | CacheBlocks
    | GetCachedBlock
    | EvictBlocks
    | ResetPrefixCache
    | GetNumFreeBlocks
    | GetUsage
    | IsBlockWritable
    | TakeEvents
    | DropPool
)

OP_CLASSES: tuple[type[Op], ...] = (
    GetNewBlocks,
    FreeBlocks,
    Touch,
    UnpinBlocks,
    CacheBlocks,
    GetCachedBlock,
    EvictBlocks,
    ResetPrefixCache,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    TakeEvents,
    DropPool,
)


class Firing(NamedTuple):
    """Watcher ``watcher`` fired for block ``block`` of pool ``pool``."""

    watcher: int
    pool: int
    block: int


@dataclass(frozen=True)
class Outcome:
    """What one operation observably did: its return value or error kind, and the watchers it fired.

    ``detail`` explains an error for people; it takes no part in comparisons.
    """

    value: object = None
    error: ErrorKind | None = None
    fired: tuple[Firing, ...] = ()
    detail: str = field(default="", compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None


Key = Hashable
