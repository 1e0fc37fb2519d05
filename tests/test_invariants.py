"""Each invariant predicate, shown failing on a deliberately broken state.

A predicate that never fails proves nothing: for every INV-* we break a healthy
state in the one way it forbids and check that exactly that invariant names the
fault (and the block), while the healthy state passes every predicate.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvpool.impl import BlockPool, check_invariants
from kvpool.spec import (
    INVARIANT_NAMES,
    INVARIANTS,
    BlockStored,
    CacheBlocks,
    FreeBlocks,
    GetNewBlocks,
    PoolState,
    UnpinBlocks,
    World,
    check_pool,
)


def healthy() -> PoolState:
    """A state with something in every structure: in-use, free, cached, watched, logged."""
    w = World.single(8, caching=True, events=True)
    w.run(
        [
            GetNewBlocks(4),
            CacheBlocks([1, 2], ["a", "b"]),
            UnpinBlocks([3], 9),
            FreeBlocks([2]),
        ]
    )
    return w.pools[0]


def test_the_healthy_state_passes_every_predicate() -> None:
    assert check_pool(healthy()) == []
    assert set(INVARIANTS) | {"INV-LIST"} == set(INVARIANT_NAMES)


def _neg_ref(ps: PoolState) -> None:
    ps.ref[5] = -1
    del ps.free[5]


def _lost_free(ps: PoolState) -> None:
    del ps.free[6]


def _in_use_but_free(ps: PoolState) -> None:
    ps.free[1] = None


def _null_in_queue(ps: PoolState) -> None:
    ps.free[0] = None


def _null_watched(ps: PoolState) -> None:
    ps.pending[0] = [1]
    ps.registered += 1


def _watcher_twice(ps: PoolState) -> None:
    ps.pending[3].append(9)
    ps.registered += 1


def _watcher_lost(ps: PoolState) -> None:
    del ps.pending[3]


def _key_not_indexed(ps: PoolState) -> None:
    ps.key[4] = "d"


def _index_stale(ps: PoolState) -> None:
    ps.index["a"][4] = None


def _event_missing(ps: PoolState) -> None:
    ps.view.discard("a")


def _event_stale(ps: PoolState) -> None:
    ps.view.add("gone")


def _conserve(ps: PoolState) -> None:
    ps.num_blocks += 1
    ps.ref.append(0)
    ps.key.append(None)


BREAKS: list[tuple[str, Callable[[PoolState], None], int | None]] = [
    ("INV-REF", _neg_ref, 5),
    ("INV-FREE", _lost_free, 6),
    ("INV-FREE", _in_use_but_free, 1),
    ("INV-NULL", _null_in_queue, 0),
    ("INV-NULL", _null_watched, 0),
    ("INV-WATCH", _watcher_twice, 3),
    ("INV-WATCH", _watcher_lost, None),
    ("INV-CACHE", _key_not_indexed, 4),
    ("INV-CACHE", _index_stale, 4),
    ("INV-EVENTS", _event_missing, None),
    ("INV-EVENTS", _event_stale, None),
    ("INV-CONSERVE", _conserve, None),
]


@pytest.mark.parametrize(("name", "breaker", "block"), BREAKS, ids=[b[1].__name__ for b in BREAKS])
def test_spec_predicate_fails_on_its_broken_state(
    name: str, breaker: Callable[[PoolState], None], block: int | None
) -> None:
    ps = healthy()
    breaker(ps)
    found = INVARIANTS[name](ps)
    assert found, f"{name} did not notice {breaker.__name__}"
    assert all(v.invariant == name for v in found)
    if block is not None:
        assert block in {v.block for v in found}
    assert name in str(found[0])


def test_every_spec_invariant_has_a_breaking_test() -> None:
    assert {b[0] for b in BREAKS} == set(INVARIANTS)


def test_caching_off_with_a_key_breaks_inv_cache() -> None:
    ps = World.single(4, caching=False).pools[0]
    ps.key[1] = "k"
    ps.index["k"] = {1: None}
    assert [v.invariant for v in INVARIANTS["INV-CACHE"](ps)] == ["INV-CACHE"]


def test_events_off_with_a_log_breaks_inv_events() -> None:
    ps = World.single(4, events=False).pools[0]
    ps.log.append(BlockStored(("k",)))
    assert INVARIANTS["INV-EVENTS"](ps)


# -- the concrete pool: INV-LIST and the spec invariants through the abstraction ----------------


def used_pool() -> BlockPool:
    pool = BlockPool(8, enable_kv_cache_events=True)
    blocks = pool.get_new_blocks(3)
    pool.cache_blocks(blocks[:1], ["a"])
    pool.free_blocks(blocks[1:])
    assert check_invariants(pool) == []
    return pool


def names(pool: BlockPool) -> set[str]:
    return {v.invariant for v in pool.check_invariants()}


def test_impl_prev_link_not_mirroring_next_breaks_inv_list() -> None:
    pool = used_pool()
    b = pool.free_block_queue.get_all_free_blocks()[2]
    b.prev_free_block = pool.free_block_queue.fake_free_list_head
    found = pool.check_invariants()
    assert {v.invariant for v in found} == {"INV-LIST"}
    assert b.block_id in {v.block for v in found}


def test_impl_cycle_breaks_inv_list_and_does_not_hang() -> None:
    pool = used_pool()
    free = pool.free_block_queue.get_all_free_blocks()
    free[3].next_free_block = free[1]
    assert "INV-LIST" in names(pool)


def test_impl_counter_off_breaks_inv_list_and_inv_free() -> None:
    pool = used_pool()
    pool.free_block_queue.num_free_blocks += 1
    assert names(pool) == {"INV-LIST", "INV-FREE"}


def test_impl_popped_block_keeping_a_link_breaks_inv_list() -> None:
    pool = used_pool()
    (b,) = pool.get_new_blocks(1)
    b.next_free_block = pool.blocks[7]
    assert names(pool) == {"INV-LIST"}


def test_impl_ref_cnt_tampering_breaks_inv_ref_inv_free_inv_conserve() -> None:
    pool = used_pool()
    pool.blocks[1].ref_cnt = -1  # in use -> negative: not counted anywhere
    assert names(pool) == {"INV-REF", "INV-CONSERVE"}
    pool.blocks[1].ref_cnt = 0  # "free" but not in the queue
    assert names(pool) == {"INV-FREE", "INV-CONSERVE"}


def test_impl_null_block_ref_change_breaks_inv_null() -> None:
    pool = used_pool()
    pool.null_block.ref_cnt = 1
    assert "INV-NULL" in names(pool)


def test_impl_hash_without_index_breaks_inv_cache() -> None:
    pool = used_pool()
    pool.blocks[5]._block_hash = "ghost"
    assert names(pool) == {"INV-CACHE"}


def test_impl_lost_event_breaks_inv_events() -> None:
    pool = used_pool()
    pool._event_view.clear()
    assert names(pool) == {"INV-EVENTS"}


def test_impl_lost_watcher_breaks_inv_watch() -> None:
    pool = used_pool()
    (b,) = pool.get_new_blocks(1)
    pool.unpin_blocks([b], print)
    b._pending = None  # the block forgets its pending watcher
    assert names(pool) == {"INV-WATCH"}
