"""A block pool on a plain Python list: vLLM's core API and kvpool_state(), nothing else."""

from collections import OrderedDict

from kvpool.spec import PoolState


class Refused(Exception):
    """Every refusal carries its error kind, as the spec names it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Block:
    def __init__(self, block_id: int) -> None:
        self.block_id, self.ref_cnt = block_id, 0

    @property
    def is_null(self) -> bool:
        return self.block_id == 0


class ListPool:
    def __init__(self, num_gpu_blocks, enable_caching=True, enable_kv_cache_events=False):
        self.caching, self.events = enable_caching, enable_kv_cache_events
        self.blocks = [Block(i) for i in range(num_gpu_blocks)]
        self.free = list(range(1, num_gpu_blocks))  # front first; O(n), unlike a linked list

    def get_new_blocks(self, num_blocks):
        if num_blocks > len(self.free):
            raise Refused("InsufficientFreeBlocks", f"cannot get {num_blocks} blocks")
        taken, self.free = self.free[:num_blocks], self.free[num_blocks:]
        for b in taken:
            self.blocks[b].ref_cnt = 1
        return [self.blocks[b] for b in taken]

    def free_blocks(self, blocks):
        blocks = [b for b in blocks if not b.is_null]
        for b in blocks:  # check every block before changing any
            if b.ref_cnt < sum(x is b for x in blocks):
                raise Refused("RefCountUnderflow", f"block {b.block_id} is freed too often")
        released = []
        for b in blocks:
            b.ref_cnt -= 1
            if b.ref_cnt == 0:
                released.append(b.block_id)
        self.free = released + self.free  # uncached blocks are handed out again first

    def touch(self, blocks):
        for b in blocks:
            if not b.is_null:
                if b.ref_cnt == 0:
                    self.free.remove(b.block_id)
                b.ref_cnt += 1

    def get_num_free_blocks(self):
        return len(self.free)

    def kvpool_state(self):
        state = PoolState.initial(len(self.blocks), self.caching, self.events)
        state.ref = [b.ref_cnt for b in self.blocks]
        state.free = OrderedDict.fromkeys(self.free)
        return state
