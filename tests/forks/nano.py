"""Shape: a small inference engine's own paged allocator (nano-vllm-like), *not* vLLM-shaped.

Its API is per sequence: ``allocate(seq)`` gives a sequence its block table, reusing
blocks whose content hash is already indexed (a prefix hit), and ``deallocate(seq)``
gives them back. Free block ids wait in a deque; a freed block keeps its hash, so a
later sequence with the same prefix can revive it until the block is taken for new
content. Written for the oracle's tests from the description above, not from any
project's code. The oracle drives it through a thin loader (:mod:`forks.nano_loader`)
that maps vLLM's block-level calls onto the manager's own block-level steps, the steps
``allocate``/``deallocate`` are made of.

Seeded bug (:class:`StaleIndexBlockManager`): taking a free block for new content
resets the block but leaves its old hash in ``hash_to_block_id``, and the lookup
trusts the index, so a later sequence with that prefix is served the reused block as
a hit (stale index). Found at ``safety`` as INV-CACHE on the manager's own state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from collections.abc import Sequence as Seq


class Block:
    __slots__ = ("block_id", "hash", "ref_count", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash: Hashable | None = None
        self.token_ids: tuple[int, ...] = ()


class Sequence:
    """A request: its tokens and, once allocated, its block table."""

    def __init__(self, token_ids: Seq[int]) -> None:
        self.token_ids = list(token_ids)
        self.block_table: list[int] = []
        self.num_cached_tokens = 0

    def chunks(self, block_size: int) -> list[tuple[int, ...]]:
        t = self.token_ids
        return [tuple(t[i : i + block_size]) for i in range(0, len(t), block_size)]


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int = 4) -> None:
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.hash_to_block_id: dict[Hashable, int] = {}
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()

    @staticmethod
    def compute_hash(token_ids: tuple[int, ...], prefix: Hashable | None) -> Hashable:
        return hash((prefix, token_ids))

    # -- the block-level steps -----------------------------------------------------------

    def lookup(self, h: Hashable) -> int | None:
        """The block that holds content hash ``h``, or None."""
        return self.hash_to_block_id.get(h)

    def take_free_block(self) -> Block:
        """The oldest free block, for new content: its old hash leaves the index."""
        block = self.blocks[self.free_block_ids[0]]
        self.free_block_ids.popleft()
        self._forget(block)
        block.ref_count = 1
        self.used_block_ids.add(block.block_id)
        return block

    def _forget(self, block: Block) -> None:
        if block.hash is not None and self.hash_to_block_id.get(block.hash) == block.block_id:
            del self.hash_to_block_id[block.hash]
        block.hash, block.token_ids = None, ()

    def share_block(self, block_id: int) -> Block:
        """A prefix hit (or a second holder): one more reference, revived if it was free."""
        block = self.blocks[block_id]
        if block.ref_count == 0:
            self.free_block_ids.remove(block_id)
            self.used_block_ids.add(block_id)
        block.ref_count += 1
        return block

    def release_block(self, block_id: int) -> None:
        """One reference fewer; at none the block is free again (its hash kept for reuse)."""
        block = self.blocks[block_id]
        block.ref_count -= 1
        if block.ref_count == 0:
            self.used_block_ids.discard(block_id)
            self.free_block_ids.append(block_id)

    def publish(self, block_id: int, h: Hashable, token_ids: tuple[int, ...] = ()) -> None:
        """Index a full block under its content hash (the first holder of a hash keeps it)."""
        if h in self.hash_to_block_id:
            return  # another block already serves this content: this one stays unindexed
        block = self.blocks[block_id]
        block.hash, block.token_ids = h, token_ids
        self.hash_to_block_id[h] = block_id

    # -- the sequence-level API ----------------------------------------------------------

    def can_allocate(self, seq: Sequence) -> bool:
        return len(self.free_block_ids) >= len(seq.chunks(self.block_size))

    def allocate(self, seq: Sequence) -> None:
        h: Hashable | None = None
        hitting = True
        for tokens in seq.chunks(self.block_size):
            full = len(tokens) == self.block_size
            h = self.compute_hash(tokens, h) if full else None
            found = self.lookup(h) if (hitting and h is not None) else None
            if found is not None:
                block = self.share_block(found)
                seq.num_cached_tokens += self.block_size
            else:
                hitting = False
                block = self.take_free_block()
                if h is not None:
                    self.publish(block.block_id, h, tokens)
            seq.block_table.append(block.block_id)

    def deallocate(self, seq: Sequence) -> None:
        for block_id in reversed(seq.block_table):
            self.release_block(block_id)
        seq.block_table, seq.num_cached_tokens = [], 0


class StaleIndexBlockManager(BlockManager):
    """The bug: a block taken for new content is reset, but its old hash stays indexed."""

    def _forget(self, block: Block) -> None:
        block.hash, block.token_ids = None, ()  # hash_to_block_id still names the block
