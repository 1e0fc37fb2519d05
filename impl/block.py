"""The block: metadata for one fixed-size slab of KV-cache memory.

Attribute names follow vLLM's ``KVCacheBlock`` so that code written against
vLLM reads ours unchanged. ``block_hash`` (the block's primary key) and
``block_hash_num_tokens`` (the prefix tokens it covers) are read-only properties.
``set_block_hash`` and ``reset_hash`` work as vLLM's on a block that belongs to
no pool; on a pool's block they are refused (``InvalidArgument``), because the
pool's cache index must agree with every key its blocks hold (INV-CACHE): only
the pool's own caching calls change a pooled block's keys.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

from kvpool.spec.errors import AlreadyCached, InvalidArgument


class PoolRef(weakref.ref):  # type: ignore[type-arg]
    """The weak reference a pool's own blocks carry: the pool's mark of ownership.

    Each pool makes one (``BlockPool._weak_self``) and writes it into its blocks'
    private ``_pool`` slot as it builds them. Nothing else can put it in a block:
    ``KVCacheBlock(..., pool=...)`` and assigning ``block.pool`` store a plain weak
    reference instead, and a copy (``copy``, ``deepcopy``, ``pickle``) is a block of
    no pool. So ``block._pool is pool._weak_self`` is exactly "``block`` is one of
    ``pool``'s blocks" (``pool.blocks[block.block_id] is block``) for every object
    made through the public API, and the hot paths test that: a comparison of two
    pointers the block already holds, where the identity test through
    ``pool.blocks`` costs a read of the block id's int object and of the list.
    """

    __slots__ = ()


def _plain(pool: Any) -> Any:
    """What a block built or changed by a caller may carry: never a pool's own mark."""
    if isinstance(pool, PoolRef):
        target = pool()
        return None if target is None else weakref.ref(target)
    return pool


def _rebuilt(
    block_id: Any, ref_cnt: Any, block_hash: Any, num_tokens: Any, is_null: Any, pool: Any
) -> KVCacheBlock:
    """A copy of a block: the same id, count, key and flag; no links; no pool's mark."""
    block = KVCacheBlock(block_id, ref_cnt, pool=pool)
    block._block_hash = block_hash
    block._block_hash_num_tokens = num_tokens
    block.is_null = is_null
    return block


Watcher = Callable[["KVCacheBlock"], object]
"""A reuse watcher (``unpin_blocks``' ``on_reuse``): called with the block when it is reused."""


class KVCacheBlock:
    """One block. ``prev_free_block``/``next_free_block`` are its links in the free queue.

    A block outside the free queue has both links None (INV-LIST).
    """

    __slots__ = (
        "_block_hash",
        "_block_hash_num_tokens",
        "_pending",
        "_pending_order",
        "_pool",
        "block_id",
        "is_null",
        "next_free_block",
        "prev_free_block",
        "ref_cnt",
    )

    def __init__(
        self,
        block_id: int,
        ref_cnt: int = 0,
        *,
        pool: weakref.ref[Any] | None = None,
    ) -> None:
        self.block_id = block_id
        self.ref_cnt = ref_cnt
        self._block_hash: Hashable | None = None
        self._block_hash_num_tokens: int | None = None
        self.prev_free_block: KVCacheBlock | None = None
        self.next_free_block: KVCacheBlock | None = None
        self.is_null = False
        # The block's pending reuse watchers, in registration order (None: none), and
        # its place in the order blocks first got one: the pool's ``unpin_blocks``
        # writes them, ``get_new_blocks`` and ``reset_prefix_cache`` fire and clear
        # them; ``BlockPool._watchers`` reads them as a block_id -> watchers map.
        # On the block, not in a dict, so that the hot paths read a slot of a block
        # they hold instead of hashing into a table (benchmarks/vllm_paths.py).
        self._pending: tuple[Watcher, ...] | None = None
        self._pending_order = 0
        # A weak reference, so that a pool is freed once nobody uses it, even
        # while requests still hold its blocks (their frees are then dropped).
        # A block built here is no pool's: only the pool writes its mark (PoolRef).
        self._pool: weakref.ref[Any] | None = _plain(pool)

    @property
    def pool(self) -> weakref.ref[Any] | None:
        """A weak reference to the pool this block belongs to (or names), or None."""
        return self._pool

    @pool.setter
    def pool(self, value: weakref.ref[Any] | None) -> None:
        self._pool = _plain(value)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, tuple[Any, ...]]:
        # copy, deepcopy and pickle: a block of no pool (see PoolRef).
        return _rebuilt, (
            self.block_id,
            self.ref_cnt,
            self._block_hash,
            self._block_hash_num_tokens,
            self.is_null,
            # Plain here, not only in the constructor: deepcopy copies these arguments,
            # and a PoolRef (a weakref subclass) cannot be copied.
            _plain(self._pool),
        )

    @property
    def block_hash(self) -> Hashable | None:
        """The cache key this block holds (set by ``cache_blocks``), or None."""
        return self._block_hash

    @property
    def block_hash_num_tokens(self) -> int | None:
        """The number of prefix tokens the primary key covers (None: no key, or not recorded)."""
        return self._block_hash_num_tokens

    def set_block_hash(self, block_hash: Hashable, num_tokens: int | None = None) -> None:
        """Give a block of no pool its primary key (refused on a pool's block, or a keyed one)."""
        if self._pool is not None:
            raise InvalidArgument(
                f"block {self.block_id} belongs to a pool: only the pool's caching calls key it"
            )
        if self._block_hash is not None or self._block_hash_num_tokens is not None:
            raise AlreadyCached(f"block {self.block_id} already holds key {self._block_hash!r}")
        self._block_hash = block_hash
        self._block_hash_num_tokens = num_tokens

    def reset_hash(self) -> None:
        """Forget a block of no pool's key (refused on a pool's block: its pool evicts it)."""
        if self._pool is not None:
            raise InvalidArgument(
                f"block {self.block_id} belongs to a pool: evict it through the pool"
            )
        self._block_hash = None
        self._block_hash_num_tokens = None

    def __repr__(self) -> str:
        prev_id = self.prev_free_block.block_id if self.prev_free_block is not None else None
        next_id = self.next_free_block.block_id if self.next_free_block is not None else None
        return (
            f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, "
            f"block_hash={self._block_hash!r}, prev_free_block={prev_id}, "
            f"next_free_block={next_id}{', is_null=True' if self.is_null else ''})"
        )
