"""touch and unpin_blocks check and change in one pass, and roll back on a refusal.

The pass changes blocks before it reaches a bad entry, so each refusal must give back
exactly what was done: references (touch takes the free blocks it met out of the
queue only once the pass is over, so their places need no rollback) and pending
watchers (new ones come off the end of the dict; tuples a watcher was added to get
their old value). Each rollback test is paired with a seeded bug, a rollback that is
subtly wrong, and shows that the same check catches it. cache_full_blocks' one pass
(keys given, then taken back last to first) is tested the same way below.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import kvpool.spec.errors as pool_errors
from kvpool.impl import (
    BlockPool,
    ForeignBlock,
    InvalidArgument,
    KVCacheBlock,
    NullBlockMisuse,
    RefCountUnderflow,
    abstract,
)


def snapshot(pool: BlockPool) -> tuple[object, ...]:
    """Everything a rollback must restore, with the watchers' order and identity."""
    return (
        abstract(pool).snapshot(),
        [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
        [(bid, tuple(map(id, ws))) for bid, ws in pool._watchers.items()],
        pool._watch_registered,
    )


def refused(exc: type[Exception], call: Callable[[], object], pool: BlockPool) -> None:
    before = snapshot(pool)
    with pytest.raises(exc):
        call()
    assert snapshot(pool) == before
    assert pool.check_invariants() == []


def free_pool() -> tuple[BlockPool, list[KVCacheBlock]]:
    """Blocks 1..6 cached and free, in queue order 1..6, then the never-used blocks."""
    pool = BlockPool(10)
    blocks = pool.get_new_blocks(6)
    pool.cache_blocks(blocks, [f"k{i}".encode() for i in range(6)])
    pool.free_blocks(blocks)
    return pool, blocks


# -- touch ---------------------------------------------------------------------------------


def test_touch_refused_after_unlinking_neighbours_restores_the_queue_exactly() -> None:
    pool, blocks = free_pool()
    other = BlockPool(4)
    (theirs,) = other.get_new_blocks(1)
    b1, b2, b3, b4, b5, _ = blocks
    in_use = pool.get_new_blocks(1)  # block 7: in use
    # Adjacent and scattered free blocks, one listed twice, the null block, a block in use.
    good = [b2, b3, pool.null_block, b5, b2, *in_use, b4]
    refused(ForeignBlock, lambda: pool.touch([*good, theirs]), pool)
    refused(InvalidArgument, lambda: pool.touch([*good, object()]), pool)
    refused(InvalidArgument, lambda: pool.touch([*good, b1, KVCacheBlock(1)]), pool)
    pool.touch(good)  # the same entries alone are accepted
    assert [b.ref_cnt for b in (b2, b3, b4, b5)] == [2, 1, 1, 1]
    assert pool.check_invariants() == []


def test_a_touch_rollback_that_stops_one_entry_short_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: the rollback takes the failing entry's index as the count of entries done."""

    def one_short(self: BlockPool, entries: list[KVCacheBlock], failed: object) -> None:
        stop = next(i for i, e in enumerate(entries) if e is failed)
        for block in entries[: stop - 1]:
            block.ref_cnt -= 0 if block.is_null else 1

    pool, blocks = free_pool()
    in_use = pool.get_new_blocks(1)
    before = snapshot(pool)
    monkeypatch.setattr(BlockPool, "_undo_touch", one_short)
    with pytest.raises(InvalidArgument):
        pool.touch([blocks[1], *in_use, object()])
    assert snapshot(pool) != before


# -- unpin_blocks --------------------------------------------------------------------------


def watched_pool() -> tuple[BlockPool, list[KVCacheBlock], Callable[[KVCacheBlock], None]]:
    """Blocks 1..4 in use twice; block 1 already has a pending watcher ``w0``."""
    pool = BlockPool(10)
    blocks = pool.get_new_blocks(4)
    pool.touch(blocks)

    def w0(block: KVCacheBlock) -> None:
        return None

    pool.unpin_blocks(blocks[:1], w0)
    return pool, blocks, w0


def test_unpin_refused_midway_takes_back_every_watcher_and_reference() -> None:
    pool, blocks, w0 = watched_pool()
    b1, b2, b3, b4 = blocks

    def w1(block: KVCacheBlock) -> None:
        return None

    other = BlockPool(4)
    (theirs,) = other.get_new_blocks(1)
    # b1's tuple grows (w0, w1); b2 and b3 get new entries; b3 listed twice hits 0.
    good = [b1, b2, b3, b3]
    refused(RefCountUnderflow, lambda: pool.unpin_blocks([*good, b3], w1), pool)
    refused(NullBlockMisuse, lambda: pool.unpin_blocks([*good, pool.null_block], w1), pool)
    refused(ForeignBlock, lambda: pool.unpin_blocks([*good, theirs], w1), pool)
    refused(InvalidArgument, lambda: pool.unpin_blocks([*good, "b4"], w1), pool)
    refused(InvalidArgument, lambda: pool.unpin_blocks(good, "not callable"), pool)  # type: ignore[arg-type]
    registered = pool._watch_registered
    pool.unpin_blocks([*good, b4], w1)
    assert [tuple(pool._watchers[b.block_id]) for b in blocks] == [(w0, w1), (w1,), (w1,), (w1,)]
    assert pool._watch_registered == registered + 4
    assert b3.ref_cnt == 0 and pool.check_invariants() == []


def test_an_unpin_rollback_that_keeps_grown_tuples_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: the rollback forgets to give a grown tuple its old value."""
    original = BlockPool._undo_unpin

    def forgetful(
        self: BlockPool, entries: list[KVCacheBlock], stop: int, n0: int, grown: object
    ) -> None:
        original(self, entries, stop, n0, None)

    pool, blocks, _ = watched_pool()
    monkeypatch.setattr(BlockPool, "_undo_unpin", forgetful)
    before = snapshot(pool)
    with pytest.raises(RefCountUnderflow):
        pool.unpin_blocks([blocks[0], blocks[2], blocks[2], blocks[2]], print)
    assert snapshot(pool) != before


# -- cache_full_blocks ---------------------------------------------------------------------


class _Req:
    def __init__(self, hashes: list[object]) -> None:
        self.block_hashes = hashes


def test_cache_full_blocks_refused_midway_takes_back_every_key() -> None:
    pool = BlockPool(10)
    blocks = pool.get_new_blocks(5)
    pool.cache_full_blocks(_Req([b"x" * 8]), blocks[:1], 0, 1, 16, 0)  # b"x.." exists
    other = BlockPool(4)
    (theirs,) = other.get_new_blocks(1)
    free = pool.get_new_blocks(1)[0]
    pool.free_blocks([free])
    hashes: list[object] = [b"a" * 8, b"x" * 8, b"c" * 8, b"d" * 8]
    req = _Req(hashes)
    b1, b2, b3 = blocks[1:4]
    # b2 joins an existing key's holders; the last entry is refused each time.
    for last, exc in (
        (theirs, ForeignBlock),
        (free, pool_errors.BlockNotInUse),
        (b1, InvalidArgument),  # listed twice
        ("b4", InvalidArgument),
    ):
        refused(
            exc,
            lambda last=last: pool.cache_full_blocks(req, [b1, b2, b3, last], 0, 4, 16, 0),
            pool,
        )
    refused(
        InvalidArgument,
        lambda: pool.cache_full_blocks(
            _Req([*hashes[:3], "not bytes"]), [b1, b2, b3, blocks[4]], 0, 4, 16, 0
        ),
        pool,
    )
    pool.cache_full_blocks(req, [b1, b2, b3, blocks[4]], 0, 4, 16, 0)
    assert pool.get_cached_block(b"x" * 8, [0]) == [blocks[0]]  # the oldest holder first
    assert pool.check_invariants() == []


def test_a_cache_rollback_that_leaves_an_emptied_key_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: the rollback empties a key the call created but leaves it in the index."""

    def leaves_keys(self: BlockPool, blocks: list[KVCacheBlock]) -> None:
        for blk in blocks:
            del self._index[blk._block_hash][blk.block_id]  # the bug: the key stays
            blk._block_hash = None
            blk._block_hash_num_tokens = None

    pool = BlockPool(10)
    blocks = pool.get_new_blocks(4)
    pool.cache_full_blocks(_Req([b"k" * 8]), blocks[:1], 0, 1, 16, 0)
    # Index order before: b"k.." only. The call adds b"a.." (new) then b"k.." (existing).
    before = snapshot(pool), list(pool._index)
    monkeypatch.setattr(BlockPool, "_uncache_last", leaves_keys)
    with pytest.raises(InvalidArgument):
        pool.cache_full_blocks(
            _Req([b"a" * 8, b"a" * 8, b"b" * 8]), [blocks[1], blocks[2], "x"], 0, 3, 16, 0
        )  # type: ignore[list-item]
    assert (snapshot(pool), list(pool._index)) != before
