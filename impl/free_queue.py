"""The free queue: an intrusive doubly linked list of blocks, with sentinels at both ends.

The links live in the blocks themselves (``prev_free_block``/``next_free_block``),
so every operation is O(1) per block it moves: no search, no allocation beyond the
returned list. Two sentinels (``fake_free_list_head`` and ``fake_free_list_tail``,
block id -1) are always present, so no operation has to special-case an empty
list or an end of it: every real block always has a real ``prev`` and ``next``.

Every public method checks its arguments and refuses bad ones with a
``PoolError``, leaving the queue as it was: a block to be linked in must have no
links (which also catches a block listed twice, and the sentinels), a block to be
removed must have both. The pool has already made those checks, more cheaply, at
its own level (a block reaching ``ref_cnt == 0`` is in no list), so its hot paths
call the unchecked ``_`` methods, which vLLM's queue matches step for step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kvpool.spec.errors import InsufficientFreeBlocks, InvalidArgument

from .block import KVCacheBlock

SENTINEL_ID = -1


class _AlreadyLinked(Exception):
    """Internal: a block handed to ``append_n``/``prepend_n`` is already in a list."""


def _refusal(exc: Exception) -> InvalidArgument:
    what = exc.args[0] if isinstance(exc, _AlreadyLinked) else None
    return InvalidArgument(
        f"{what!r} is already in a free queue (or listed twice)"
        if what is not None
        else "an entry is not a block that can be queued"
    )


def _as_list(blocks: Iterable[KVCacheBlock]) -> list[KVCacheBlock]:
    if type(blocks) is list:
        return blocks
    try:
        return list(blocks)
    except TypeError:
        raise InvalidArgument(f"expected an iterable of blocks, got {blocks!r}") from None


class FreeKVCacheBlockQueue:
    """Free blocks, front first: the front is handed out (and evicted) first.

    Contracts (PEP 316: read by CrossHair, never evaluated in normal use; opt in to
    checking them at run time with ``kvpool.contracts.runtime.enable()``). The
    ``# INV-...`` line above a condition names the invariant it states.

    inv:
        # INV-LIST: the counter is never negative
        self.num_free_blocks >= 0
        # INV-LIST: sentinels at both ends
        self.fake_free_list_head.prev_free_block is None
        self.fake_free_list_tail.next_free_block is None
        # INV-LIST: the walk from the head reaches the tail in exactly ``num_free_blocks`` steps
        len(self.get_all_free_blocks()) == self.num_free_blocks
        # INV-LIST: prev links mirror next links, all the way to the tail
        self.fake_free_list_head.next_free_block.prev_free_block is self.fake_free_list_head
        all(b.next_free_block.prev_free_block is b for b in self.get_all_free_blocks())
    """

    __slots__ = ("fake_free_list_head", "fake_free_list_tail", "num_free_blocks")

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self.fake_free_list_head = KVCacheBlock(SENTINEL_ID)
        self.fake_free_list_tail = KVCacheBlock(SENTINEL_ID)
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.num_free_blocks = 0
        self.append_n(blocks)

    # -- checked, public ------------------------------------------------------------

    def popleft(self) -> KVCacheBlock:
        """Remove and return the front block.

        raises: InsufficientFreeBlocks, InvalidArgument
        post: __return__.block_id == __old__.self.fake_free_list_head.next_free_block.block_id
        post: __return__.prev_free_block is None and __return__.next_free_block is None
        post: self.num_free_blocks == __old__.self.num_free_blocks - 1
        post: [b.block_id for b in self.get_all_free_blocks()] == [b.block_id for b in __old__.self.get_all_free_blocks()][1:]
        """  # noqa: E501
        if self.num_free_blocks == 0:
            raise InsufficientFreeBlocks("No free blocks available")
        return self._popleft_n(1)[0]

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first ``n`` blocks, front first.

        raises: InsufficientFreeBlocks, InvalidArgument
        post: [b.block_id for b in __return__] == [b.block_id for b in __old__.self.get_all_free_blocks()][:n]
        post: [b.block_id for b in self.get_all_free_blocks()] == [b.block_id for b in __old__.self.get_all_free_blocks()][n:]
        post: all(b.prev_free_block is None and b.next_free_block is None for b in __return__)
        post: self.num_free_blocks == __old__.self.num_free_blocks - n
        """  # noqa: E501
        # One chained comparison on the hot path; the slow path says what was wrong.
        # (``__class__`` can be faked, so a failure anywhere goes to the slow path too.)
        try:
            ok = n.__class__ is int and 0 <= n <= self.num_free_blocks
        except Exception:
            ok = False
        if not ok:
            if type(n) is not int or n < 0:
                raise InvalidArgument(f"n must be an int >= 0, got {n!r}")
            raise InsufficientFreeBlocks(
                f"cannot pop {n} blocks from a free queue of {self.num_free_blocks}"
            )
        return self._popleft_n(n)

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from wherever it is in the queue.

        raises: InsufficientFreeBlocks, InvalidArgument
        post: block.prev_free_block is None and block.next_free_block is None
        post: all(b is not block for b in self.get_all_free_blocks())
        post: self.num_free_blocks == __old__.self.num_free_blocks - 1
        """
        try:
            before, after = block.prev_free_block, block.next_free_block
        except AttributeError:
            before = after = None
        # A sentinel always lacks one link, so this also refuses them.
        if before is None or after is None:
            raise InvalidArgument(f"remove() called on an invalid block: {block!r}")
        # ``_remove``'s stitch, written out (see "Linking in" for why); the check
        # above is the one vLLM's remove makes too.
        before.next_free_block = after
        after.prev_free_block = before
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Add ``block`` at the back (it is evicted last).

        raises: InsufficientFreeBlocks, InvalidArgument
        post: self.fake_free_list_tail.prev_free_block is block
        post: self.num_free_blocks == __old__.self.num_free_blocks + 1
        post: [b.block_id for b in self.get_all_free_blocks()] == [b.block_id for b in __old__.self.get_all_free_blocks()] + [block.block_id]
        """  # noqa: E501
        self.append_n([block])

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Add ``blocks`` at the back, in order.

        (The list-order postcondition reads ``blocks`` again, so it speaks of list arguments.)

        raises: InsufficientFreeBlocks, InvalidArgument
        post: self.num_free_blocks >= __old__.self.num_free_blocks
        post: type(blocks) is not list or [b.block_id for b in self.get_all_free_blocks()] == [b.block_id for b in __old__.self.get_all_free_blocks()] + [b.block_id for b in blocks]
        """  # noqa: E501
        if blocks.__class__ is not list:
            blocks = _as_list(blocks)
        tail = self.fake_free_list_tail
        before = end = tail.prev_free_block
        head = self.fake_free_list_head
        head_next = head.next_free_block
        try:
            for b in blocks:
                if b.prev_free_block is not None:  # linked: refused (see "Linking in")
                    raise _AlreadyLinked(b)
                # ``b``'s own link first: if ``b`` cannot take one, nothing points at it yet.
                b.prev_free_block = end
                end.next_free_block = b  # type: ignore[union-attr]
                end = b
        except (AttributeError, _AlreadyLinked) as exc:
            self._unlink_chained(blocks, before, tail, end, head_next)  # type: ignore[arg-type]
            raise _refusal(exc) from None
        if head.prev_free_block is not None:
            self._unlink_chained(blocks, before, tail, end, head_next)  # type: ignore[arg-type]
            raise InvalidArgument(f"{head!r} is a sentinel of the free queue")
        # The group's last block (or ``before``, for none) meets the tail.
        end.next_free_block = tail  # type: ignore[union-attr]
        tail.prev_free_block = end
        self.num_free_blocks += len(blocks)

    def prepend_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Add ``blocks`` at the front as a group: ``blocks[0]`` becomes the head.

        raises: InsufficientFreeBlocks, InvalidArgument
        post: self.num_free_blocks >= __old__.self.num_free_blocks
        post: type(blocks) is not list or [b.block_id for b in self.get_all_free_blocks()] == [b.block_id for b in blocks] + [b.block_id for b in __old__.self.get_all_free_blocks()]
        """  # noqa: E501
        if blocks.__class__ is not list:
            blocks = _as_list(blocks)
        head = self.fake_free_list_head
        front = head.next_free_block
        prev = head
        try:
            for b in blocks:
                if b.prev_free_block is not None:  # linked: refused (see "Linking in")
                    raise _AlreadyLinked(b)
                b.prev_free_block = prev
                prev.next_free_block = b
                prev = b
        except (AttributeError, _AlreadyLinked) as exc:
            self._unlink_chained(blocks, head, front, prev, front)  # type: ignore[arg-type]
            raise _refusal(exc) from None
        if head.prev_free_block is not None:
            self._unlink_chained(blocks, head, front, prev, front)  # type: ignore[arg-type]
            raise InvalidArgument(f"{head!r} is a sentinel of the free queue")
        # The group's last block meets the old front.
        prev.next_free_block = front
        front.prev_free_block = prev  # type: ignore[union-attr]
        self.num_free_blocks += len(blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Every free block, front first.

        post: len(__return__) == self.num_free_blocks
        post: all(b.prev_free_block is not None for b in __return__)
        """
        out: list[KVCacheBlock] = []
        node = self.fake_free_list_head.next_free_block
        tail = self.fake_free_list_tail
        while node is not None and node is not tail:
            out.append(node)
            node = node.next_free_block
        return out

    def iter_blocks_after(self, cursor: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        """The free blocks after ``cursor`` (all of them for None), front first, read lazily.

        vLLM's (its CPU offload manager walks the queue with it). A cursor that is in
        no list yields nothing, as in vLLM; the walk reads each link when it gets
        there, so a change to the queue meanwhile shows, as in vLLM. Stricter: a
        cursor that is not a block is ``InvalidArgument`` at the call, and the walk
        never yields a sentinel (it stops at the first node without a next link:
        vLLM, given a block of another queue, would yield that queue's tail).

        raises: InsufficientFreeBlocks, InvalidArgument
        """
        if cursor is None:
            start = self.fake_free_list_head.next_free_block
        elif type(cursor) is KVCacheBlock:
            start = cursor.next_free_block
        else:
            raise InvalidArgument(f"cursor must be a block or None, got {cursor!r}")
        return self._walk_from(start)

    def _walk_from(self, node: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        tail = self.fake_free_list_tail
        while node is not None and node is not tail and node.next_free_block is not None:
            yield node
            node = node.next_free_block

    def __len__(self) -> int:
        return self.num_free_blocks

    # -- linking in, checked as it goes ----------------------------------------------------
    #
    # ``append_n`` and ``prepend_n`` chain the group in with one test per block: a
    # block with a ``prev`` link is refused. That catches every block of a queue
    # (this one or another), a block listed twice (linked when it comes round
    # again) and the tail sentinel. The one node without a ``prev`` link is the
    # head sentinel; rather than compare every block with it, the loop lets it
    # through and one test after the loop sees that it was linked (only a loop step
    # can give the head a ``prev``). A refusal unlinks what was chained and restores
    # the head, so the queue is exactly as it was. The loops are written out in
    # each method, not shared, because a shared helper's call was a tenth of the
    # checked rows' time in ``make bench``.

    def _unlink_chained(
        self,
        blocks: list[KVCacheBlock],
        before: KVCacheBlock,
        after: KVCacheBlock,
        last: KVCacheBlock,
        head_next: KVCacheBlock | None,
    ) -> None:
        """Undo a partial chaining of ``blocks`` between ``before`` and ``after``.

        The chained blocks are a prefix of ``blocks`` ending at ``last``, all
        distinct and all in no list before (else the loop would have stopped
        earlier). None was chained exactly when ``before`` still points at
        ``after`` (the first step points it at ``blocks[0]``, which cannot be
        ``after``: that is linked). The walk goes by the list, not by the links,
        since a chained head sentinel may have bent them.
        """
        if before.next_free_block is not after:
            for b in blocks:
                b.prev_free_block = b.next_free_block = None
                if b is last:
                    break
        # ``after`` is untouched until the chain is closed; the head is restored
        # last, since ``before`` may be the head itself.
        before.next_free_block = after
        head = self.fake_free_list_head
        head.prev_free_block = None
        head.next_free_block = head_next

    # -- for the pool -----------------------------------------------------------------

    def _popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Unchecked ``popleft_n``: the caller guarantees the count.

        pre: 0 <= n <= self.num_free_blocks
        post: len(__return__) == n
        post: self.num_free_blocks == __old__.self.num_free_blocks - n
        """
        if n == 0:
            return []
        head = self.fake_free_list_head
        node = head.next_free_block
        out: list[KVCacheBlock] = []
        for _ in range(n):
            out.append(node)  # type: ignore[arg-type]
            last = node
            node = node.next_free_block  # type: ignore[union-attr]
            # A block leaving the list forgets both links (INV-LIST).
            last.prev_free_block = None  # type: ignore[union-attr]
            last.next_free_block = None  # type: ignore[union-attr]
        # The first block left (or the tail sentinel) is the new front.
        head.next_free_block = node
        node.prev_free_block = head  # type: ignore[union-attr]
        self.num_free_blocks -= n
        return out

    def _remove(self, block: KVCacheBlock) -> None:
        """Unchecked ``remove``: the caller guarantees that ``block`` is linked in this queue.

        pre: block.prev_free_block is not None and block.next_free_block is not None
        post: block.prev_free_block is None and block.next_free_block is None
        post: self.num_free_blocks == __old__.self.num_free_blocks - 1
        """
        prev, nxt = block.prev_free_block, block.next_free_block
        # Sentinels guarantee both neighbours exist: stitch them together.
        prev.next_free_block = nxt  # type: ignore[union-attr]
        nxt.prev_free_block = prev  # type: ignore[union-attr]
        block.prev_free_block = None
        block.next_free_block = None
        self.num_free_blocks -= 1

    def _append_n(self, blocks: list[KVCacheBlock]) -> None:
        """Unchecked ``append_n``: the caller guarantees distinct blocks that are in no list.

        pre: all(b.prev_free_block is None and b.next_free_block is None for b in blocks)
        pre: len({id(b) for b in blocks}) == len(blocks)
        post: self.num_free_blocks == __old__.self.num_free_blocks + len(blocks)
        """
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
        """Unchecked ``prepend_n``: the caller guarantees distinct blocks that are in no list.

        pre: all(b.prev_free_block is None and b.next_free_block is None for b in blocks)
        pre: len({id(b) for b in blocks}) == len(blocks)
        post: self.num_free_blocks == __old__.self.num_free_blocks + len(blocks)
        """
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
