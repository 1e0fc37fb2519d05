"""A vLLM-shaped block pool written from docs/semantics.md: the base the forks derive from.

It has vLLM's API (``cache_full_blocks``, ``get_cached_block(hash, group_ids)``, ...)
and vLLM's layout (``blocks``, ``free_block_queue`` with sentinel nodes,
``cached_block_hash_to_block``), so the oracle drives it through the same adapter as a
vLLM release and reads its state the same way; ``tests/test_forks.py`` checks that it
conforms at ``exact``, so each fork's finding is the fork's own bug.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any


class StoredEvent:
    def __init__(self, block_hashes: list[bytes]) -> None:
        self.block_hashes = block_hashes


class RemovedEvent:
    def __init__(self, block_hashes: list[bytes]) -> None:
        self.block_hashes = block_hashes


class ClearedEvent:
    pass


# the oracle names events by their class name, as vLLM's msgspec structs are named
StoredEvent.__name__ = "BlockStored"
RemovedEvent.__name__ = "BlockRemoved"
ClearedEvent.__name__ = "AllBlocksCleared"


class Block:
    __slots__ = (
        "block_hash",
        "block_id",
        "is_null",
        "next_free_block",
        "pool",
        "prev_free_block",
        "ref_cnt",
    )

    def __init__(self, block_id: int, pool: Any = None) -> None:
        self.block_id = block_id
        self.pool = pool  # a weak reference to the owning pool
        self.ref_cnt = 0
        self.block_hash: bytes | None = None
        self.is_null = False
        self.prev_free_block: Block | None = None
        self.next_free_block: Block | None = None

    def __repr__(self) -> str:
        return f"Block({self.block_id})"


class FreeQueue:
    """A doubly linked list between two sentinel nodes; the head is handed out first."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self.fake_free_list_head = Block(-1)
        self.fake_free_list_tail = Block(-2)
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.num_free_blocks = 0
        for b in blocks:
            self.append(b)

    def _link_after(self, left: Block, block: Block) -> None:
        right = left.next_free_block
        assert right is not None
        block.prev_free_block, block.next_free_block = left, right
        left.next_free_block = block
        right.prev_free_block = block
        self.num_free_blocks += 1

    def append(self, block: Block) -> None:
        last = self.fake_free_list_tail.prev_free_block
        assert last is not None
        self._link_after(last, block)

    def prepend_group(self, group: list[Block]) -> None:
        left = self.fake_free_list_head
        for b in group:
            self._link_after(left, b)
            left = b

    def remove(self, block: Block) -> None:
        left, right = block.prev_free_block, block.next_free_block
        assert left is not None and right is not None
        left.next_free_block = right
        right.prev_free_block = left
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def popleft(self) -> Block:
        first = self.fake_free_list_head.next_free_block
        assert first is not None and first is not self.fake_free_list_tail
        self.remove(first)
        return first


def _group_key(block_hash: bytes, group: int) -> bytes:
    return block_hash + group.to_bytes(4, "big")


class CorePool:
    """vLLM's BlockPool API on the semantics of docs/semantics.md, without ``take_events``.

    Blocks know their pool (a weak reference, as vLLM 0.34 keeps), so a block freed
    through another pool goes back to its own, and one whose pool is gone is dropped.
    """

    def __init__(
        self,
        num_gpu_blocks: int,
        enable_caching: bool,
        hash_block_size: int = 1,
        enable_kv_cache_events: bool = False,
    ) -> None:
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.enable_kv_cache_events = enable_kv_cache_events
        self._weak_self = weakref.ref(self)
        self.blocks = [Block(i, self._weak_self) for i in range(num_gpu_blocks)]
        self.free_block_queue = FreeQueue(self.blocks)
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.cached_block_hash_to_block: dict[bytes, dict[int, Block]] = {}
        self.kv_event_queue: list[Any] = []
        self._reuse_watchers: dict[int, list[Callable[[Block], None]]] = {}

    # -- helpers -------------------------------------------------------------------------

    def _log(self, event: Any) -> None:
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(event)

    def _drop_key(self, block: Block) -> None:
        key = block.block_hash
        if key is None:
            return
        holders = self.cached_block_hash_to_block[key]
        del holders[block.block_id]
        if not holders:
            del self.cached_block_hash_to_block[key]
            self._log(RemovedEvent([key[:-4]]))
        block.block_hash = None

    def _fire(self, block_ids: Iterable[int]) -> None:
        for bid in block_ids:
            for fn in self._reuse_watchers.pop(bid, []):
                try:
                    fn(self.blocks[bid])
                except Exception:  # a watcher's failure stops nothing
                    sys.unraisablehook(_Unraisable(fn))  # type: ignore[arg-type]

    # -- the API -------------------------------------------------------------------------

    def get_cached_block(
        self, block_hash: bytes, kv_cache_group_ids: list[int]
    ) -> list[Block] | None:
        found = []
        for group in kv_cache_group_ids:
            holders = self.cached_block_hash_to_block.get(_group_key(block_hash, group))
            if not holders:
                return None
            found.append(next(iter(holders.values())))
        return found

    def cache_full_blocks(
        self,
        request: Any,
        blocks: list[Block],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
    ) -> None:
        hashes = list(request.block_hashes[num_cached_blocks:num_full_blocks])
        for block, h in zip(blocks[num_cached_blocks:num_full_blocks], hashes, strict=True):
            key = _group_key(h, kv_cache_group_id)
            block.block_hash = key
            self.cached_block_hash_to_block.setdefault(key, {})[block.block_id] = block
        if hashes:
            self._log(StoredEvent(hashes))

    def get_new_blocks(self, num_blocks: int) -> list[Block]:
        if num_blocks > self.free_block_queue.num_free_blocks:
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        out = [self.free_block_queue.popleft() for _ in range(num_blocks)]
        for b in out:
            self._drop_key(b)
            b.ref_cnt = 1
        self._fire(b.block_id for b in out)
        return out

    def touch(self, blocks: Sequence[Block]) -> None:
        for b in blocks:
            if b.is_null:
                continue
            if b.ref_cnt == 0:
                self.free_block_queue.remove(b)
            b.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[Block]) -> None:
        """This pool's entries first, then each other live pool's, in first-seen order."""
        groups: dict[int, tuple[CorePool, list[Block]]] = {id(self): (self, [])}
        for b in ordered_blocks:
            owner = b.pool() if b.pool is not None else None
            if b.is_null or owner is None:
                continue  # the null block, or a block whose pool is gone
            groups.setdefault(id(owner), (owner, []))[1].append(b)
        for owner, blocks in groups.values():
            owner._release(blocks)

    def _release(self, blocks: list[Block]) -> None:
        front: list[Block] = []
        back: list[Block] = []
        for b in blocks:
            b.ref_cnt -= 1
            if b.ref_cnt == 0:
                cached = b.block_hash is not None and self.enable_caching
                (back if cached else front).append(b)
        self.free_block_queue.prepend_group(front)
        for b in back:
            self.free_block_queue.append(b)

    def unpin_blocks(self, blocks: Sequence[Block], on_reuse: Callable[[Block], None]) -> None:
        for b in blocks:
            b.ref_cnt -= 1
            pending = self._reuse_watchers.setdefault(b.block_id, [])
            if not any(fn is on_reuse for fn in pending):
                pending.append(on_reuse)
            if b.ref_cnt == 0:
                self.free_block_queue.append(b)

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        for bid in block_ids:
            self._drop_key(self.blocks[bid])

    def reset_prefix_cache(self) -> bool:
        if self.free_block_queue.num_free_blocks != self.num_gpu_blocks - 1:
            return False
        for b in self.blocks:
            b.block_hash = None
        self.cached_block_hash_to_block = {}
        self._log(ClearedEvent())
        self._fire(list(self._reuse_watchers))
        return True

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        if self.num_gpu_blocks == 1:
            return 0.0
        return 1.0 - self.get_num_free_blocks() / (self.num_gpu_blocks - 1)

    def is_block_writable(self, block: Block) -> bool:
        return not block.is_null and block.ref_cnt == 1 and block.block_hash is None


class BlockPool(CorePool):
    """:class:`CorePool` with ``take_events``: the whole API (one pool, no evict_first)."""

    def take_events(self) -> list[Any]:
        events, self.kv_event_queue = self.kv_event_queue, []
        return events


class _Unraisable:
    def __init__(self, obj: object) -> None:
        self.exc_type, self.exc_value, self.exc_traceback = sys.exc_info()
        self.err_msg = "Exception ignored in a block pool reuse watcher"
        self.object = obj
