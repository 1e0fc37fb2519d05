"""Every rule of docs/semantics.md, one test each, on the spec and on the impl.

Each test runs twice (``backend_kind`` = spec, impl) and names the rule it checks.
Scenarios use pool 0 with N = 8 unless they say otherwise. Block lists are ids.
"""

from __future__ import annotations

import pytest
from backends import Backend

from kvpool.spec import (
    AllBlocksCleared,
    BlockRef,
    BlockRemoved,
    BlockStored,
    CacheBlocks,
    DropPool,
    ErrorKind,
    EvictBlocks,
    Firing,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Outcome,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
    check_pool,
)

E = ErrorKind


def refused_unchanged(b: Backend, op: object, kind: ErrorKind, pools: int = 1) -> None:
    """The call is refused with ``kind`` and no pool changes in any observable way."""
    before = [b.state(p).snapshot() for p in range(pools)]
    outcome = b.do(op)  # type: ignore[arg-type]
    assert outcome.error == kind, outcome
    assert outcome.fired == ()
    assert [b.state(p).snapshot() for p in range(pools)] == before
    for p in range(pools):
        assert check_pool(b.state(p)) == []


# -- State -------------------------------------------------------------------------------


def test_state_initial_free_queue_is_1_to_n_minus_1(make) -> None:
    b = make((8, True, False))
    assert b.free() == [1, 2, 3, 4, 5, 6, 7]
    assert b.state().ref == [0] * 8
    assert check_pool(b.state()) == []


def test_state_pool_of_only_the_null_block(make) -> None:
    b = make((1, True, False))
    assert b.free() == []
    assert b.do(GetNewBlocks(0)).value == ()
    assert b.do(GetNewBlocks(1)).error == E.INSUFFICIENT_FREE_BLOCKS
    assert b.do(GetUsage()).value == 0.0
    assert b.do(ResetPrefixCache()).value is True


# -- get_new_blocks -----------------------------------------------------------------------


def test_get_new_blocks_takes_the_front_in_queue_order(make) -> None:
    b = make()
    assert b.do(GetNewBlocks(3)).value == (1, 2, 3)
    assert b.state().ref[1:4] == [1, 1, 1]
    assert b.free() == [4, 5, 6, 7]
    assert b.do(GetNewBlocks(0)).value == ()


@pytest.mark.parametrize("n", [-1, True, False, 2.0, "2", None])
def test_get_new_blocks_n_must_be_a_non_negative_int_not_bool(make, n: object) -> None:
    refused_unchanged(make(), GetNewBlocks(n), E.INVALID_ARGUMENT)


def test_get_new_blocks_too_many_is_insufficient_free_blocks(make) -> None:
    b = make()
    b.do(GetNewBlocks(2))
    refused_unchanged(b, GetNewBlocks(6), E.INSUFFICIENT_FREE_BLOCKS)
    assert b.do(GetNewBlocks(5)).value == (3, 4, 5, 6, 7)


def test_get_new_blocks_drops_the_cache_key_of_a_reused_block(make) -> None:
    b = make()
    b.run([GetNewBlocks(2), CacheBlocks([1, 2], ["a", "b"]), FreeBlocks([1, 2])])
    b.do(TakeEvents())
    # 1 and 2 hold keys and sit at the back; take everything so they are reused.
    assert b.do(GetNewBlocks(7)).value == (3, 4, 5, 6, 7, 1, 2)
    assert b.state().key[1] is None and b.state().index == {}
    assert b.do(GetCachedBlock("a")).value is None
    assert b.do(TakeEvents()).value == (BlockRemoved("a"), BlockRemoved("b"))


def test_get_new_blocks_block_removed_only_when_the_last_holder_drops_the_key(make) -> None:
    b = make()
    b.run([GetNewBlocks(2), CacheBlocks([1], ["k"]), CacheBlocks([2], ["k"]), FreeBlocks([1, 2])])
    b.do(TakeEvents())
    b.do(GetNewBlocks(6))  # 3..7 then 1: block 1 drops k, but block 2 still holds it
    assert b.do(TakeEvents()).value == ()
    assert b.do(GetCachedBlock("k")).value == 2
    b.do(GetNewBlocks(1))  # block 2, the last holder
    assert b.do(TakeEvents()).value == (BlockRemoved("k"),)


def test_get_new_blocks_fires_watchers_block_by_block_after_handing_out(make) -> None:
    b = make()
    b.do(GetNewBlocks(3))
    b.do(UnpinBlocks([2, 1], 7))  # queue: 4 5 6 7 2 1
    out = b.do(GetNewBlocks(6))
    assert out.value == (4, 5, 6, 7, 2, 1)
    assert out.fired == (Firing(7, 0, 2), Firing(7, 0, 1))
    assert b.state().pending == {}


def test_get_new_blocks_each_blocks_watchers_fire_in_registration_order(make) -> None:
    b = make()
    b.do(GetNewBlocks(1))
    b.do(GetNewBlocks(0))
    b.run([Touch([1]), UnpinBlocks([1], 5), UnpinBlocks([1], 3)])
    out = b.do(GetNewBlocks(7))
    assert out.value == (2, 3, 4, 5, 6, 7, 1)
    assert out.fired == (Firing(5, 0, 1), Firing(3, 0, 1))
    # Fired once: reusing the block again fires nothing.
    b.do(FreeBlocks([1]))
    assert b.do(GetNewBlocks(1)).fired == ()


# -- free_blocks ----------------------------------------------------------------------------


def test_free_blocks_uncached_go_to_the_front_as_a_group_in_list_order(make) -> None:
    b = make()
    b.do(GetNewBlocks(4))
    b.do(FreeBlocks([3, 1, 2]))
    assert b.free() == [3, 1, 2, 5, 6, 7]
    assert b.state().ref[1:5] == [0, 0, 0, 1]


def test_free_blocks_cached_go_to_the_back_in_list_order(make) -> None:
    b = make()
    b.do(GetNewBlocks(3))
    b.do(CacheBlocks([1, 2, 3], ["a", "b", "c"]))
    b.do(FreeBlocks([2, 3, 1]))
    assert b.free() == [4, 5, 6, 7, 2, 3, 1]


def test_free_blocks_mixed_front_group_then_back_group(make) -> None:
    b = make()
    b.do(GetNewBlocks(4))
    b.do(CacheBlocks([2, 4], ["x", "y"]))
    b.do(FreeBlocks([1, 2, 3, 4]))
    assert b.free() == [1, 3, 5, 6, 7, 2, 4]


def test_free_blocks_evict_first_puts_cached_blocks_at_the_front(make) -> None:
    b = make()
    b.do(GetNewBlocks(3))
    b.do(CacheBlocks([1, 2], ["a", "b"]))
    b.do(FreeBlocks([2, 1, 3], evict_first=True))
    assert b.free() == [2, 1, 3, 4, 5, 6, 7]
    assert b.state().key[1] == "a"  # still cached: only its eviction order changed


def test_free_blocks_with_caching_off_everything_goes_to_the_front(make) -> None:
    b = make((8, False, False))
    b.do(GetNewBlocks(3))
    b.do(FreeBlocks([1, 2, 3]))
    assert b.free() == [1, 2, 3, 4, 5, 6, 7]


def test_free_blocks_only_the_entry_reaching_zero_queues_the_block(make) -> None:
    b = make()
    b.do(GetNewBlocks(2))
    b.do(Touch([1]))  # ref 2
    b.do(FreeBlocks([1, 2]))
    assert b.state().ref[1] == 1 and b.free() == [2, 3, 4, 5, 6, 7]
    b.do(FreeBlocks([1]))
    assert b.free() == [1, 2, 3, 4, 5, 6, 7]


def test_free_blocks_skips_the_null_block(make) -> None:
    b = make()
    b.do(GetNewBlocks(1))
    assert b.do(FreeBlocks([0, 1, 0])).ok
    assert b.free() == [1, 2, 3, 4, 5, 6, 7]
    assert b.state().ref[0] == 0


def test_free_blocks_a_block_listed_m_times_needs_ref_cnt_m(make) -> None:
    b = make()
    b.do(GetNewBlocks(2))
    b.do(Touch([1]))
    assert b.do(FreeBlocks([1, 1])).ok
    assert b.state().ref[1] == 0


def test_free_blocks_double_free_is_ref_count_underflow_and_changes_nothing(make) -> None:
    b = make()
    b.do(GetNewBlocks(3))
    refused_unchanged(b, FreeBlocks([1, 2, 2]), E.REF_COUNT_UNDERFLOW)
    b.do(FreeBlocks([3]))
    refused_unchanged(b, FreeBlocks([1, 3]), E.REF_COUNT_UNDERFLOW)


@pytest.mark.parametrize("flag", [1, 0, None, "yes"])
def test_free_blocks_evict_first_must_be_a_bool(make, flag: object) -> None:
    b = make()
    b.do(GetNewBlocks(1))
    refused_unchanged(b, FreeBlocks([1], evict_first=flag), E.INVALID_ARGUMENT)


def test_free_blocks_a_non_block_entry_is_invalid_even_after_valid_ones(make) -> None:
    b = make()
    b.do(GetNewBlocks(2))
    refused_unchanged(b, FreeBlocks([1, 2, "3"]), E.INVALID_ARGUMENT)


def test_free_blocks_forwards_other_pools_blocks_to_their_pool(make) -> None:
    b = make((6, True, False), (6, True, False))
    b.do(GetNewBlocks(2, pool=0))
    b.do(GetNewBlocks(3, pool=1))
    assert b.do(FreeBlocks([BlockRef(1, 2), BlockRef(0, 1), BlockRef(1, 1)], pool=0)).ok
    assert b.free(0) == [1, 3, 4, 5]
    assert b.free(1) == [2, 1, 4, 5]
    assert b.state(1).ref[3] == 1


def test_free_blocks_forwarded_underflow_refuses_the_whole_call_in_every_pool(make) -> None:
    b = make((6, True, False), (6, True, False))
    b.do(GetNewBlocks(2, pool=0))
    b.do(GetNewBlocks(1, pool=1))
    op = FreeBlocks([BlockRef(0, 1), BlockRef(1, 1), BlockRef(1, 1)], pool=0)
    refused_unchanged(b, op, E.REF_COUNT_UNDERFLOW, pools=2)


def test_free_blocks_drops_blocks_whose_pool_is_gone(make) -> None:
    b = make((6, True, False), (6, True, False))
    b.do(GetNewBlocks(1, pool=0))
    b.do(GetNewBlocks(1, pool=1))
    b.do(DropPool(1))
    assert b.do(FreeBlocks([BlockRef(1, 1), BlockRef(0, 1)], pool=0)).ok
    assert b.free(0) == [1, 2, 3, 4, 5]


# -- touch ----------------------------------------------------------------------------------


def test_touch_a_cached_free_block_takes_it_out_of_the_queue(make) -> None:
    b = make()
    b.run([GetNewBlocks(2), CacheBlocks([1, 2], ["a", "b"]), FreeBlocks([1, 2])])
    assert b.do(GetCachedBlock("b")).value == 2  # a prefix hit...
    b.do(Touch([2]))  # ...takes a reference
    assert b.free() == [3, 4, 5, 6, 7, 1] and b.state().ref[2] == 1
    assert b.do(GetNewBlocks(6)).value == (3, 4, 5, 6, 7, 1)  # 2 is not handed out


def test_touch_increments_in_use_blocks_and_duplicates(make) -> None:
    b = make()
    b.do(GetNewBlocks(1))
    b.do(Touch([1, 1, 0]))
    assert b.state().ref[1] == 3 and b.state().ref[0] == 0


def test_touch_another_pools_block_is_foreign(make) -> None:
    b = make((4, True, False), (4, True, False))
    b.do(GetNewBlocks(1, pool=1))
    refused_unchanged(b, Touch([1, BlockRef(1, 1)], pool=0), E.FOREIGN_BLOCK, pools=2)
    assert b.do(Touch([BlockRef(1, 0)], pool=0)).ok  # another pool's null block: skipped


# -- unpin_blocks ---------------------------------------------------------------------------


def test_unpin_blocks_appends_at_the_tail_even_with_a_key(make) -> None:
    b = make()
    b.run([GetNewBlocks(3), CacheBlocks([2], ["k"])])
    b.do(UnpinBlocks([3, 2, 1], 1))
    assert b.free() == [4, 5, 6, 7, 3, 2, 1]
    assert b.state().pending == {3: [1], 2: [1], 1: [1]}


def test_unpin_blocks_a_block_still_referenced_stays_out_but_is_watched(make) -> None:
    b = make()
    b.run([GetNewBlocks(1), Touch([1]), UnpinBlocks([1], 4)])
    assert b.state().ref[1] == 1 and 1 not in b.free()
    b.do(FreeBlocks([1]))
    assert b.do(GetNewBlocks(1)).fired == (Firing(4, 0, 1),)


def test_unpin_blocks_the_same_watcher_is_pending_once(make) -> None:
    b = make()
    b.run([GetNewBlocks(1), Touch([1]), UnpinBlocks([1, 1], 4)])
    assert b.state().pending == {1: [4]}


def test_unpin_blocks_two_callers_both_fire_exactly_once(make) -> None:
    b = make()
    b.run([GetNewBlocks(1), Touch([1]), UnpinBlocks([1], 1), UnpinBlocks([1], 2)])
    out = b.do(GetNewBlocks(7))
    assert out.fired == (Firing(1, 0, 1), Firing(2, 0, 1))
    b.do(FreeBlocks(list(out.value)))  # type: ignore[arg-type]
    assert b.do(GetNewBlocks(7)).fired == ()


@pytest.mark.parametrize(
    ("blocks", "watcher", "kind"),
    [
        ([1], None, E.INVALID_ARGUMENT),
        ([1], "not callable", E.INVALID_ARGUMENT),
        ([1, 0], 1, E.NULL_BLOCK_MISUSE),
        ([1, 1], 1, E.REF_COUNT_UNDERFLOW),
        ([2], 1, E.REF_COUNT_UNDERFLOW),
        ([BlockRef(1, 1)], 1, E.FOREIGN_BLOCK),
    ],
)
def test_unpin_blocks_refusals(
    make, blocks: list[object], watcher: object, kind: ErrorKind
) -> None:
    b = make((8, True, False), (4, True, False))
    b.do(GetNewBlocks(1))
    b.do(GetNewBlocks(1, pool=1))
    refused_unchanged(b, UnpinBlocks(blocks, watcher), kind, pools=2)


# -- cache_blocks, get_cached_block -----------------------------------------------------------


def test_cache_blocks_indexes_each_block_last_under_its_key(make) -> None:
    b = make()
    b.do(GetNewBlocks(3))
    b.do(CacheBlocks([2, 1], ["k", "k"]))
    b.do(CacheBlocks([3], ["k"]))
    assert list(b.state().index["k"]) == [2, 1, 3]
    assert b.do(GetCachedBlock("k")).value == 2  # the oldest holder
    assert b.do(GetCachedBlock("missing")).value is None


def test_cache_blocks_logs_one_block_stored_per_call_listing_every_key(make) -> None:
    b = make()
    b.do(GetNewBlocks(3))
    b.do(CacheBlocks([1, 2], ["a", "b"]))
    b.do(CacheBlocks([3], ["a"]))  # announced again though block 1 holds it
    b.do(CacheBlocks([], []))  # an empty call logs nothing
    assert b.do(TakeEvents()).value == (BlockStored(("a", "b")), BlockStored(("a",)))
    assert b.do(TakeEvents()).value == ()


@pytest.mark.parametrize(
    ("blocks", "keys", "kind"),
    [
        ([1, 2], ["a"], E.INVALID_ARGUMENT),
        ([1], [["unhashable"]], E.INVALID_ARGUMENT),
        ([1], [None], E.INVALID_ARGUMENT),
        ([0], ["a"], E.NULL_BLOCK_MISUSE),
        ([BlockRef(1, 1)], ["a"], E.FOREIGN_BLOCK),
        ([3], ["a"], E.BLOCK_NOT_IN_USE),
        ([2], ["b"], E.ALREADY_CACHED),
        ([1, 1], ["a", "b"], E.INVALID_ARGUMENT),
        ([1, "x"], ["a", "b"], E.INVALID_ARGUMENT),
    ],
)
def test_cache_blocks_refusals(
    make, blocks: list[object], keys: list[object], kind: ErrorKind
) -> None:
    b = make((8, True, True), (4, True, False))
    b.run([GetNewBlocks(2), CacheBlocks([2], ["z"]), GetNewBlocks(1, pool=1)])
    b.do(TakeEvents())
    b.do(FreeBlocks([]))
    # block 3 is free (ref 0); block 2 holds "z"; block 1 is in use with no key.
    refused_unchanged(b, CacheBlocks(blocks, keys), kind, pools=2)


def test_cache_blocks_with_caching_off_is_caching_disabled(make) -> None:
    b = make((8, False, True))
    b.do(GetNewBlocks(1))
    refused_unchanged(b, CacheBlocks([1], ["a"]), E.CACHING_DISABLED)
    assert b.do(GetCachedBlock("a")).value is None


def test_get_cached_block_unhashable_key_is_invalid(make) -> None:
    refused_unchanged(make(), GetCachedBlock(["x"]), E.INVALID_ARGUMENT)


# -- evict_blocks -------------------------------------------------------------------------------


def test_evict_blocks_drops_keys_and_blocks_stay_in_place(make) -> None:
    b = make()
    b.run([GetNewBlocks(3), CacheBlocks([1, 2, 3], ["a", "b", "c"]), FreeBlocks([1, 2])])
    b.do(TakeEvents())
    before = b.free()
    b.do(EvictBlocks([2, 3, 5]))  # 2 free, 3 in use, 5 free with no key
    assert b.free() == before == [4, 5, 6, 7, 1, 2]
    assert b.state().key[1:4] == ["a", None, None] and b.state().ref[3] == 1
    assert b.do(TakeEvents()).value == (BlockRemoved("b"), BlockRemoved("c"))


@pytest.mark.parametrize(
    ("ids", "kind"),
    [
        ([-1], E.INVALID_ARGUMENT),
        ([8], E.INVALID_ARGUMENT),
        ([True], E.INVALID_ARGUMENT),
        (["1"], E.INVALID_ARGUMENT),
        ([1, 0], E.NULL_BLOCK_MISUSE),
    ],
)
def test_evict_blocks_refusals(make, ids: list[object], kind: ErrorKind) -> None:
    b = make()
    b.run([GetNewBlocks(1), CacheBlocks([1], ["a"])])
    refused_unchanged(b, EvictBlocks(ids), kind)


# -- reset_prefix_cache ---------------------------------------------------------------------------


def test_reset_prefix_cache_refused_while_a_block_is_in_use(make) -> None:
    b = make()
    b.run([GetNewBlocks(2), CacheBlocks([1], ["a"]), UnpinBlocks([2], 9)])
    before = b.state().snapshot()
    assert b.do(ResetPrefixCache()) == Outcome(value=False)
    assert b.state().snapshot() == before


def test_reset_prefix_cache_clears_keys_fires_watchers_in_first_watched_order(make) -> None:
    b = make()
    b.run([GetNewBlocks(3), CacheBlocks([1, 2], ["a", "b"]), Touch([3])])
    b.run([UnpinBlocks([3], 30), UnpinBlocks([1], 10), UnpinBlocks([3], 31), FreeBlocks([2])])
    b.do(TakeEvents())
    out = b.do(ResetPrefixCache())
    assert out.value is True
    assert out.fired == (Firing(30, 0, 3), Firing(31, 0, 3), Firing(10, 0, 1))
    assert b.state().index == {} and all(k is None for k in b.state().key)
    assert b.do(TakeEvents()).value == (AllBlocksCleared(),)
    assert b.do(ResetPrefixCache()).fired == ()  # fired once, never again


# -- queries -----------------------------------------------------------------------------------


def test_get_usage_is_one_minus_free_over_n_minus_1(make) -> None:
    b = make((5, True, False))
    assert b.do(GetUsage()).value == 0.0
    b.do(GetNewBlocks(1))
    assert b.do(GetUsage()).value == 0.25
    assert b.do(GetNumFreeBlocks()).value == 3


def test_is_block_writable(make) -> None:
    b = make((8, True, False), (4, True, False))
    b.run([GetNewBlocks(3), Touch([2]), CacheBlocks([3], ["k"])])
    assert [b.do(IsBlockWritable(i)).value for i in range(5)] == [False, True, False, False, False]
    assert b.do(IsBlockWritable(BlockRef(1, 0))).value is False
    refused_unchanged(b, IsBlockWritable(BlockRef(1, 1)), E.FOREIGN_BLOCK, pools=2)


def test_take_events_is_empty_when_events_are_off(make) -> None:
    b = make((8, True, False))
    b.run([GetNewBlocks(1), CacheBlocks([1], ["a"]), EvictBlocks([1]), ResetPrefixCache()])
    assert b.do(TakeEvents()).value == ()
    assert b.state().log == []


def test_free_blocks_a_non_block_wins_over_a_double_free_earlier_in_the_list(make) -> None:
    """Validation order: every entry is a block? before any count is checked."""
    b = make()
    refused_unchanged(b, FreeBlocks([1, "x"]), E.INVALID_ARGUMENT)  # block 1 is free: ref 0
