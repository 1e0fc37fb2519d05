"""The bridge from the concrete pool to the spec: the abstraction function, and INV-LIST.

:func:`abstract` reads a :class:`BlockPool` as a spec :class:`PoolState`, so that
every spec invariant applies to the implementation unchanged, and the lockstep
tests can compare the two states whole. It never trusts the linked list: the walk
is bounded, so a corrupted list (a cycle, a lost tail) is reported, not looped on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Protocol

from kvpool.spec.events import Event
from kvpool.spec.invariants import Violation, check_pool
from kvpool.spec.state import PoolState

from .block import KVCacheBlock, Watcher
from .free_queue import FreeKVCacheBlockQueue


class BlockPool(Protocol):
    """What the bridge reads of a pool (``kvpool.impl.pool.BlockPool`` has it all).

    A protocol, not an import, so that ``impl/`` is a line: block <- free_queue <-
    bridge <- pool.
    """

    num_gpu_blocks: int
    enable_caching: bool
    enable_kv_cache_events: bool
    blocks: list[KVCacheBlock]
    free_block_queue: FreeKVCacheBlockQueue
    _index: dict[Hashable, dict[int, KVCacheBlock]]
    _watch_registered: int
    _watch_fired: int
    _events: list[Event]
    _event_view: set[Hashable]
    _entries: dict[int, list[Hashable]]
    hash_block_size: int
    num_hash_lookahead_tokens: int
    medium: str

    @property
    def _watchers(self) -> dict[int, tuple[Watcher, ...]]: ...


def default_watcher_id(watcher: Watcher) -> int:
    """A watcher's name in the spec: its ``watcher_id`` attribute if it has one, else ``id()``."""
    wid = getattr(watcher, "watcher_id", None)
    return wid if type(wid) is int else id(watcher)


def walk_free_queue(queue: FreeKVCacheBlockQueue, limit: int) -> tuple[list[KVCacheBlock], bool]:
    """The blocks reached from the head by ``next`` links, at most ``limit`` of them.

    Returns the blocks and whether the walk ended properly at the tail sentinel.
    """
    out: list[KVCacheBlock] = []
    seen: set[int] = set()
    node = queue.fake_free_list_head.next_free_block
    tail = queue.fake_free_list_tail
    while node is not None and node is not tail:
        if id(node) in seen or len(out) >= limit:
            return out, False
        seen.add(id(node))
        out.append(node)
        node = node.next_free_block
    return out, node is tail


def abstract(
    pool: BlockPool, watcher_id: Callable[[Watcher], int] = default_watcher_id
) -> PoolState:
    """The spec state this pool represents."""
    blocks = pool.blocks
    walked, _ = walk_free_queue(pool.free_block_queue, len(blocks))
    # An empty entry (left when a key could no longer find itself) is no entry.
    index: dict[Hashable, dict[int, None]] = {
        key: dict.fromkeys(holders) for key, holders in pool._index.items() if holders
    }
    return PoolState(
        num_blocks=pool.num_gpu_blocks,
        caching=pool.enable_caching,
        events_on=pool.enable_kv_cache_events,
        ref=[b.ref_cnt for b in blocks],
        key=[b._block_hash for b in blocks],
        free=OrderedDict.fromkeys(b.block_id for b in walked),
        index=index,
        pending={bid: [watcher_id(w) for w in ws] for bid, ws in pool._watchers.items()},
        log=list(pool._events),
        view=set(pool._event_view),
        registered=pool._watch_registered,
        fired=pool._watch_fired,
        tokens={
            b.block_id: b._block_hash_num_tokens
            for b in blocks
            if b._block_hash_num_tokens is not None
        },
        entries={bid: list(keys) for bid, keys in pool._entries.items()},
        hash_block_size=pool.hash_block_size,
        lookahead=pool.num_hash_lookahead_tokens,
        medium=pool.medium,
    )


def inv_list(pool: BlockPool) -> list[Violation]:
    """INV-LIST: the free queue is a well-formed doubly linked list of this pool's blocks."""
    return inv_list_of(pool.free_block_queue, pool.blocks)


def inv_list_of(queue: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock]) -> list[Violation]:
    """INV-LIST for a queue over ``blocks`` (``blocks[i].block_id == i``), pool or none."""
    head, tail = queue.fake_free_list_head, queue.fake_free_list_tail
    out: list[Violation] = []

    def bad(detail: str, block: int | None = None) -> None:
        out.append(Violation("INV-LIST", detail, block))

    if head.prev_free_block is not None:
        bad("the head sentinel has a prev link")
    if tail.next_free_block is not None:
        bad("the tail sentinel has a next link")
    walked, reached_tail = walk_free_queue(queue, len(blocks))
    if not reached_tail:
        bad("walking next links from the head does not reach the tail (a cycle or a lost link)")
    prev: KVCacheBlock = head
    on_list: set[int] = set()
    for node in walked:
        if node.prev_free_block is not prev:
            bad(f"prev link does not mirror the next link of block {prev.block_id}", node.block_id)
        if not 0 <= node.block_id < len(blocks) or blocks[node.block_id] is not node:
            bad("a block of another pool (or no block) is linked in", node.block_id)
        on_list.add(id(node))
        prev = node
    if reached_tail and tail.prev_free_block is not prev:
        bad("the tail sentinel's prev link is not the last block")
    if len(walked) != queue.num_free_blocks:
        bad(f"the list holds {len(walked)} blocks but num_free_blocks is {queue.num_free_blocks}")
    for block in blocks:
        if id(block) not in on_list and (
            block.prev_free_block is not None or block.next_free_block is not None
        ):
            bad("a block outside the list keeps a link", block.block_id)
    return out


def check_invariants(pool: BlockPool) -> list[Violation]:
    """Every spec invariant on the abstraction, plus INV-LIST and the free counter."""
    out = check_pool(abstract(pool))
    queue = pool.free_block_queue
    walked, _ = walk_free_queue(queue, len(pool.blocks))
    if len(walked) != queue.num_free_blocks:
        out.append(
            Violation(
                "INV-FREE",
                f"the free count is {queue.num_free_blocks} but the queue holds {len(walked)}",
            )
        )
    out.extend(inv_list(pool))
    return out
