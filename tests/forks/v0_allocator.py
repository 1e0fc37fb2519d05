"""Shape: vLLM v0's prefix-caching allocator, behind the block-level calls of vLLM v1.

There is no linked free list. Free blocks without content wait in a deque of ids
(handed out first); free blocks that still hold a key wait in an *evictor* keyed by
last access time, and a block is evicted (its key dropped, its id handed out) only
when no keyless block is left, least recently freed first. The evictor keeps a heap
of ``(last_accessed, block_id)`` with lazy deletion, as v0's did: a block revived by
a prefix hit leaves ``free_table`` at once, and its heap entry is skipped when it comes
up. Written for the oracle's tests from that description, not from any project's code.
It hands blocks out in its own order, so it is held to ``safety``.

Seeded bug (:class:`LazyEvictorAllocator`): the evictor's ``remove`` leaves everything
to lazy deletion, so a block revived by a prefix hit stays in ``free_table`` with its
current time: it is still counted free, and the evictor would hand it out again while
it is referenced. Found at ``safety`` as INV-FREE (``ref_cnt 1 but in the free queue``)
on the allocator's own state.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable

from kvpool.spec import PoolState


class InsufficientFreeBlocks(Exception):
    pass


class Block:
    __slots__ = ("block_id", "content_hash", "ref_cnt")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.content_hash: Hashable | None = None


class LRUEvictor:
    """Free blocks that hold a key, evicted least recently accessed first."""

    def __init__(self) -> None:
        self.free_table: OrderedDict[int, int] = OrderedDict()  # block id -> last access
        self.heap: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self.free_table)

    def __contains__(self, block_id: int) -> bool:
        return block_id in self.free_table

    def add(self, block_id: int, last_accessed: int) -> None:
        self.free_table[block_id] = last_accessed
        heapq.heappush(self.heap, (last_accessed, block_id))

    def remove(self, block_id: int) -> None:
        del self.free_table[block_id]  # its heap entry is left behind, skipped when popped

    def evict(self) -> int:
        while True:
            last_accessed, block_id = heapq.heappop(self.heap)
            if self.free_table.get(block_id) == last_accessed:  # not a stale entry
                del self.free_table[block_id]
                return block_id

    def in_order(self) -> list[int]:
        return [b for _, b in sorted((t, b) for b, t in self.free_table.items())]


class PrefixCachingAllocator:
    def __init__(
        self, num_gpu_blocks: int, enable_caching: bool = True, enable_kv_cache_events: bool = False
    ) -> None:
        self.enable_caching = enable_caching
        self.blocks = [Block(i) for i in range(num_gpu_blocks)]
        self.hashless: deque[int] = deque(range(1, num_gpu_blocks))  # 0 is the null block
        self.evictor = self.evictor_class()
        self.cached_blocks: dict[Hashable, int] = {}
        self.clock = 0

    evictor_class: type[LRUEvictor] = LRUEvictor

    def kvpool_multi_pool(self) -> bool:
        return False  # a block does not know its allocator

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _drop_hash(self, block: Block) -> None:
        if block.content_hash is not None:
            if self.cached_blocks.get(block.content_hash) == block.block_id:
                del self.cached_blocks[block.content_hash]
            block.content_hash = None

    def get_num_free_blocks(self) -> int:
        return len(self.hashless) + len(self.evictor)

    def get_new_blocks(self, num_blocks: int) -> list[Block]:
        if num_blocks > self.get_num_free_blocks():
            raise InsufficientFreeBlocks(f"cannot get {num_blocks} blocks")
        out = []
        for _ in range(num_blocks):
            if self.hashless:
                block = self.blocks[self.hashless.popleft()]
            else:
                block = self.blocks[self.evictor.evict()]
                self._drop_hash(block)
            block.ref_cnt += 1
            out.append(block)
        return out

    def free_blocks(self, blocks: Iterable[Block]) -> None:
        now = self._tick()
        for b in blocks:
            if b.block_id == 0:
                continue
            b.ref_cnt -= 1
            if b.ref_cnt == 0:
                if b.content_hash is not None:
                    self.evictor.add(b.block_id, now)
                else:
                    self.hashless.appendleft(b.block_id)

    def touch(self, blocks: Iterable[Block]) -> None:
        for b in blocks:
            if b.block_id == 0:
                continue
            if b.ref_cnt == 0:
                if b.block_id in self.evictor:
                    self.evictor.remove(b.block_id)
                else:
                    self.hashless.remove(b.block_id)
            b.ref_cnt += 1

    def cache_blocks(self, blocks: list[Block], keys: list[Hashable]) -> None:
        for b, key in zip(blocks, keys, strict=True):
            if key not in self.cached_blocks:  # content already cached elsewhere: not indexed
                b.content_hash = key
                self.cached_blocks[key] = b.block_id

    def get_cached_block(self, key: Hashable) -> Block | None:
        found = self.cached_blocks.get(key)
        return None if found is None else self.blocks[found]

    def kvpool_state(self) -> PoolState:
        state = PoolState.initial(len(self.blocks), self.enable_caching, False)
        state.ref = [b.ref_cnt for b in self.blocks]
        state.key = [b.content_hash for b in self.blocks]
        state.free = OrderedDict.fromkeys([*self.hashless, *self.evictor.in_order()])
        state.index = {k: {b: None} for k, b in self.cached_blocks.items()}
        return state


class LazyRemoveEvictor(LRUEvictor):
    """The bug: removal is left wholly to lazy deletion, so the table keeps the block."""

    def remove(self, block_id: int) -> None:
        pass  # "the heap entry is skipped later": but it is still current in free_table


class LazyEvictorAllocator(PrefixCachingAllocator):
    evictor_class: type[LRUEvictor] = LazyRemoveEvictor
