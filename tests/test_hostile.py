"""The pool trusts nothing it is handed (issue 14, item 1).

Each test states one rule of docs/semantics.md's "Hostile input and concurrency"
section, checks it on the real pool, and shows that a seeded bug (a local subclass
or monkeypatch that puts back the old, trusting code) breaks it: so each check can fail.
"""

from __future__ import annotations

import copy
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kvpool.impl.pool as pool_module
from kvpool.impl import (
    BlockPool,
    ForeignBlock,
    InsufficientFreeBlocks,
    InvalidArgument,
    KVCacheBlock,
    PoolError,
    abstract,
)
from kvpool.spec import ErrorKind, GetNewBlocks, PoolState, World
from kvpool.spec.invariants import check_pool

# -- helpers ---------------------------------------------------------------------------------


def snap(*pools: BlockPool) -> list[tuple[object, ...]]:
    return [abstract(p).snapshot() for p in pools]


def unchanged(exc: type[BaseException], call: Callable[[], object], *pools: BlockPool) -> Any:
    """``call`` raises ``exc``, and every pool is exactly as it was, every invariant holding."""
    before = snap(*pools)
    with pytest.raises(exc) as info:
        call()
    assert snap(*pools) == before
    for p in pools:
        assert p.check_invariants() == []
    return info.value


def busy_pool(n: int = 8) -> tuple[BlockPool, list[KVCacheBlock]]:
    pool = BlockPool(n, enable_kv_cache_events=True)
    blocks = pool.get_new_blocks(4)
    pool.cache_blocks(blocks[:2], [b"a", b"b"])
    pool.free_blocks(blocks[:1])  # block 1: free, cached
    return pool, blocks


class Boom(Exception):
    pass


# -- ownership is identity -----------------------------------------------------------------


def forgeries(pool: BlockPool) -> list[KVCacheBlock]:
    """Hand-built blocks (naming the pool, or handed its blocks' own reference), a block
    whose ``pool`` was assigned, copies and deep copies of real ones (the null block's too)."""
    real = pool.blocks[3]
    assigned = KVCacheBlock(3)
    assigned.pool = real.pool
    return [
        KVCacheBlock(3, pool=weakref.ref(pool)),
        copy.copy(real),
        copy.copy(pool.null_block),
        KVCacheBlock(-1, pool=weakref.ref(pool)),
        KVCacheBlock(10**30, pool=weakref.ref(pool)),
        KVCacheBlock(3, pool=real.pool),
        assigned,
        copy.deepcopy(real),
    ]


@pytest.mark.parametrize("which", range(8))
def test_a_forged_block_is_invalid_in_every_operation(which: int) -> None:
    pool, blocks = busy_pool()
    other = BlockPool(4)
    (theirs,) = other.get_new_blocks(1)
    fake = forgeries(pool)[which]
    # A forgery names the pool but never carries its mark, whatever it was built from.
    assert fake.pool is not None and fake.pool() is pool
    assert fake._pool is not pool._weak_self
    for call in (
        lambda: pool.free_blocks([blocks[2], fake]),
        lambda: pool.free_blocks([fake], evict_first=True),
        lambda: pool.touch([blocks[2], fake]),
        lambda: pool.unpin_blocks([fake], print),
        lambda: pool.cache_blocks([fake], [b"k"]),
        lambda: pool.is_block_writable(fake),
        lambda: other.free_blocks([theirs, fake]),
    ):
        unchanged(InvalidArgument, call, pool, other)


def test_a_real_block_of_another_pool_is_still_foreign_or_forwarded() -> None:
    pool, blocks = busy_pool()
    other = BlockPool(4)
    (theirs,) = other.get_new_blocks(1)
    unchanged(ForeignBlock, lambda: pool.touch([theirs]), pool, other)
    pool.free_blocks([blocks[3], theirs])  # forwarded
    assert theirs.ref_cnt == 0 and other.get_num_free_blocks() == 3
    assert pool.check_invariants() == [] and other.check_invariants() == []


def test_a_copy_that_kept_the_mark_would_corrupt_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: copies made by the default slot copy, which keeps the pool's mark."""
    monkeypatch.setattr(KVCacheBlock, "__reduce_ex__", object.__reduce_ex__)
    pool, _ = busy_pool()
    fake = copy.copy(pool.blocks[3])
    assert fake._pool is pool._weak_self  # the bug: the copy carries the mark
    pool.touch([fake])  # accepted now: the copy's ref_cnt moves, the real block's does not
    assert pool.check_invariants() != [] or abstract(pool).ref[3] != fake.ref_cnt


def test_the_old_identity_test_let_a_copy_corrupt_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: ownership as "the pool it names" (the code before identity)."""

    def trusting_owner(block: object) -> BlockPool | None:
        if type(block) is not KVCacheBlock or not isinstance(block.pool, weakref.ref):
            raise pool_module._NotABlock
        return block.pool()  # type: ignore[no-any-return]

    monkeypatch.setattr(pool_module, "_owner", trusting_owner)
    pool, _ = busy_pool()
    fake = copy.copy(pool.blocks[3])
    pool.touch([fake])  # accepted now: the copy's ref_cnt moves, the real block's does not
    assert pool.check_invariants() != [] or abstract(pool).ref[3] != fake.ref_cnt


# -- an exception while a call is read leaves everything as it was --------------------------


def raising_iterable(items: list[object], exc: BaseException) -> Iterator[object]:
    yield from items
    raise exc


@pytest.mark.parametrize("exc", [Boom("midway"), KeyboardInterrupt()])
def test_an_iterable_raising_midway_surfaces_unchanged(exc: BaseException) -> None:
    pool, blocks = busy_pool()
    for call in (
        lambda: pool.free_blocks(raising_iterable(blocks[2:], exc)),
        lambda: pool.touch(raising_iterable(blocks[1:2], exc)),
        lambda: pool.unpin_blocks(raising_iterable(blocks[2:], exc), print),
        lambda: pool.cache_blocks(raising_iterable(blocks[2:3], exc), [b"c"]),
        lambda: pool.cache_blocks(blocks[2:3], raising_iterable([b"c"], exc)),
        lambda: pool.evict_blocks(raising_iterable([1], exc)),
    ):
        got = unchanged(type(exc), call, pool)
        assert got is exc  # the very exception, not wrapped


def test_not_iterable_at_all_is_invalid() -> None:
    pool, _ = busy_pool()
    unchanged(InvalidArgument, lambda: pool.free_blocks(42), pool)  # type: ignore[arg-type]


class _EntryWithAttrs:
    """Not a block: every attribute read raises."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> Any:
        raise self.exc


class _RaisingBlock(KVCacheBlock):
    """A KVCacheBlock subclass whose ``block_id`` raises."""

    __slots__ = ()

    @property  # type: ignore[override]
    def block_id(self) -> int:
        raise Boom("block_id")


class _EvilIndex:
    def __index__(self) -> int:
        raise Boom("__index__")


def odd_entries(pool: BlockPool) -> list[object]:
    bad_pool = KVCacheBlock(2, pool=lambda: pool)  # type: ignore[arg-type]
    return [
        _EntryWithAttrs(Boom("attr")),
        _EntryWithAttrs(ZeroDivisionError()),
        _RaisingBlock.__new__(_RaisingBlock),
        KVCacheBlock(_EvilIndex()),  # type: ignore[arg-type]
        KVCacheBlock("two"),  # type: ignore[arg-type]
        bad_pool,  # its pool is not a weak reference
        None,
        object(),
    ]


@pytest.mark.parametrize("which", range(8))
def test_an_entry_raising_anything_is_invalid_and_rolled_back(which: int) -> None:
    pool, blocks = busy_pool()
    entry = odd_entries(pool)[which]
    for call in (
        lambda: pool.free_blocks([blocks[2], blocks[3], entry]),
        lambda: pool.free_blocks([blocks[3], entry], evict_first=True),
        lambda: pool.touch([blocks[0], entry]),  # blocks[0] is free: touching it would unlink it
        lambda: pool.unpin_blocks([blocks[2], entry], print),
        lambda: pool.cache_blocks([blocks[2], entry], [b"c", b"d"]),
    ):
        unchanged(InvalidArgument, call, pool)


def test_an_entry_that_is_no_block_is_never_read() -> None:
    """The hot paths read nothing of an entry that is not an exact block: one whose every
    read raises KeyboardInterrupt is refused, and the interrupt never happens."""
    pool, blocks = busy_pool()
    entry = _EntryWithAttrs(KeyboardInterrupt())
    unchanged(InvalidArgument, lambda: pool.free_blocks([blocks[2], blocks[3], entry]), pool)
    unchanged(InvalidArgument, lambda: pool.touch([blocks[0], entry]), pool)
    unchanged(InvalidArgument, lambda: pool.unpin_blocks([blocks[2], entry], print), pool)


def test_an_interrupt_mid_call_surfaces_and_is_rolled_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KeyboardInterrupt can arrive at any point of a call: injected here where the
    loops call out (the second unlink of touch; the forwarding of free_blocks), it
    surfaces, and the pool is as it was."""
    pool, blocks = busy_pool()
    pool.free_blocks(blocks[2:3])  # blocks[0] and blocks[2] are free now
    queue_class = type(pool.free_block_queue)
    real_remove = queue_class._remove
    calls: list[object] = []

    def remove_then_interrupt(queue: Any, block: KVCacheBlock) -> None:
        calls.append(block)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_remove(queue, block)

    monkeypatch.setattr(queue_class, "_remove", remove_then_interrupt)
    unchanged(KeyboardInterrupt, lambda: pool.touch([blocks[0], blocks[2]]), pool)
    assert len(calls) == 2
    monkeypatch.undo()

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    other = BlockPool(4)
    foreign = other.get_new_blocks(1)[0]
    monkeypatch.setattr(pool_module, "_forward", interrupt)
    unchanged(KeyboardInterrupt, lambda: pool.free_blocks([blocks[3], foreign]), pool)


def test_the_rollback_only_on_attribute_error_leaked_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: free_blocks' rollback catching only AttributeError (the code before)."""
    pool, blocks = busy_pool()
    monkeypatch.setattr(pool, "_undo_release", lambda blocks, stop: None)
    with pytest.raises(InvalidArgument):
        pool.free_blocks([blocks[2], blocks[3], _EntryWithAttrs(Boom())])
    assert pool.check_invariants() != []  # blocks 3 and 4 at ref_cnt 0, outside the queue


# -- keys -------------------------------------------------------------------------------------


class HostileKey:
    """A key whose hash and equality the test controls."""

    def __init__(self, h: int, eq_raises: bool = False, hash_raises: bool = False) -> None:
        self.h, self.eq_raises, self.hash_raises = h, eq_raises, hash_raises

    def __hash__(self) -> int:
        if self.hash_raises:
            raise Boom("__hash__")
        return self.h

    def __eq__(self, other: object) -> bool:
        if self.eq_raises:
            raise Boom("__eq__")
        return self is other

    def __repr__(self) -> str:
        return f"HostileKey({self.h})"


def test_a_key_raising_in_hash_or_eq_leaves_cache_blocks_undone() -> None:
    pool, blocks = busy_pool()
    collide = HostileKey(hash(b"a"), eq_raises=True)  # compared with b"a" in the index
    unchanged(Boom, lambda: pool.cache_blocks(blocks[2:4], [b"c", collide]), pool)
    unchanged(
        Boom, lambda: pool.cache_blocks(blocks[2:4], [b"c", HostileKey(1, hash_raises=True)]), pool
    )
    # the same key twice in one call is compared too, before any change
    twin = HostileKey(7, eq_raises=True)
    other = HostileKey(7)
    unchanged(Boom, lambda: pool.cache_blocks(blocks[2:4], [twin, other]), pool)
    unchanged(Boom, lambda: pool.get_cached_block(collide), pool)


def test_a_key_whose_hash_changes_never_makes_get_new_blocks_raise() -> None:
    pool = BlockPool(4, enable_kv_cache_events=True)
    key = HostileKey(1)
    blocks = pool.get_new_blocks(3)
    pool.cache_blocks(blocks[:1], [key])
    pool.free_blocks(blocks)
    key.h = 2  # the key now hashes elsewhere
    key.eq_raises = True
    got = pool.get_new_blocks(3)  # reuses block 1, whose key must go
    assert sorted(b.block_id for b in got) == [1, 2, 3]
    assert all(b.block_hash is None for b in got)
    assert pool.get_cached_block(b"x") is None
    assert abstract(pool).index == {}
    assert pool.check_invariants() == []


def test_the_old_drop_key_raised_after_blocks_left_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: ``_drop_key`` trusting the key's hash (no search by identity)."""

    def trusting(self: BlockPool, block: KVCacheBlock) -> dict[int, KVCacheBlock]:
        return self._index[block.block_hash]

    monkeypatch.setattr(BlockPool, "_holders_of", trusting)
    pool = BlockPool(4)
    key = HostileKey(1)
    (b,) = pool.get_new_blocks(1)
    pool.cache_blocks([b], [key])
    pool.free_blocks([b])
    key.h = 2
    with pytest.raises(KeyError):
        pool.get_new_blocks(3)
    assert pool.check_invariants() != []  # three blocks out of the queue, handed to nobody


def test_a_nan_key_is_handled_by_identity_with_no_false_report() -> None:
    nan = float("nan")
    pool = BlockPool(6, enable_kv_cache_events=True)
    blocks = pool.get_new_blocks(3)
    pool.cache_blocks(blocks[:2], [nan, nan])
    pool.cache_blocks(blocks[2:], [float("nan")])  # another NaN: another key
    assert pool.get_cached_block(nan) is blocks[0]
    assert pool.check_invariants() == []
    world = World.of(PoolState.initial(6, True, True))
    assert check_pool(abstract(pool)) == []
    assert world.pools[0] is not None
    pool.free_blocks(blocks)
    pool.get_new_blocks(5)
    assert pool.check_invariants() == [] and pool._index == {}


def test_the_old_invariant_reported_a_nan_key_as_corruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kvpool.spec.invariants as inv

    monkeypatch.setattr(inv, "same_key", lambda a, b: a == b)  # the seeded bug: == only
    pool = BlockPool(4)
    (b,) = pool.get_new_blocks(1)
    pool.cache_blocks([b], [float("nan")])
    assert [v.invariant for v in pool.check_invariants()] == ["INV-CACHE"]


# -- numbers ----------------------------------------------------------------------------------

HUGE = 10**5000  # str() of it raises ValueError


@pytest.mark.parametrize(
    "n", [HUGE, -HUGE, 2**63, 1.0, 3.5, True, float("nan"), "3"], ids=lambda v: type(v).__name__
)
def test_a_count_that_cannot_be_read_is_invalid_in_pool_and_spec(n: object) -> None:
    pool, _ = busy_pool()
    err = unchanged(InvalidArgument, lambda: pool.get_new_blocks(n), pool)  # type: ignore[arg-type]
    assert len(str(err)) < 200
    world = World.of(PoolState.initial(8, True, True))
    out = world.apply(GetNewBlocks(n))
    assert out.error == ErrorKind.INVALID_ARGUMENT and len(out.detail or "") < 200


def test_a_count_within_int64_but_too_big_is_insufficient() -> None:
    pool, _ = busy_pool()
    unchanged(InsufficientFreeBlocks, lambda: pool.get_new_blocks(2**63 - 1), pool)
    out = World.of(PoolState.initial(8)).apply(GetNewBlocks(2**63 - 1))
    assert out.error == ErrorKind.INSUFFICIENT_FREE_BLOCKS


@pytest.mark.parametrize("n", [HUGE, 2**63, 4.0, True, 0, -1, None], ids=lambda v: type(v).__name__)
def test_a_pool_size_that_cannot_be_read_is_invalid(n: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        BlockPool(n)  # type: ignore[arg-type]
    assert len(str(info.value)) < 200


@pytest.mark.parametrize("i", [HUGE, -HUGE, 1.0, True], ids=lambda v: type(v).__name__)
def test_an_id_that_cannot_be_read_is_invalid(i: object) -> None:
    pool, _ = busy_pool()
    err = unchanged(InvalidArgument, lambda: pool.evict_blocks([i]), pool)  # type: ignore[list-item]
    assert len(str(err)) < 200


def test_printing_a_huge_count_with_repr_was_a_plain_value_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: the message formats the count with plain ``repr`` (the code before)."""
    monkeypatch.setattr(pool_module, "_show", repr)
    pool = BlockPool(4)
    with pytest.raises(ValueError) as info:
        pool.get_new_blocks(HUGE)
    assert not isinstance(info.value, PoolError)


# -- watchers that interrupt ------------------------------------------------------------------


def test_keyboard_interrupt_from_a_watcher_keeps_every_block_and_firing() -> None:
    pool = BlockPool(20_001)
    held = pool.get_new_blocks(20_000)
    fired: list[int] = []

    def interrupt(block: KVCacheBlock) -> None:
        raise KeyboardInterrupt

    pool.unpin_blocks(held[:1], interrupt)
    pool.unpin_blocks(held[1:3], lambda b: fired.append(b.block_id))
    pool.free_blocks(held[3:])
    with pytest.raises(KeyboardInterrupt) as info:
        pool.get_new_blocks(20_000)
    got = info.value.kvpool_blocks  # type: ignore[attr-defined]
    assert len(got) == 20_000 and all(b.ref_cnt == 1 for b in got)
    assert fired == [2, 3]
    assert pool.check_invariants() == []
    assert pool._watch_fired == pool._watch_registered == 3
    pool.free_blocks(got)  # the caller still holds them, so can give them back
    assert pool.get_num_free_blocks() == 20_000


def test_a_raising_unraisablehook_stops_no_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    def hook(_: object) -> None:
        raise RuntimeError("the hook itself")

    monkeypatch.setattr(sys, "unraisablehook", hook)
    pool = BlockPool(101)
    held = pool.get_new_blocks(100)
    fired: list[int] = []

    def watcher(block: KVCacheBlock) -> None:
        fired.append(block.block_id)
        if block.block_id % 2:
            raise ValueError("a watcher error, for the hook")

    pool.unpin_blocks(held, watcher)
    with pytest.raises(RuntimeError, match="the hook itself") as info:
        pool.get_new_blocks(100)
    assert len(info.value.kvpool_blocks) == 100  # type: ignore[attr-defined]
    assert fired == list(range(1, 101))
    assert pool._watch_fired == 100 and pool.check_invariants() == []


def test_the_old_fire_lost_the_watchers_after_a_raising_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeded bug: the hook called outside the per-watcher ``try`` (the code before)."""

    def old_fire(firings: list[Any], handed_out: object = None) -> None:
        for watcher, block in firings:
            try:
                watcher(block)
            except Exception as exc:
                sys.unraisablehook(exc)  # type: ignore[arg-type]

    monkeypatch.setattr(BlockPool, "_fire", staticmethod(old_fire))
    monkeypatch.setattr(sys, "unraisablehook", lambda _: 1 / 0)
    pool = BlockPool(5)
    held = pool.get_new_blocks(4)
    fired: list[int] = []

    def watcher(block: KVCacheBlock) -> None:
        fired.append(block.block_id)
        raise ValueError

    pool.unpin_blocks(held, watcher)
    with pytest.raises(ZeroDivisionError):
        pool.get_new_blocks(4)
    assert fired == [1] and pool._watch_fired == 4  # counted as fired, never ran


# -- threads ------------------------------------------------------------------------------------


def test_a_second_thread_is_refused_in_checked_mode() -> None:
    import kvpool.contracts.runtime as rt

    pool = BlockPool(8)
    inside = threading.Event()
    release = threading.Event()
    errors: list[BaseException] = []

    def slow() -> Iterator[KVCacheBlock]:
        inside.set()
        release.wait(10)
        yield from ()

    def first() -> None:
        try:
            pool.free_blocks(slow())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with rt.checking():
        t = threading.Thread(target=first)
        t.start()
        assert inside.wait(10)
        before = snap(pool)
        with pytest.raises(rt.ConcurrentUse):
            pool.get_new_blocks(1)
        assert snap(pool) == before
        release.set()
        t.join(10)
        assert errors == []
        # one thread after the other is fine, and so is a watcher calling back in
        assert [b.block_id for b in pool.get_new_blocks(1)] == [1]
        assert hasattr(BlockPool.__dict__["get_new_blocks"], "__wrapped__")
    # unchecked, the pool is not wrapped: the hot path is the plain method, no guard
    assert not hasattr(BlockPool.__dict__["get_new_blocks"], "__wrapped__")


def test_without_the_guard_a_second_thread_gets_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: checked mode without the thread guard lets the second call run."""
    import kvpool.contracts.runtime as rt

    monkeypatch.setattr(rt, "_enter_pool", lambda receiver: None)
    monkeypatch.setattr(rt, "_leave_pool", lambda receiver: None)
    pool = BlockPool(8)
    inside, release = threading.Event(), threading.Event()

    def slow() -> Iterator[KVCacheBlock]:
        inside.set()
        release.wait(10)
        yield from ()

    with rt.checking():
        t = threading.Thread(target=lambda: pool.free_blocks(slow()))
        t.start()
        assert inside.wait(10)
        assert len(pool.get_new_blocks(1)) == 1  # no refusal
        release.set()
        t.join(10)


# -- a proxy of one of the pool's own blocks ---------------------------------------------------


class _Proxy:
    """Not a block: forwards every attribute read to one (so it shows the pool's mark).

    With ``rewrite``, its first read also rewrites the argument list, as a hostile entry
    could: a refusal must undo what was done, not what the list says afterwards.
    """

    def __init__(self, target: KVCacheBlock, rewrite: tuple[list[Any], Any] | None = None):
        self._target, self._rewrite = target, rewrite

    def __getattr__(self, name: str) -> Any:
        if self._rewrite is not None:
            entries, other = self._rewrite
            entries[0] = other
            self._rewrite = None
        return getattr(self._target, name)


def _proxy_calls(
    pool: BlockPool, blocks: list[KVCacheBlock]
) -> list[Callable[[Callable[[KVCacheBlock, list[Any]], Any]], object]]:
    """Each hot path, given a way to make the proxy entry (of a block, in a list)."""

    def free(make: Callable[[KVCacheBlock, list[Any]], Any]) -> object:
        entries: list[Any] = [blocks[2]]
        entries.append(make(blocks[3], entries))
        return pool.free_blocks(entries)

    def touch(make: Callable[[KVCacheBlock, list[Any]], Any]) -> object:
        entries: list[Any] = [blocks[0]]  # free: touching it unlinks it
        entries.append(make(blocks[0], entries))
        return pool.touch(entries)

    def unpin(make: Callable[[KVCacheBlock, list[Any]], Any]) -> object:
        entries: list[Any] = [blocks[2]]
        entries.append(make(blocks[3], entries))
        return pool.unpin_blocks(entries, print)

    return [free, touch, unpin]


@pytest.mark.parametrize("which", range(3))
@pytest.mark.parametrize("rewrite", [False, True])
def test_a_proxy_of_a_pool_block_is_no_block(which: int, rewrite: bool) -> None:
    """A forwarding proxy reads as one of the pool's blocks, mark included; touching or
    freeing it must not reach the block behind it (seeded: the hot paths' old test of the
    mark alone, below)."""
    pool, blocks = busy_pool()
    call = _proxy_calls(pool, blocks)[which]
    other = blocks[1]
    unchanged(
        InvalidArgument,
        lambda: call(lambda b, entries: _Proxy(b, (entries, other) if rewrite else None)),
        pool,
    )


def test_the_mark_alone_lets_a_proxy_through() -> None:
    """The seeded bug: the hot paths' ownership test without the exact type (the code
    before). The proxy is then touched or freed "through" its block, breaking the pool."""
    from kvpool.mutants import Mutant

    trusting = Mutant(
        "mark-alone",
        "the hot paths test only the mark, which a proxy forwards",
        (),
        pool_patches=(
            (
                "if type(block) is not KVCacheBlock or block._pool is not mark:\n"
                "                    raise _NotABlock\n"
                "                ref_cnt = block.ref_cnt\n",
                "if block._pool is not mark:\n"
                "                    raise _NotABlock\n"
                "                ref_cnt = block.ref_cnt\n",
            ),
            (
                "if type(block) is not KVCacheBlock or block._pool is not mark:\n"
                "                    raise _NotABlock\n"
                "                ref_cnt = block.ref_cnt - 1\n",
                "if block._pool is not mark:\n"
                "                    raise _NotABlock\n"
                "                ref_cnt = block.ref_cnt - 1\n",
            ),
            ("type(block) is KVCacheBlock and block._pool is mark", "block._pool is mark"),
        ),
    ).pool_class()
    accepted = broken = 0
    for which in range(3):
        pool = trusting(8, enable_kv_cache_events=True)
        blocks = pool.get_new_blocks(4)
        pool.cache_blocks(blocks[:2], [b"a", b"b"])
        pool.free_blocks(blocks[:1])
        try:
            _proxy_calls(pool, blocks)[which](lambda b, entries: _Proxy(b))
        except PoolError:
            continue
        accepted += 1  # the real pool refuses it: test_a_proxy_of_a_pool_block_is_no_block
        broken += pool.check_invariants() != []
    assert accepted == 3
    assert broken == 2  # touch and free_blocks: the queue and the counts no longer agree
