"""Shape: a pool with no KV events at all (no ``take_events``, no events flag).

The oracle must pick events off for it (it cannot be asked for events) rather than fail
INV-EVENTS on the first cached block. Seeded bug: ``evict_blocks`` clears the block's
hash but leaves it in the index, so a lookup still finds a block that no longer holds
the key. Found at ``safety`` (INV-CACHE on the pool's own state).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import shaped


class BlockPool(shaped.CorePool):
    def __init__(self, num_gpu_blocks: int, enable_caching: bool, hash_block_size: int = 1) -> None:
        super().__init__(num_gpu_blocks, enable_caching, hash_block_size, False)

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        for bid in block_ids:
            self.blocks[bid].block_hash = None  # the index entry stays behind
