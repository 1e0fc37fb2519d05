"""The block: metadata for one fixed-size slab of KV-cache memory.

Attribute names follow vLLM's ``KVCacheBlock`` so that code written against
vLLM reads ours unchanged. ``block_hash`` is read-only: only the pool sets it
(through ``cache_blocks``), because the cache index must agree with it (INV-CACHE).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any


class KVCacheBlock:
    """One block. ``prev_free_block``/``next_free_block`` are its links in the free queue.

    A block outside the free queue has both links None (INV-LIST).
    """

    __slots__ = (
        "_block_hash",
        "block_id",
        "is_null",
        "next_free_block",
        "pool",
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
        self.prev_free_block: KVCacheBlock | None = None
        self.next_free_block: KVCacheBlock | None = None
        self.is_null = False
        # A weak reference, so that a pool is freed once nobody uses it, even
        # while requests still hold its blocks (their frees are then dropped).
        # It says which pool to forward a free to; it proves nothing: a block is a
        # pool's only if it is the very object ``pool.blocks[block_id]``.
        self.pool = pool

    @property
    def block_hash(self) -> Hashable | None:
        """The cache key this block holds (set by ``cache_blocks``), or None."""
        return self._block_hash

    def __repr__(self) -> str:
        prev_id = self.prev_free_block.block_id if self.prev_free_block is not None else None
        next_id = self.next_free_block.block_id if self.next_free_block is not None else None
        return (
            f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, "
            f"block_hash={self._block_hash!r}, prev_free_block={prev_id}, "
            f"next_free_block={next_id}{', is_null=True' if self.is_null else ''})"
        )


Watcher = Callable[[KVCacheBlock], object]
"""A reuse watcher (``unpin_blocks``' ``on_reuse``): called with the block when it is reused."""
