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

Two layers of operations share one state. The key-level ones (:data:`OP_CLASSES`:
``CacheBlocks(blocks, keys)``, ``GetCachedBlock(key)``, ...) name index keys
directly; the vLLM ones (:data:`VLLM_OP_CLASSES`: ``CacheFullBlocks``,
``CachePartialBlock``, ``MoveBlockHashes``, ``GetCachedBlockGroups``,
``EmitCachedBlockEvents``) are vLLM 0.33.0's calls, with the request as plain
data (:class:`Request`). ``CacheBlocks`` is the special case of caching each
block under a key given whole (already combined with its group, as vLLM's
``BlockHashWithGroupId`` is), with no token count and no vLLM event fields.
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
class Lora:
    """A request's LoRA adapter, as the pool reads it (``adapter_id``, name, path)."""

    adapter_id: int
    name: str
    path: str = ""


@dataclass(frozen=True)
class MMFeature:
    """One multimodal input of a request: its identifier and the token span it covers."""

    identifier: str
    offset: int
    length: int


@dataclass(frozen=True)
class Request:
    """What vLLM's pool reads of a request, as plain data.

    ``block_hashes`` are the prefix-chained hashes at ``hash_block_size``
    granularity; the other fields only shape events. ``prompt_embeds`` is None for
    a request of token ids, else the raw bytes of each prompt position's embedding
    (vLLM's ``prompt_embeds`` tensor, one row per position, as its memory holds it).
    """

    block_hashes: tuple[object, ...]
    all_token_ids: tuple[int, ...] = ()
    lora: Lora | None = None
    mm: tuple[MMFeature, ...] = ()
    cache_salt: str | None = None
    session_id: Hashable | None = None
    prompt_embeds: tuple[bytes, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_hashes", _seq(self.block_hashes))
        object.__setattr__(self, "all_token_ids", _seq(self.all_token_ids))
        object.__setattr__(self, "mm", _seq(self.mm))
        if self.prompt_embeds is not None:
            rows = _seq(self.prompt_embeds)
            if any(type(row) is not bytes for row in rows):
                raise ValueError("a request's prompt_embeds are rows of bytes, one per position")
            object.__setattr__(self, "prompt_embeds", rows)


@dataclass(frozen=True)
class CacheFullBlocks:
    """vLLM's ``cache_full_blocks``: cache ``blocks[num_cached_blocks:num_full_blocks]``."""

    request: object
    blocks: tuple[object, ...]
    num_cached_blocks: object
    num_full_blocks: object
    block_size: object
    group: object
    block_mask: tuple[object, ...] | None = None
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", _refs(self.blocks, self.pool))
        if self.block_mask is not None:
            object.__setattr__(self, "block_mask", _seq(self.block_mask))


@dataclass(frozen=True)
class CachePartialBlock:
    """vLLM's ``cache_partial_block``: make ``block`` reachable at a ``num_tokens`` prefix."""

    request: object
    block: object
    num_tokens: object
    group: object
    block_size: object
    replace_existing_hashes: object = False
    pool: int = 0

    def __post_init__(self) -> None:
        (ref,) = _refs([self.block], self.pool)
        object.__setattr__(self, "block", ref)


@dataclass(frozen=True)
class MoveBlockHashes:
    """vLLM's ``move_block_hashes``: every key of ``src`` moves to ``dst``; no events."""

    src: object
    dst: object
    pool: int = 0

    def __post_init__(self) -> None:
        src, dst = _refs([self.src, self.dst], self.pool)
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)


@dataclass(frozen=True)
class GetCachedBlockGroups:
    """vLLM's ``get_cached_block(block_hash, kv_cache_group_ids)``: a holder per group, or None."""

    block_hash: object
    group_ids: tuple[object, ...]
    pool: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "group_ids", _seq(self.group_ids))


@dataclass(frozen=True)
class EmitCachedBlockEvents:
    """vLLM's ``emit_cached_block_events``: announce a prefix hit again; the state is unchanged."""

    request: object
    num_cached_blocks: object
    block_size: object
    group: object
    pool: int = 0


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
    | CacheFullBlocks
    | CachePartialBlock
    | MoveBlockHashes
    | GetCachedBlockGroups
    | EmitCachedBlockEvents
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
"""The key-level operations (what the golden vectors, proofs and the oracle's machine speak)."""

VLLM_OP_CLASSES: tuple[type[Op], ...] = (
    CacheFullBlocks,
    CachePartialBlock,
    MoveBlockHashes,
    GetCachedBlockGroups,
    EmitCachedBlockEvents,
)
"""vLLM 0.33.0's calls beyond the key-level ones: blocks with several keys, groups, moves."""

ALL_OP_CLASSES: tuple[type[Op], ...] = OP_CLASSES + VLLM_OP_CLASSES


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
