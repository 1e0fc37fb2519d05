"""Small exact tests written to kill mutmut survivors that are not equivalent.

Each test names the behaviour a surviving mutant broke (``make mutation``); the
semantics page or vLLM's API fixes each of these behaviours.
"""

from __future__ import annotations

import pytest

from kvpool.impl import BlockPool, InvalidArgument, abstract, inv_list
from kvpool.impl.bridge import default_watcher_id, walk_free_queue
from kvpool.impl.free_queue import FreeKVCacheBlockQueue


def test_constructor_defaults_and_validation() -> None:
    pool = BlockPool(4)
    assert pool.enable_caching is True and pool.enable_kv_cache_events is False
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgument):
            BlockPool(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        BlockPool(4, enable_caching=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        BlockPool(4, enable_kv_cache_events=0)  # type: ignore[arg-type]


def test_forwarded_free_keeps_evict_first() -> None:
    a, b = BlockPool(4), BlockPool(4)
    x, y = b.get_new_blocks(2)
    b.cache_blocks([x], ["k"])
    a.free_blocks([x, y], evict_first=True)  # forwarded to b, evict_first and all
    assert [blk.block_id for blk in b.free_block_queue.get_all_free_blocks()][:2] == [1, 2]


def test_touch_skips_only_the_null_block_and_reads_any_iterable() -> None:
    pool = BlockPool(5)
    blocks = pool.get_new_blocks(2)
    pool.free_blocks(blocks)
    pool.touch(iter([pool.null_block, *blocks]))
    assert [b.ref_cnt for b in blocks] == [1, 1]
    assert pool.get_num_free_blocks() == 2
    assert all(b.prev_free_block is None and b.next_free_block is None for b in blocks)
    assert inv_list(pool) == []


def test_public_queue_methods_refuse_and_undo() -> None:
    pool = BlockPool(4)
    queue = pool.free_block_queue
    with pytest.raises(InvalidArgument):
        queue.remove("not a block")  # type: ignore[arg-type]
    (blk,) = pool.get_new_blocks(1)
    with pytest.raises(InvalidArgument):
        queue.append_n([blk, blk])  # listed twice: refused, and the first link undone
    assert blk.prev_free_block is None and blk.next_free_block is None
    assert queue.num_free_blocks == 2 and inv_list(pool) == []


def test_is_block_writable_refuses_what_is_no_block() -> None:
    with pytest.raises(InvalidArgument):
        BlockPool(4).is_block_writable("x")  # type: ignore[arg-type]


def test_the_abstraction_survives_a_cycle_and_inv_list_reports_it() -> None:
    pool = BlockPool(5)
    b1, b2 = pool.blocks[1], pool.blocks[2]
    b2.next_free_block = b1  # a cycle 1 -> 2 -> 1
    walked, reached_tail = walk_free_queue(pool.free_block_queue, len(pool.blocks))
    assert not reached_tail and len(walked) <= len(pool.blocks)
    assert list(abstract(pool).free) == [1, 2]
    assert any("does not reach the tail" in v.detail for v in inv_list(pool))


def test_default_watcher_id() -> None:
    def plain(block: object) -> None:
        return None

    class Named:
        watcher_id = 7

        def __call__(self, block: object) -> None:
            return None

    assert default_watcher_id(plain) == id(plain)
    assert default_watcher_id(Named()) == 7

    class BadName:
        watcher_id = "seven"

        def __call__(self, block: object) -> None:
            return None

    w = BadName()
    assert default_watcher_id(w) == id(w)


def test_the_queue_counts_what_it_is_built_with() -> None:
    queue = FreeKVCacheBlockQueue([])
    assert queue.num_free_blocks == 0 and queue.get_all_free_blocks() == []
