"""The loader for a pool whose API is not vLLM's: the block-level calls the oracle makes,
mapped one to one onto :class:`forks.nano.BlockManager`'s own steps, and its state.

This is all the code a user writes to check such a pool (``python:forks.nano_loader:
NanoPool``); every rule of the pool itself stays in the manager. The mapping:

- ``get_new_blocks(n)``: ``take_free_block()`` n times (what ``allocate`` does on a miss);
- ``touch(blocks)``: ``share_block(id)`` each (what ``allocate`` does on a hit);
- ``free_blocks(blocks)``: ``release_block(id)`` each (what ``deallocate`` does);
- ``cache_blocks(blocks, keys)``: ``publish(id, key)``, the oracle's key standing in for
  the content hash (``allocate`` publishes each full block it fills);
- ``get_cached_block(key)``: ``lookup(key)``;
- ``get_num_free_blocks()``: the length of the free deque.

vLLM's API has a null block (id 0) that is never handed out and is skipped in frees and
touches: the loader takes block 0 off the manager's free deque and skips it. The manager
is one pool whose blocks do not know it, so the loader says so
(``kvpool_multi_pool() -> False``: no cross-pool frees). ``kvpool_state()`` reads the
manager as the spec's ``PoolState``: a block's key is the hash it holds, and the index is
what the manager's own ``lookup`` serves for each indexed hash. The manager hands blocks
out in its own order (a deque, freed blocks to the back), so it is held to ``safety``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

from kvpool.spec import PoolState

from . import nano


class InsufficientFreeBlocks(Exception):
    """The spec's error kind, by its name (the manager itself would raise IndexError)."""


class NanoPool:
    manager_class: type[nano.BlockManager] = nano.BlockManager

    def __init__(
        self, num_gpu_blocks: int, enable_caching: bool = True, enable_kv_cache_events: bool = False
    ) -> None:
        self.caching = enable_caching
        self.manager = self.manager_class(num_gpu_blocks)
        self.manager.free_block_ids.remove(0)  # the null block: never handed out
        self.blocks = self.manager.blocks

    def kvpool_multi_pool(self) -> bool:
        return False

    def get_new_blocks(self, num_blocks: int) -> list[nano.Block]:
        if num_blocks > len(self.manager.free_block_ids):
            raise InsufficientFreeBlocks(f"cannot get {num_blocks} blocks")
        return [self.manager.take_free_block() for _ in range(num_blocks)]

    def touch(self, blocks: Iterable[nano.Block]) -> None:
        for b in blocks:
            if b.block_id != 0:
                self.manager.share_block(b.block_id)

    def free_blocks(self, blocks: Iterable[nano.Block]) -> None:
        for b in blocks:
            if b.block_id != 0:
                self.manager.release_block(b.block_id)

    def cache_blocks(self, blocks: list[nano.Block], keys: list[Hashable]) -> None:
        for b, key in zip(blocks, keys, strict=True):
            self.manager.publish(b.block_id, key)

    def get_cached_block(self, key: Hashable) -> nano.Block | None:
        found = self.manager.lookup(key)
        return None if found is None else self.blocks[found]

    def get_num_free_blocks(self) -> int:
        return len(self.manager.free_block_ids)

    def kvpool_state(self) -> PoolState:
        m = self.manager
        state = PoolState.initial(len(m.blocks), self.caching, False)
        state.ref = [b.ref_count for b in m.blocks]
        state.key = [b.hash for b in m.blocks]
        state.free = OrderedDict.fromkeys(m.free_block_ids)
        index: dict[Any, dict[int, None]] = {}
        for h in m.hash_to_block_id:
            served = m.lookup(h)
            if served is not None:
                index.setdefault(h, {})[served] = None
        state.index = index
        return state


class StaleNanoPool(NanoPool):
    """The same loader on the manager with the stale-index bug."""

    manager_class = nano.StaleIndexBlockManager
