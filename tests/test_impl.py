"""What only the concrete pool can show: exceptions, links, callbacks, weak references, -O."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpool.impl import (
    BlockPool,
    BlockRemoved,
    BlockStored,
    ForeignBlock,
    FreeKVCacheBlockQueue,
    InsufficientFreeBlocks,
    InvalidArgument,
    KVCacheBlock,
    NullBlockMisuse,
    PoolError,
    RefCountUnderflow,
)


def ids(blocks: list[KVCacheBlock]) -> list[int]:
    return [b.block_id for b in blocks]


def queue_ids(pool: BlockPool) -> list[int]:
    return ids(pool.free_block_queue.get_all_free_blocks())


def concrete(pool: BlockPool) -> tuple[object, ...]:
    """Every field of every block, links as ids, and the pool's own bookkeeping."""

    def link(b: KVCacheBlock | None) -> int | None:
        return None if b is None else b.block_id

    q = pool.free_block_queue
    return (
        tuple(
            (b.block_id, b.ref_cnt, b.block_hash, link(b.prev_free_block), link(b.next_free_block))
            for b in pool.blocks
        ),
        q.num_free_blocks,
        link(q.fake_free_list_head.next_free_block),
        link(q.fake_free_list_tail.prev_free_block),
        tuple((k, tuple(h)) for k, h in pool._index.items()),
        tuple((b, tuple(map(id, ws))) for b, ws in pool._watchers.items()),
        tuple(pool._events),
        pool._watch_registered,
        pool._watch_fired,
    )


def refused(pool: BlockPool, exc: type[PoolError], call: Any, *others: BlockPool) -> PoolError:
    before = [concrete(p) for p in (pool, *others)]
    with pytest.raises(exc) as info:
        call()
    assert [concrete(p) for p in (pool, *others)] == before
    assert pool.check_invariants() == []
    return info.value


# -- errors --------------------------------------------------------------------------------


def test_every_error_is_a_pool_error_and_a_value_error() -> None:
    pool = BlockPool(4)
    err = refused(pool, InsufficientFreeBlocks, lambda: pool.get_new_blocks(4))
    assert isinstance(err, PoolError) and isinstance(err, ValueError)
    assert str(err) == "Cannot get 4 free blocks from the pool"  # vLLM's message, kept


def test_error_messages_name_the_block() -> None:
    pool = BlockPool(4)
    (b,) = pool.get_new_blocks(1)
    err = refused(pool, RefCountUnderflow, lambda: pool.free_blocks([b, b]))
    assert "block 1" in str(err)
    err = refused(pool, NullBlockMisuse, lambda: pool.unpin_blocks([pool.null_block], print))
    assert "block 0" in str(err)


def test_a_refused_free_rolls_back_every_decrement_it_made() -> None:
    pool = BlockPool(8)
    blocks = pool.get_new_blocks(4)
    pool.touch(blocks[:2])
    refused(pool, RefCountUnderflow, lambda: pool.free_blocks([*blocks, blocks[3]]))
    refused(pool, InvalidArgument, lambda: pool.free_blocks([*blocks, object()]))
    refused(pool, InvalidArgument, lambda: pool.free_blocks(42))  # type: ignore[arg-type]
    assert [b.ref_cnt for b in blocks] == [2, 2, 1, 1]


def test_a_refused_cross_pool_free_changes_neither_pool() -> None:
    a, b = BlockPool(4), BlockPool(4)
    (x,) = a.get_new_blocks(1)
    (y,) = b.get_new_blocks(1)
    refused(a, RefCountUnderflow, lambda: a.free_blocks([x, y, y]), b)
    a.free_blocks([y, x])
    assert queue_ids(a) == [1, 2, 3] and queue_ids(b) == [1, 2, 3]


def test_a_block_of_no_pool_is_invalid_and_one_of_another_pool_is_foreign() -> None:
    a, b = BlockPool(4), BlockPool(4)
    stray = KVCacheBlock(1)
    (y,) = b.get_new_blocks(1)
    refused(a, InvalidArgument, lambda: a.touch([stray]))
    refused(a, InvalidArgument, lambda: a.free_blocks([stray]))
    refused(a, ForeignBlock, lambda: a.touch([y]), b)
    refused(a, ForeignBlock, lambda: a.cache_blocks([y], ["k"]), b)


def test_free_blocks_reads_any_iterable_once() -> None:
    pool = BlockPool(8)
    blocks = pool.get_new_blocks(3)
    pool.free_blocks(b for b in blocks)
    assert queue_ids(pool) == [1, 2, 3, 4, 5, 6, 7]


def test_block_hash_is_read_only() -> None:
    pool = BlockPool(4)
    (b,) = pool.get_new_blocks(1)
    with pytest.raises(AttributeError):
        b.block_hash = "k"  # type: ignore[misc]
    pool.cache_blocks([b], ["k"])
    assert b.block_hash == "k" and pool.get_cached_block("k") is b


def test_same_errors_under_python_dash_O() -> None:
    script = textwrap.dedent(
        """
        from kvpool.impl import BlockPool, PoolError
        pool = BlockPool(4)
        (b,) = pool.get_new_blocks(1)
        kinds = []
        for call in (lambda: pool.free_blocks([b, b]), lambda: pool.get_new_blocks(-1),
                     lambda: pool.get_new_blocks(9), lambda: pool.unpin_blocks([b], None),
                     lambda: pool.evict_blocks([-1]), lambda: pool.touch([1])):
            try:
                call()
                kinds.append("none")
            except PoolError as e:
                kinds.append(e.kind.value)
        print(",".join(kinds))
        """
    )
    runs = [
        subprocess.run(
            [sys.executable, *flag, "-c", script], capture_output=True, text=True, check=True
        )
        for flag in ([], ["-O"])
    ]
    assert runs[0].stdout == runs[1].stdout
    assert runs[0].stdout.strip() == (
        "RefCountUnderflow,InvalidArgument,InsufficientFreeBlocks,InvalidArgument,"
        "InvalidArgument,InvalidArgument"
    )


# -- watchers ----------------------------------------------------------------------------------


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    return seen


def test_a_raising_watcher_is_reported_and_the_others_still_fire(unraisable: list[Any]) -> None:
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(3)
    fired: list[tuple[str, int]] = []

    def bad(block: KVCacheBlock) -> None:
        fired.append(("bad", block.block_id))
        raise RuntimeError("boom")

    def good(block: KVCacheBlock) -> None:
        fired.append(("good", block.block_id))

    pool.unpin_blocks(blocks[:2], bad)
    pool.unpin_blocks(blocks[2:], good)
    handed = pool.get_new_blocks(3)
    assert ids(handed) == [1, 2, 3]
    assert fired == [("bad", 1), ("bad", 2), ("good", 3)]
    assert [type(u.exc_value) for u in unraisable] == [RuntimeError, RuntimeError]
    assert pool.check_invariants() == []
    assert pool._watchers == {}


def test_a_watcher_calling_back_sees_a_consistent_pool(unraisable: list[Any]) -> None:
    pool = BlockPool(6, enable_kv_cache_events=True)
    seen: list[object] = []
    blocks = pool.get_new_blocks(2)
    (spare,) = pool.get_new_blocks(1)  # block 3: the watcher frees and retakes it
    pool.cache_blocks(blocks, ["a", "b"])

    def reenter(block: KVCacheBlock) -> None:
        seen.append((block.block_id, block.ref_cnt, block.block_hash, pool.check_invariants()))
        seen.append(pool.take_events())
        pool.free_blocks([spare])
        assert pool.get_new_blocks(1) == [spare]
        pool.touch([spare])
        pool.free_blocks([spare])

    pool.unpin_blocks(blocks, reenter)
    assert ids(pool.get_new_blocks(4)) == [4, 5, 1, 2]  # the watchers run for 1 and 2
    assert unraisable == []
    assert seen[0] == (1, 1, None, [])
    assert seen[1] == [BlockStored(("a", "b")), BlockRemoved("a"), BlockRemoved("b")]
    assert seen[3] == []  # the second watcher sees no new events
    assert spare.ref_cnt == 1
    assert pool.check_invariants() == []
    assert pool.get_num_free_blocks() == 0


def test_a_watcher_resetting_the_cache_from_inside() -> None:
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(3)
    results: list[bool] = []
    pool.unpin_blocks(blocks, lambda b: results.append(pool.reset_prefix_cache()))
    assert pool.reset_prefix_cache() is True
    assert results == [True, True, True]  # nothing in use: every nested reset succeeds
    assert pool.check_invariants() == []


def test_keyboard_interrupt_in_a_watcher_lets_the_others_fire_first() -> None:
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(2)
    fired: list[int] = []

    def interrupt(block: KVCacheBlock) -> None:
        raise KeyboardInterrupt

    pool.unpin_blocks(blocks[:1], interrupt)
    pool.unpin_blocks(blocks[1:], lambda b: fired.append(b.block_id))
    with pytest.raises(KeyboardInterrupt):
        pool.get_new_blocks(3)
    assert fired == [2] and pool.check_invariants() == []


def test_bound_methods_are_distinct_objects() -> None:
    """'That very object': a bound method made twice is two watchers (documented gotcha)."""

    class Reader:
        def __init__(self) -> None:
            self.n = 0

        def on_reuse(self, block: KVCacheBlock) -> None:
            self.n += 1

    pool = BlockPool(4)
    (b,) = pool.get_new_blocks(1)
    pool.touch([b])
    reader = Reader()
    cb = reader.on_reuse
    pool.unpin_blocks([b], cb)
    pool.unpin_blocks([b], cb)  # the same object: pending once
    pool.get_new_blocks(3)
    assert reader.n == 1


# -- weak references ------------------------------------------------------------------------


def test_a_pool_is_freed_while_its_blocks_live_and_their_frees_are_dropped() -> None:
    a = BlockPool(4)
    b = BlockPool(4)
    held = b.get_new_blocks(2)
    del b
    gc.collect()
    assert held[0].pool is not None and held[0].pool() is None
    (x,) = a.get_new_blocks(1)
    a.free_blocks([*held, x])
    assert queue_ids(a) == [1, 2, 3]


# -- the free queue's own API -----------------------------------------------------------------


def test_free_queue_operations_keep_order_and_links() -> None:
    blocks = [KVCacheBlock(i) for i in range(6)]
    q = FreeKVCacheBlockQueue(blocks)
    assert q.popleft() is blocks[0]
    assert q.popleft_n(2) == blocks[1:3]
    q.remove(blocks[4])
    assert ids(q.get_all_free_blocks()) == [3, 5]
    q.prepend_n([blocks[1], blocks[0]])
    q.append(blocks[4])
    q.append_n([blocks[2]])
    assert ids(q.get_all_free_blocks()) == [1, 0, 3, 5, 4, 2]
    assert q.num_free_blocks == len(q) == 6
    assert q.popleft_n(0) == []
    popped = q.popleft_n(6)
    assert all(b.prev_free_block is None and b.next_free_block is None for b in popped)
    assert q.fake_free_list_head.next_free_block is q.fake_free_list_tail


def test_free_queue_refuses_bad_input_and_changes_nothing() -> None:
    blocks = [KVCacheBlock(i) for i in range(4)]
    q = FreeKVCacheBlockQueue(blocks[:2])
    loose = blocks[2]

    def state() -> list[int]:
        return ids(q.get_all_free_blocks())

    for call, exc in [
        (lambda: q.append(blocks[0]), InvalidArgument),  # already linked
        (lambda: q.append_n([loose, loose]), InvalidArgument),  # listed twice
        (lambda: q.prepend_n([loose, blocks[1]]), InvalidArgument),
        (lambda: q.remove(loose), InvalidArgument),  # not in the queue
        (lambda: q.remove(q.fake_free_list_head), InvalidArgument),
        (lambda: q.append_n([blocks[3], q.fake_free_list_head]), InvalidArgument),
        (lambda: q.prepend_n([blocks[3], q.fake_free_list_tail]), InvalidArgument),
        (lambda: q.append_n(7), InvalidArgument),  # type: ignore[arg-type]
        (lambda: q.popleft_n(3), InsufficientFreeBlocks),
        (lambda: q.popleft_n(-1), InvalidArgument),
        (lambda: q.append("x"), InvalidArgument),  # type: ignore[arg-type]
    ]:
        with pytest.raises(exc):
            call()
        assert state() == [0, 1] and q.num_free_blocks == 2
    q.popleft_n(2)
    with pytest.raises(InsufficientFreeBlocks):
        q.popleft()


def _links(q: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock]) -> list[tuple[Any, Any]]:
    """Every node's (prev, next) as identities, the sentinels included."""
    nodes = [q.fake_free_list_head, q.fake_free_list_tail, *blocks]
    return [(id(b.prev_free_block), id(b.next_free_block)) for b in nodes]


@pytest.mark.parametrize("queued", [0, 1, 3])
@pytest.mark.parametrize("method", ["append_n", "prepend_n"])
@pytest.mark.parametrize(
    "group",
    [
        ["H"],
        ["H", 0],
        [0, "H"],
        [0, "H", 1],
        [0, "H", 0],  # the head, then a block listed twice
        ["H", "H"],
        [0, "H", "x"],  # the head, then something that is not a block
        [0, 1, "T"],
        [0, "Q"],  # a block already in the queue
    ],
)
def test_splice_refuses_sentinels_anywhere_and_restores_every_link(
    queued: int, method: str, group: list[Any]
) -> None:
    """The loop lets the head sentinel through and catches it after: every link must come back."""
    inside = [KVCacheBlock(100 + i) for i in range(queued)]
    loose = [KVCacheBlock(i) for i in range(2)]
    q = FreeKVCacheBlockQueue(inside)
    if "Q" in group and not inside:
        return  # nothing queued to list again
    names = {"H": q.fake_free_list_head, "T": q.fake_free_list_tail, "x": "x"}
    args = [names[g] if isinstance(g, str) and g != "Q" else g for g in group]
    args = [inside[0] if g == "Q" else loose[g] if isinstance(g, int) else g for g in args]
    before = _links(q, inside + loose)
    with pytest.raises(InvalidArgument):
        getattr(q, method)(args)
    assert _links(q, inside + loose) == before
    assert ids(q.get_all_free_blocks()) == [b.block_id for b in inside]
    assert q.num_free_blocks == queued
    # and the queue still works
    getattr(q, method)(loose)
    assert len(q.popleft_n(queued + 2)) == queued + 2


class _Unlinkable:
    """Reads like a free block, but refuses to take a link."""

    prev_free_block = None
    next_free_block = None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(name)


@pytest.mark.parametrize("method", ["append_n", "prepend_n"])
@pytest.mark.parametrize("where", [0, 1, 2])
def test_an_entry_that_cannot_take_a_link_is_refused_and_changes_nothing(
    method: str, where: int
) -> None:
    inside = [KVCacheBlock(100 + i) for i in range(2)]
    loose = [KVCacheBlock(i) for i in range(2)]
    q = FreeKVCacheBlockQueue(inside)
    group: list[Any] = list(loose)
    group.insert(where, _Unlinkable())
    before = _links(q, inside + loose)
    with pytest.raises(InvalidArgument):
        getattr(q, method)(group)
    assert _links(q, inside + loose) == before
    assert q.num_free_blocks == 2


@given(
    st.lists(
        st.tuples(st.sampled_from(["pop", "append", "prepend", "remove"]), st.integers(0, 6)),
        max_size=40,
    )
)
def test_checked_queue_methods_do_what_the_pools_unchecked_ones_do(
    steps: list[tuple[str, int]],
) -> None:
    """The public methods write their loops out for speed: on valid calls they must move
    exactly the links the pool's unchecked ``_`` methods move."""
    checked_blocks = [KVCacheBlock(i) for i in range(8)]
    plain_blocks = [KVCacheBlock(i) for i in range(8)]
    checked = FreeKVCacheBlockQueue(checked_blocks[:4])
    plain = FreeKVCacheBlockQueue(plain_blocks[:4])
    out_c, out_p = checked_blocks[4:], plain_blocks[4:]  # blocks in no list, same order
    for kind, k in steps:
        if kind == "pop":
            n = k % (checked.num_free_blocks + 1)
            out_c += checked.popleft_n(n)
            out_p += plain._popleft_n(n)
        elif kind in ("append", "prepend"):
            n = k % (len(out_c) + 1)
            group_c, out_c = out_c[:n], out_c[n:]
            group_p, out_p = out_p[:n], out_p[n:]
            if kind == "append":
                checked.append_n(group_c)
                plain._append_n(group_p)
            else:
                checked.prepend_n(group_c)
                plain._prepend_n(group_p)
        elif checked.num_free_blocks:
            i = k % checked.num_free_blocks
            victim_c = checked.get_all_free_blocks()[i]
            victim_p = plain.get_all_free_blocks()[i]
            checked.remove(victim_c)
            plain._remove(victim_p)
            out_c.append(victim_c)
            out_p.append(victim_p)
        assert ids(checked.get_all_free_blocks()) == ids(plain.get_all_free_blocks())
        assert checked.num_free_blocks == plain.num_free_blocks
        assert [
            (
                b.block_id,
                getattr(b.prev_free_block, "block_id", None),
                getattr(b.next_free_block, "block_id", None),
            )
            for b in checked_blocks
        ] == [
            (
                b.block_id,
                getattr(b.prev_free_block, "block_id", None),
                getattr(b.next_free_block, "block_id", None),
            )
            for b in plain_blocks
        ]
