"""Shape: a vLLM fork's ``block_pool.py`` (the whole class is the fork's own code).

Seeded bug (the class of vLLM 0.10-0.23's ``free_blocks``): the fork first lowers every
listed block's ``ref_cnt`` and then appends *each entry* whose block reached 0. A block
held twice (two requests sharing it) and freed in one call with both references is
listed twice, reaches 0, and is appended twice: the free list now reaches it twice, so
it is handed out twice. Found at ``safety`` (INV-FREE / INV-REF on the fork's own state).
"""

from __future__ import annotations

from . import shaped


class BlockPool(shaped.BlockPool):
    def _release(self, blocks: list[shaped.Block]) -> None:
        for b in blocks:
            b.ref_cnt -= 1
        # the bug: one append per *entry* that is at 0, so a block listed twice goes in twice
        front = [b for b in blocks if b.ref_cnt == 0 and b.block_hash is None]
        back = [b for b in blocks if b.ref_cnt == 0 and b.block_hash is not None]
        self.free_block_queue.prepend_group(front)
        for b in back:
            self.free_block_queue.append(b)
