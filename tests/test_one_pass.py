"""touch and unpin_blocks check and change in one pass, and roll back on a refusal.

The pass changes blocks before it reaches a bad entry, so each refusal must give back
exactly what was done: references, the free blocks touch took out of the queue (each
put back after the neighbour it kept, newest first: "dancing links") and pending
watchers (new ones come off the end of the dict; tuples a watcher was added to get
their old value). A bad entry at every position of a list, of every kind, is refused
with the state unchanged, under ``python -O`` too. Each rollback test is paired with a
seeded bug, a rollback that is subtly wrong, and shows that the same check catches it.
cache_full_blocks' one pass (keys given, then taken back last to first) is tested the
same way below.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

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
    original = BlockPool._undo_touch

    def one_short(self: BlockPool, entries: list[KVCacheBlock], failed: object) -> None:
        original(self, entries, failed)
        stop = next(i for i, e in enumerate(entries) if e is failed)
        if not entries[stop - 1].is_null:
            entries[stop - 1].ref_cnt += 1  # the last entry done keeps its reference

    pool, blocks = free_pool()
    in_use = pool.get_new_blocks(1)
    before = snapshot(pool)
    monkeypatch.setattr(BlockPool, "_undo_touch", one_short)
    with pytest.raises(InvalidArgument):
        pool.touch([blocks[1], *in_use, object()])
    assert snapshot(pool) != before


def oldest_first(self: BlockPool, entries: list[KVCacheBlock], failed: object) -> None:
    """Seeded bug: the unlinked blocks go back oldest first (not the reverse of the unlinking)."""
    stop = next((i for i, e in enumerate(entries) if e is failed), len(entries))
    unlinked = list({id(b): b for b in entries[:stop] if b.prev_free_block is not None}.values())
    for block in unlinked:  # the bug: oldest first
        prev = block.prev_free_block
        nxt = prev.next_free_block  # type: ignore[union-attr]
        block.next_free_block = nxt
        nxt.prev_free_block = block  # type: ignore[union-attr]
        prev.next_free_block = block  # type: ignore[union-attr]
    self.free_block_queue.num_free_blocks += len(unlinked)
    for block in entries[:stop]:
        if not block.is_null:
            block.ref_cnt -= 1


def forgets_unlinked(self: BlockPool, entries: list[KVCacheBlock], failed: object) -> None:
    """Seeded bug: the rollback of the old two-step touch, which had unlinked nothing yet."""
    stop = next((i for i, e in enumerate(entries) if e is failed), len(entries))
    for block in entries[:stop]:
        if not block.is_null:
            block.ref_cnt -= 1


@pytest.mark.parametrize("bug", [oldest_first, forgets_unlinked])
def test_a_touch_rollback_that_misplaces_unlinked_blocks_is_caught(
    monkeypatch: pytest.MonkeyPatch, bug: Callable[..., None]
) -> None:
    pool, blocks = free_pool()
    before = snapshot(pool)
    monkeypatch.setattr(BlockPool, "_undo_touch", bug)
    with pytest.raises(InvalidArgument):
        pool.touch([blocks[1], blocks[2], object()])  # type: ignore[list-item]
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


# -- a bad entry at every position -----------------------------------------------------------


class _Raising:
    """Not a block: every attribute read raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> object:
        raise self.exc


def every_position_failures() -> list[str]:
    """Each bad entry at each position of a list of good ones, through touch, unpin_blocks
    and free_blocks: what was not refused as expected or left a pool changed (empty: none).

    Checks with ``if``, not ``assert``, so that ``python -O`` runs them too
    (``test_every_position_under_python_dash_O``).
    """
    failures: list[str] = []

    def setup() -> tuple[BlockPool, BlockPool, list[KVCacheBlock], list[KVCacheBlock]]:
        # Blocks 1..6 cached and free (queue 1..6, then 9..11); 7 and 8 in use, 8 twice.
        pool = BlockPool(12)
        blocks = pool.get_new_blocks(8)
        pool.cache_blocks(blocks[:6], [f"k{i}".encode() for i in range(6)])
        pool.free_blocks(blocks[:6])
        pool.touch(blocks[7:8])
        other = BlockPool(5)
        theirs = other.get_new_blocks(2)
        other.free_blocks(theirs[1:])  # their block 2: free, in their queue
        return pool, other, blocks, theirs

    def state(*pools: BlockPool) -> list[tuple[object, ...]]:
        return [snapshot(p) for p in pools]

    def kinds(
        pool: BlockPool, other: BlockPool, blocks: list[KVCacheBlock], theirs: list[KVCacheBlock]
    ) -> list[tuple[str, object, type[BaseException]]]:
        return [
            ("their block in use", theirs[0], ForeignBlock),
            ("their free block", theirs[1], ForeignBlock),
            ("not a block", object(), InvalidArgument),
            ("hand-built block", KVCacheBlock(3), InvalidArgument),
            ("copy of a block", copy.copy(blocks[2]), InvalidArgument),
            ("entry raising", _Raising(ZeroDivisionError()), InvalidArgument),
            # (never read: an entry that is not an exact block is refused unread)
            ("entry raising Ctrl-C", _Raising(KeyboardInterrupt()), InvalidArgument),
        ]

    def check(
        name: str, call: Callable[[], object], expected: type[BaseException], *pools: BlockPool
    ) -> None:
        before = state(*pools)
        try:
            call()
        except BaseException as exc:  # every outcome is compared
            if type(exc) is not expected:
                failures.append(f"{name}: {type(exc).__name__}, expected {expected.__name__}")
        else:
            failures.append(f"{name}: accepted")
        if state(*pools) != before:
            failures.append(f"{name}: a pool changed")
        for p in pools:
            if p.check_invariants():
                failures.append(f"{name}: {p.check_invariants()[0]}")

    pool, other, blocks, theirs = setup()
    b1, b2, b3, b4, b5, _, b7, b8 = blocks
    # touch: adjacent and scattered free blocks (2 and 3 neighbours, 1 the queue's front),
    # one listed twice, the null block, blocks in use.
    touch_good = [b2, b3, pool.null_block, b5, b2, b7, b4, b8, b1]
    # unpin_blocks and free_blocks: blocks in use, 8 (held twice) listed twice.
    release_good = [b7, b8, b8]
    for label, bad, expected in kinds(pool, other, blocks, theirs):
        for pos in range(len(touch_good) + 1):
            entries: list[Any] = [*touch_good[:pos], bad, *touch_good[pos:]]
            check(
                f"touch, {label} at {pos}",
                partial(pool.touch, entries),
                expected,
                pool,
                other,
            )
        for pos in range(len(release_good) + 1):
            entries = [*release_good[:pos], bad, *release_good[pos:]]
            check(
                f"unpin_blocks, {label} at {pos}",
                partial(pool.unpin_blocks, entries, print),
                expected,
                pool,
                other,
            )
            if label.startswith("their"):
                continue  # free_blocks forwards a block of another live pool
            check(
                f"free_blocks, {label} at {pos}",
                partial(pool.free_blocks, entries),
                expected,
                pool,
                other,
            )
    # Refusals only unpin_blocks and free_blocks have: the null block, one entry too many.
    for pos in range(len(release_good) + 1):
        for label, bad, expected in (
            ("the null block", pool.null_block, NullBlockMisuse),
            ("block 7 once too often", b7, RefCountUnderflow),
        ):
            entries = [*release_good[:pos], bad, *release_good[pos:]]
            check(
                f"unpin_blocks, {label} at {pos}",
                partial(pool.unpin_blocks, entries, print),
                expected,
                pool,
                other,
            )
            if label != "the null block":  # free_blocks skips it
                check(
                    f"free_blocks, {label} at {pos}",
                    partial(pool.free_blocks, entries),
                    expected,
                    pool,
                    other,
                )
    # The good list alone is accepted.
    try:
        pool.touch(touch_good)
    except Exception as exc:  # a pool a bad rollback broke may raise anything
        failures.append(f"touch of the good list: {type(exc).__name__}")
    if [b.ref_cnt for b in blocks] != [1, 2, 1, 1, 1, 0, 2, 3] or pool.check_invariants():
        failures.append(f"touch of the good list: {[b.ref_cnt for b in blocks]}")
    return failures


def test_a_bad_entry_at_every_position_is_refused_with_nothing_changed() -> None:
    assert every_position_failures() == []


def test_every_position_catches_a_touch_that_keeps_its_unlinked_blocks_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: the old rollback, which had no unlinked blocks to put back."""
    monkeypatch.setattr(BlockPool, "_undo_touch", forgets_unlinked)
    failures = every_position_failures()
    assert failures
    # The first failure: a touch refused after a free block was unlinked (not at position
    # 0, where none was); the broken queue then fails later calls too.
    assert failures[0].startswith("touch, ") and " at 0:" not in failures[0]


def test_every_position_under_python_dash_O() -> None:
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_one_pass as t; "
        "print(repr(t.every_position_failures()), __debug__)"
    )
    here = str(Path(__file__).parent)
    out = subprocess.run(
        [sys.executable, "-O", "-c", script, here], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["[]", "False"]
