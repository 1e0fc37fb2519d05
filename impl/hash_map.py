"""vLLM's ``BlockHashToBlockMap``: the prefix-cache index, key -> the blocks holding it.

The map is always ``key -> {block_id: block}`` in insertion order, so the first
holder is the oldest (vLLM keeps a lone block unwrapped to spare the garbage
collector; the observable behaviour is the same). A map built by hand is a plain
data structure with vLLM's methods. A pool's own map is its cache index: reading
it (``get_one_block``, ``contain``, ``len``) is open to anyone, but ``insert`` and
``pop`` are refused (``InvalidArgument``), since only the pool may change which
blocks hold which keys without the blocks' own keys falling out of step (INV-CACHE).
"""

from __future__ import annotations

from collections.abc import Hashable

from kvpool.spec.errors import InvalidArgument

from .block import KVCacheBlock


class BlockHashToBlockMap:
    """Cache of blocks by key; ``get_one_block`` gives the oldest holder."""

    __slots__ = ("_cache", "_owned")

    def __init__(self) -> None:
        self._cache: dict[Hashable, dict[int, KVCacheBlock]] = {}
        self._owned = False

    def get_one_block(self, key: Hashable) -> KVCacheBlock | None:
        """The oldest block holding ``key``, or None."""
        try:
            holders = self._cache.get(key)
        except TypeError:
            raise InvalidArgument(f"key {key!r} is not hashable") from None
        if not holders:
            return None
        return next(iter(holders.values()))

    def contain(self, key: Hashable, block_id: int) -> bool:
        """Whether block ``block_id`` holds ``key``."""
        try:
            holders = self._cache.get(key)
        except TypeError:
            raise InvalidArgument(f"key {key!r} is not hashable") from None
        return holders is not None and block_id in holders

    def insert(self, key: Hashable, block: KVCacheBlock) -> None:
        """``block`` joins the holders of ``key``, last (refused on a pool's own map)."""
        self._writable()
        if not isinstance(block, KVCacheBlock):
            raise InvalidArgument(f"{block!r} is not a block")
        try:
            holders = self._cache.get(key)
        except TypeError:
            raise InvalidArgument(f"key {key!r} is not hashable") from None
        if holders is None:
            self._cache[key] = {block.block_id: block}
        else:
            holders[block.block_id] = block

    def pop(self, key: Hashable, block_id: int) -> KVCacheBlock | None:
        """Take block ``block_id`` out of the holders of ``key``; None if it was not one."""
        self._writable()
        try:
            holders = self._cache.get(key)
        except TypeError:
            raise InvalidArgument(f"key {key!r} is not hashable") from None
        if holders is None:
            return None
        block = holders.pop(block_id, None)
        if not holders:
            del self._cache[key]
        return block

    def __len__(self) -> int:
        return len(self._cache)

    def _writable(self) -> None:
        if self._owned:
            raise InvalidArgument(
                "this is a pool's cache index: change it through the pool's caching calls"
            )

    def __repr__(self) -> str:
        return f"BlockHashToBlockMap({len(self._cache)} keys)"
