"""Shape: a hardware plugin's wrapper of several sub-pools, one per device.

``MirroredBlockPool`` keeps one :class:`~forks.shaped.BlockPool` per device and mirrors
every call on all of them; its ``blocks`` are the first device's. It offers
``kvpool_state()`` (the first device's state) so the oracle can check it.

Seeded bug: ``reset_prefix_cache`` asks whether every block is free by comparing the
*sum* of the sub-pools' free counts with one pool's ``num_gpu_blocks - 1``, so with two
sub-pools it can never succeed. Found at ``exact`` (``result differs: value`` on
``reset_prefix_cache`` with every block free). A second, unseeded, bug of the shape: a
block of another wrapper is looked up by id in this wrapper's mirror sub-pool, which the
oracle meets first when it builds several pools (``target crashed`` on a cross-pool
``free_blocks``); ``--max-pools 1`` leaves it out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kvpool.spec.state import PoolState

from . import shaped


class MirroredBlockPool:
    def __init__(
        self,
        num_gpu_blocks: int,
        enable_caching: bool,
        hash_block_size: int = 1,
        enable_kv_cache_events: bool = False,
        num_devices: int = 2,
    ) -> None:
        self.num_gpu_blocks = num_gpu_blocks
        self.devices = [
            shaped.BlockPool(
                num_gpu_blocks, enable_caching, hash_block_size, enable_kv_cache_events
            )
            for _ in range(num_devices)
        ]
        self.blocks = self.devices[0].blocks

    def _on(self, device: int, blocks: Iterable[shaped.Block]) -> list[shaped.Block]:
        return [self.devices[device].blocks[b.block_id] for b in blocks]

    def get_new_blocks(self, num_blocks: int) -> list[shaped.Block]:
        out = self.devices[0].get_new_blocks(num_blocks)
        for d in self.devices[1:]:
            d.get_new_blocks(num_blocks)
        return out

    def free_blocks(self, ordered_blocks: Iterable[shaped.Block]) -> None:
        listed = list(ordered_blocks)
        for i, d in enumerate(self.devices):
            d.free_blocks(self._on(i, listed))

    def touch(self, blocks: Sequence[shaped.Block]) -> None:
        for i, d in enumerate(self.devices):
            d.touch(self._on(i, blocks))

    def unpin_blocks(self, blocks: Sequence[shaped.Block], on_reuse: Callable[[Any], None]) -> None:
        self.devices[0].unpin_blocks(blocks, on_reuse)
        for i, d in enumerate(self.devices[1:], 1):
            d.unpin_blocks(self._on(i, blocks), _ignore)

    def cache_full_blocks(self, request: Any, blocks: list[shaped.Block], *args: Any) -> None:
        for i, d in enumerate(self.devices):
            d.cache_full_blocks(request, self._on(i, blocks), *args)

    def get_cached_block(self, block_hash: bytes, kv_cache_group_ids: list[int]) -> Any:
        return self.devices[0].get_cached_block(block_hash, kv_cache_group_ids)

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        ids = list(block_ids)
        for d in self.devices:
            d.evict_blocks(ids)

    def reset_prefix_cache(self) -> bool:
        free = sum(d.get_num_free_blocks() for d in self.devices)
        if free != self.num_gpu_blocks - 1:  # the bug: a sum over devices against one pool
            return False
        return all([d.reset_prefix_cache() for d in self.devices])

    def get_num_free_blocks(self) -> int:
        return self.devices[0].get_num_free_blocks()

    def get_usage(self) -> float:
        return self.devices[0].get_usage()

    def is_block_writable(self, block: shaped.Block) -> bool:
        return self.devices[0].is_block_writable(block)

    def take_events(self) -> list[Any]:
        out = self.devices[0].take_events()
        for d in self.devices[1:]:
            d.take_events()
        return out

    def kvpool_state(self) -> PoolState:
        """The first device's state in the spec's terms (keys are the hashes it was given)."""
        p = self.devices[0]
        free: OrderedDict[int, None] = OrderedDict()
        node = p.free_block_queue.fake_free_list_head.next_free_block
        while node is not None and node is not p.free_block_queue.fake_free_list_tail:
            free[node.block_id] = None
            node = node.next_free_block
        return PoolState(
            num_blocks=p.num_gpu_blocks,
            caching=p.enable_caching,
            events_on=p.enable_kv_cache_events,
            ref=[b.ref_cnt for b in p.blocks],
            key=[b.block_hash for b in p.blocks],
            free=free,
            index={k: dict.fromkeys(v) for k, v in p.cached_block_hash_to_block.items()},
            # the watcher objects themselves: the oracle knows which of its watchers each is
            pending={b: list(ws) for b, ws in p._reuse_watchers.items() if ws},
            log=list(p.kv_event_queue),
            view=set(),  # which keys a reader of take_events knows: the oracle keeps it
            registered=0,  # how many watchers were registered and fired: the oracle counts
            fired=0,
        )


def _ignore(block: Any) -> None:
    pass
