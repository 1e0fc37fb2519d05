"""Deliberately broken copies of the pool and the queue: each contract check must catch them.

Each mutant is a subclass that overrides one method with a one-line bug, so the
real classes stay untouched. :data:`POOLS` maps a mutant's name to a pool class
(queue mutants come inside a pool whose free queue is of the broken class).
The harness picks one by the environment variable ``KVPOOL_CONTRACTS_MUTANT``.
"""

from __future__ import annotations

from kvpool.impl import BlockPool, FreeKVCacheBlockQueue, KVCacheBlock


class _PopKeepsLink(FreeKVCacheBlockQueue):
    """A popped block keeps its prev link (INV-LIST: a block outside the list has no links)."""

    __slots__ = ()

    def _popleft_n(self, n: int) -> list[KVCacheBlock]:
        out = super()._popleft_n(n)
        for b in out:
            b.prev_free_block = self.fake_free_list_head
        return out


class _PrependMiscounts(FreeKVCacheBlockQueue):
    """Prepending a group counts one block too few (INV-LIST / INV-FREE: the counter)."""

    __slots__ = ()

    def _prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        super()._prepend_n(blocks)
        if len(blocks) > 1:
            self.num_free_blocks -= 1


class _RemoveForgetsPrev(FreeKVCacheBlockQueue):
    """Unlinking a block leaves its successor pointing back at it (INV-LIST: mirrored links)."""

    __slots__ = ()

    def _remove(self, block: KVCacheBlock) -> None:
        nxt = block.next_free_block
        super()._remove(block)
        if nxt is not None and nxt is not self.fake_free_list_tail:
            nxt.prev_free_block = block


class _AppendReversed(FreeKVCacheBlockQueue):
    """append_n links a group in reverse list order (ORD-RELEASE: BACK keeps list order)."""

    __slots__ = ()

    def _append_n(self, blocks: list[KVCacheBlock]) -> None:
        super()._append_n(blocks[::-1])


def _pool_with_queue(queue_cls: type[FreeKVCacheBlockQueue], name: str) -> type[BlockPool]:
    def __init__(
        self: BlockPool,
        num_gpu_blocks: int,
        enable_caching: bool = True,
        enable_kv_cache_events: bool = False,
    ) -> None:
        BlockPool.__init__(
            self,
            num_gpu_blocks,
            enable_caching=enable_caching,
            enable_kv_cache_events=enable_kv_cache_events,
        )
        self.free_block_queue.__class__ = queue_cls

    return type(name, (BlockPool,), {"__init__": __init__, "__doc__": queue_cls.__doc__})


class KeepsKeyOnHandout(BlockPool):
    """get_new_blocks hands out a cached block still holding its key (INV-CACHE, ORD-HANDOUT)."""

    def _drop_key(self, block: KVCacheBlock) -> None:
        if block.ref_cnt == 0:  # called from get_new_blocks: "forget" to drop it
            return
        super()._drop_key(block)


class DoubleFreeAllowed(BlockPool):
    """free_blocks lets a block's ref_cnt go negative (INV-REF)."""

    def free_blocks(self, ordered_blocks: object, evict_first: bool = False) -> None:
        blocks = list(ordered_blocks)  # type: ignore[call-overload]
        for b in blocks:
            if getattr(b, "ref_cnt", 1) == 0 and not getattr(b, "is_null", True):
                b.ref_cnt = -1
                return
        super().free_blocks(blocks, evict_first)


class KeyedFreedToFront(BlockPool):
    """free_blocks puts every released block at the FRONT, keyed or not (ORD-RELEASE)."""

    def free_blocks(self, ordered_blocks: object, evict_first: bool = False) -> None:
        super().free_blocks(ordered_blocks, True)  # type: ignore[arg-type]


class TouchLeavesFreeBlockQueued(BlockPool):
    """touch of a free block raises its ref_cnt but leaves it in the free queue (INV-FREE)."""

    def touch(self, blocks: object) -> None:
        for b in list(blocks):  # type: ignore[call-overload]
            if not b.is_null:
                b.ref_cnt += 1


class HandsOutTwiceReferenced(BlockPool):
    """get_new_blocks hands blocks out with ref_cnt 2 (ORD-HANDOUT: each gets ref_cnt 1)."""

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        out = super().get_new_blocks(num_blocks)
        for b in out:
            b.ref_cnt = 2
        return out


QUEUES: dict[str, type[FreeKVCacheBlockQueue]] = {
    "queue-pop-keeps-link": _PopKeepsLink,
    "queue-prepend-miscounts": _PrependMiscounts,
    "queue-remove-forgets-prev": _RemoveForgetsPrev,
    "queue-append-n-reversed": _AppendReversed,
}
"""The queue mutants by name (the bounded entry points of :mod:`.bounded` build these)."""

POOLS: dict[str, type[BlockPool]] = {
    **{
        name: _pool_with_queue(queue, queue.__name__.lstrip("_") + "Pool")
        for name, queue in QUEUES.items()
    },
    "pool-keeps-key-on-handout": KeepsKeyOnHandout,
    "pool-double-free-allowed": DoubleFreeAllowed,
    "pool-hands-out-twice-referenced": HandsOutTwiceReferenced,
    "pool-keyed-freed-to-front": KeyedFreedToFront,
    "pool-touch-leaves-free-block-queued": TouchLeavesFreeBlockQueued,
}
"""Every mutant by name: a pool class to build instead of :class:`BlockPool`."""


CROSSHAIR_FINDS: dict[str, str] = {
    "queue-pop-keeps-link": "get_new_blocks",
    "queue-remove-forgets-prev": "touch",
    "pool-double-free-allowed": "free_blocks",
    "pool-touch-leaves-free-block-queued": "touch",
    "pool-hands-out-twice-referenced": "get_new_blocks",
}
"""Mutant -> the entry point whose contracts it breaks, found by CrossHair within the
fast budget. (The other mutants in :data:`POOLS` are caught by the concrete harness.)"""

BOUNDED_FINDS: dict[str, str] = {
    "queue-pop-keeps-link": "queue_popleft_n",
    "queue-prepend-miscounts": "queue_prepend_n",
    "queue-remove-forgets-prev": "queue_remove",
    "queue-append-n-reversed": "queue_append_n",
}
"""Queue mutant -> the bounded entry point (:mod:`.bounded`) on which CrossHair finds it."""
