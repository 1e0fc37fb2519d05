"""The free queue: an intrusive doubly linked list of blocks, with sentinels at both ends.

The links live in the blocks themselves (``prev_free_block``/``next_free_block``),
so every operation is O(1) per block it moves: no search, no allocation beyond the
returned list. Two sentinels (``fake_free_list_head`` and ``fake_free_list_tail``,
block id -1) are always present, so no operation has to special-case an empty
list or an end of it: every real block always has a real ``prev`` and ``next``.

The public methods check their arguments and raise a ``PoolError`` before
changing anything. The pool, which already knows its blocks are well formed,
calls the unchecked ``_`` methods on its hot paths.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvpool.spec.errors import InsufficientFreeBlocks, InvalidArgument

from .block import KVCacheBlock

SENTINEL_ID = -1


class FreeKVCacheBlockQueue:
    """Free blocks, front first: the front is handed out (and evicted) first."""

    __slots__ = ("fake_free_list_head", "fake_free_list_tail", "num_free_blocks")

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self.fake_free_list_head = KVCacheBlock(SENTINEL_ID)
        self.fake_free_list_tail = KVCacheBlock(SENTINEL_ID)
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.num_free_blocks = 0
        blocks = list(blocks)
        self._check_unlinked(blocks)
        self._append_n(blocks)

    # -- checked, public ------------------------------------------------------------

    def popleft(self) -> KVCacheBlock:
        """Remove and return the front block."""
        if self.num_free_blocks == 0:
            raise InsufficientFreeBlocks("the free queue is empty")
        return self._popleft_n(1)[0]

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first ``n`` blocks, front first."""
        if type(n) is not int or n < 0:
            raise InvalidArgument(f"n must be an int >= 0, got {n!r}")
        if n > self.num_free_blocks:
            raise InsufficientFreeBlocks(
                f"cannot pop {n} blocks from a free queue of {self.num_free_blocks}"
            )
        return self._popleft_n(n)

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from wherever it is in the queue."""
        if (
            not isinstance(block, KVCacheBlock)
            or self._is_sentinel(block)
            or block.prev_free_block is None
            or block.next_free_block is None
        ):
            raise InvalidArgument(f"{block!r} is not in the free queue")
        self._remove(block)

    def append(self, block: KVCacheBlock) -> None:
        """Add ``block`` at the back (it is evicted last)."""
        self._check_unlinked([block])
        self._append_n([block])

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Add ``blocks`` at the back, in order."""
        blocks = list(blocks)
        self._check_unlinked(blocks)
        self._append_n(blocks)

    def prepend_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Add ``blocks`` at the front as a group: ``blocks[0]`` becomes the head."""
        blocks = list(blocks)
        self._check_unlinked(blocks)
        self._prepend_n(blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Every free block, front first."""
        out: list[KVCacheBlock] = []
        node = self.fake_free_list_head.next_free_block
        tail = self.fake_free_list_tail
        while node is not None and node is not tail:
            out.append(node)
            node = node.next_free_block
        return out

    def __len__(self) -> int:
        return self.num_free_blocks

    # -- validation -----------------------------------------------------------------

    def _is_sentinel(self, block: KVCacheBlock) -> bool:
        return block is self.fake_free_list_head or block is self.fake_free_list_tail

    def _check_unlinked(self, blocks: list[KVCacheBlock]) -> None:
        """Each block must be a block, not a sentinel, in no list, and listed once."""
        seen: set[int] = set()
        for b in blocks:
            if not isinstance(b, KVCacheBlock) or self._is_sentinel(b):
                raise InvalidArgument(f"{b!r} is not a block that can be queued")
            if b.prev_free_block is not None or b.next_free_block is not None:
                raise InvalidArgument(f"block {b.block_id} is already in a free queue")
            if id(b) in seen:
                raise InvalidArgument(f"block {b.block_id} is listed twice")
            seen.add(id(b))

    # -- unchecked, for the pool --------------------------------------------------------

    def _popleft_n(self, n: int) -> list[KVCacheBlock]:
        if n == 0:
            return []
        head = self.fake_free_list_head
        node = head.next_free_block
        out: list[KVCacheBlock] = []
        append = out.append
        for _ in range(n):
            append(node)  # type: ignore[arg-type]
            nxt = node.next_free_block  # type: ignore[union-attr]
            # A block leaving the list forgets both links (INV-LIST).
            node.prev_free_block = node.next_free_block = None  # type: ignore[union-attr]
            node = nxt
        # The first block left (or the tail sentinel) is the new front.
        head.next_free_block = node
        node.prev_free_block = head  # type: ignore[union-attr]
        self.num_free_blocks -= n
        return out

    def _remove(self, block: KVCacheBlock) -> None:
        prev, nxt = block.prev_free_block, block.next_free_block
        # Sentinels guarantee both neighbours exist: stitch them together.
        prev.next_free_block = nxt  # type: ignore[union-attr]
        nxt.prev_free_block = prev  # type: ignore[union-attr]
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def _append_n(self, blocks: list[KVCacheBlock]) -> None:
        if not blocks:
            return
        tail = self.fake_free_list_tail
        last = tail.prev_free_block
        for b in blocks:
            # Chain each block after the current last one.
            last.next_free_block = b  # type: ignore[union-attr]
            b.prev_free_block = last
            last = b
        last.next_free_block = tail  # type: ignore[union-attr]
        tail.prev_free_block = last
        self.num_free_blocks += len(blocks)

    def _prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        if not blocks:
            return
        head = self.fake_free_list_head
        old_first = head.next_free_block
        prev = head
        for b in blocks:
            # Chain the group after the head, in order, then hook the old front on.
            prev.next_free_block = b
            b.prev_free_block = prev
            prev = b
        prev.next_free_block = old_first
        old_first.prev_free_block = prev  # type: ignore[union-attr]
        self.num_free_blocks += len(blocks)
