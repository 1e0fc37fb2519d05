"""Blocks with several keys: vLLM 0.33.0's caching calls in the spec and in kvpool.impl.

* unit tests: each new operation on the spec and on the implementation, through one
  adapter, with the expected results written out;
* a Hypothesis lockstep test: random traces of the new operations (mixed with
  allocation, frees, eviction and reset) on both, compared call by call and state by
  state, with every invariant checked on the implementation after each call;
* the seeded bugs of ``mutants.VLLM_API_MUTANTS``: each is caught by that lockstep
  comparison on a fixed trace that exercises every new code path.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvpool import mutants
from kvpool.impl import BlockPool, KVCacheBlock, abstract, check_invariants
from kvpool.impl.hash_map import BlockHashToBlockMap
from kvpool.spec import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    EmitCachedBlockEvents,
    ErrorKind,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetCachedBlockGroups,
    GetNewBlocks,
    InvalidArgument,
    Lora,
    MMFeature,
    MoveBlockHashes,
    Op,
    PoolError,
    PoolState,
    Request,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    World,
    check_pool,
    group_key,
)
from kvpool.spec.ops import BlockRef

HSZ = 2  # hash_block_size of every pool here: block sizes 2 and 4 are both allowed


def duck(req: Request) -> SimpleNamespace:
    """The request as vLLM's pool reads it (attributes only, no vLLM import)."""
    lora = (
        None
        if req.lora is None
        else SimpleNamespace(
            adapter_id=req.lora.adapter_id,
            name=req.lora.name,
            lora_name=req.lora.name,
            lora_path=req.lora.path,
        )
    )
    mm = [
        SimpleNamespace(
            identifier=f.identifier, mm_position=SimpleNamespace(offset=f.offset, length=f.length)
        )
        for f in req.mm
    ]
    return SimpleNamespace(
        block_hashes=list(req.block_hashes),
        all_token_ids=list(req.all_token_ids),
        lora_request=lora,
        mm_features=mm,
        cache_salt=req.cache_salt,
        session_id=req.session_id,
        prompt_embeds=None,
    )


def _block(pool: BlockPool, ref: object) -> Any:
    assert isinstance(ref, BlockRef)
    return pool.blocks[ref.block]


def _ids(blocks: Any) -> Any:
    return None if blocks is None else tuple(b.block_id for b in blocks)


def call(pool: BlockPool, op: Op) -> object:
    """Apply a spec operation to the implementation through its vLLM API; the spec's value."""
    if isinstance(op, GetNewBlocks):
        return _ids(pool.get_new_blocks(op.n))  # type: ignore[arg-type]
    if isinstance(op, FreeBlocks):
        return pool.free_blocks([_block(pool, r) for r in op.blocks])
    if isinstance(op, Touch):
        return pool.touch([_block(pool, r) for r in op.blocks])
    if isinstance(op, CacheBlocks):
        return pool.cache_blocks([_block(pool, r) for r in op.blocks], list(op.keys))
    if isinstance(op, GetCachedBlock):
        hit = pool.get_cached_block(op.key)  # type: ignore[arg-type]
        return None if hit is None else hit.block_id
    if isinstance(op, EvictBlocks):
        return pool.evict_blocks(list(op.block_ids))  # type: ignore[arg-type]
    if isinstance(op, ResetPrefixCache):
        return pool.reset_prefix_cache()
    if isinstance(op, TakeEvents):
        return tuple(pool.take_events())
    if isinstance(op, CacheFullBlocks):
        assert isinstance(op.request, Request)
        return pool.cache_full_blocks(
            duck(op.request),
            [_block(pool, r) for r in op.blocks],
            op.num_cached_blocks,  # type: ignore[arg-type]
            op.num_full_blocks,  # type: ignore[arg-type]
            op.block_size,  # type: ignore[arg-type]
            op.group,  # type: ignore[arg-type]
            None if op.block_mask is None else list(op.block_mask),  # type: ignore[arg-type]
        )
    if isinstance(op, CachePartialBlock):
        assert isinstance(op.request, Request)
        return pool.cache_partial_block(
            duck(op.request),
            _block(pool, op.block),
            op.num_tokens,  # type: ignore[arg-type]
            op.group,  # type: ignore[arg-type]
            op.block_size,  # type: ignore[arg-type]
            op.replace_existing_hashes,  # type: ignore[arg-type]
        )
    if isinstance(op, MoveBlockHashes):
        return pool.move_block_hashes(_block(pool, op.src), _block(pool, op.dst))
    if isinstance(op, GetCachedBlockGroups):
        return _ids(pool.get_cached_block(op.block_hash, list(op.group_ids)))  # type: ignore[arg-type]
    if isinstance(op, EmitCachedBlockEvents):
        assert isinstance(op.request, Request)
        return pool.emit_cached_block_events(
            duck(op.request),
            op.num_cached_blocks,  # type: ignore[arg-type]
            op.block_size,  # type: ignore[arg-type]
            op.group,  # type: ignore[arg-type]
        )
    raise AssertionError(op)


class Both:
    """The spec and a pool side by side; ``do`` applies one call to both and compares."""

    def __init__(
        self, n: int, events: bool = True, cls: type[BlockPool] = BlockPool, lookahead: int = 0
    ) -> None:
        self.world = World.of(
            PoolState.initial(n, True, events, hash_block_size=HSZ, lookahead=lookahead)
        )
        self.pool = cls(
            n,
            enable_caching=True,
            hash_block_size=HSZ,
            enable_kv_cache_events=events,
            num_hash_lookahead_tokens=lookahead,
        )

    @property
    def spec(self) -> PoolState:
        return self.world.pools[0]

    def do(self, op: Op) -> tuple[object, ErrorKind | None]:
        """Both results, checked equal, and the states and invariants checked after."""
        expected = self.world.apply(op)
        try:
            got: object = call(self.pool, op)
            kind = None
        except PoolError as exc:
            got, kind = None, exc.kind
        assert kind == expected.error, f"{op!r}: error {kind} but the spec says {expected.error}"
        if kind is None:
            assert got == expected.value, f"{op!r}: {got!r} but the spec says {expected.value!r}"
        assert abstract(self.pool).snapshot() == self.spec.snapshot(), f"state differs after {op!r}"
        assert check_invariants(self.pool) == [], check_invariants(self.pool)
        assert check_pool(self.spec) == []
        return expected.value, expected.error


def req(name: str, n: int, **kw: Any) -> Request:
    """A request of ``n`` hash units: tokens 0.., hashes unique to ``name``."""
    return Request(tuple(f"{name}{i}".encode() for i in range(n)), tuple(range(n * HSZ)), **kw)


def key(name: str, i: int, group: int = 0) -> bytes:
    return group_key(f"{name}{i}".encode(), group)


# -- unit tests, each on both ---------------------------------------------------------


def test_cache_full_blocks_keys_each_block_by_its_prefix_and_reports_vllm_fields() -> None:
    b = Both(6)
    b.do(GetNewBlocks(3))
    r = req("a", 6, lora=Lora(7, "ad", "/p"), cache_salt="salt", session_id="s1")
    b.do(CacheFullBlocks(r, (1, 2, 3), 0, 2, 4, 1))  # block size 4 = 2 hash units
    assert b.spec.key[1] == key("a", 1, 1) and b.spec.key[2] == key("a", 3, 1)
    assert b.spec.tokens == {1: 4, 2: 8} and b.spec.key[3] is None
    (event,) = b.do(TakeEvents())[0]  # type: ignore[misc]
    assert event == BlockStored(
        keys=(key("a", 1, 1), key("a", 3, 1)),
        block_hashes=(b"a1", b"a3"),
        parent_block_hash=None,
        token_ids=tuple(range(8)),
        block_size=4,
        lora_id=7,
        medium="GPU",
        lora_name="ad",
        extra_keys=(("ad", "salt"), ("ad",)),
        group_idx=1,
        session_id="s1",
        lookahead_token_ids=None,
    )
    # The already-cached prefix is skipped; the parent is the last cached block's hash.
    b.do(CacheFullBlocks(r, (1, 2, 3), 2, 3, 4, 1))
    (event,) = b.do(TakeEvents())[0]  # type: ignore[misc]
    assert event.block_hashes == (b"a5",) and event.parent_block_hash == b"a3"  # type: ignore[union-attr]
    assert event.token_ids == (8, 9, 10, 11)  # type: ignore[union-attr]


def test_cache_full_blocks_skips_null_and_masked_entries() -> None:
    b = Both(6)
    b.do(GetNewBlocks(3))
    b.do(CacheFullBlocks(req("a", 4), (0, 1, 2, 3), 0, 4, 2, 0, (True, True, False, True)))
    assert b.spec.key[1] == key("a", 1) and b.spec.key[2] is None and b.spec.key[3] == key("a", 3)
    (event,) = b.do(TakeEvents())[0]  # type: ignore[misc]
    assert event.block_hashes == (b"a1", b"a3")  # type: ignore[union-attr]
    # all skipped: vLLM still logs an event with no hashes
    b.do(CacheFullBlocks(req("a", 4), (0, 1, 2, 3), 2, 3, 2, 0, (False,)))
    assert b.do(TakeEvents())[0] == (
        BlockStored((), (), b"a1", (4, 5), 2, None, "GPU", None, None, 0, None, None),
    )


def test_partial_then_full_promotes_and_drops_the_old_keys() -> None:
    b = Both(4)
    b.do(GetNewBlocks(1))
    r = req("a", 2)
    assert b.do(CachePartialBlock(r, 1, 2, 0, 4))[0] == key("a", 0)
    assert b.spec.tokens == {1: 2}
    b.do(CacheFullBlocks(r, (1,), 0, 1, 4, 0))
    assert b.spec.keys_of(1) == [key("a", 1)] and b.spec.tokens == {1: 4}
    events = b.do(TakeEvents())[0]
    assert [type(e) for e in events] == [BlockStored, BlockRemoved, BlockStored]  # type: ignore[union-attr]
    assert events[1] == BlockRemoved(key("a", 0), (b"a0",), "GPU", 0)  # type: ignore[index]
    # caching the same full block again is refused: nothing shorter to promote
    assert b.do(CacheFullBlocks(r, (1,), 0, 1, 4, 0))[1] == ErrorKind.ALREADY_CACHED


def test_partial_entries_beside_a_primary_key_and_replacement() -> None:
    b = Both(4)
    b.do(GetNewBlocks(1))
    r = req("a", 4)
    b.do(CachePartialBlock(r, 1, 6, 0, 4))  # primary: 6 tokens
    b.do(CachePartialBlock(r, 1, 4, 0, 4))  # shorter: a further entry
    b.do(CachePartialBlock(r, 1, 4, 1, 4))  # another group: a further entry
    assert b.spec.keys_of(1) == [key("a", 2), key("a", 1), key("a", 1, 1)]
    assert len(b.do(TakeEvents())[0]) == 3  # type: ignore[arg-type]
    b.do(CachePartialBlock(r, 1, 4, 0, 4))  # already held: no change, no event
    assert b.do(TakeEvents())[0] == ()
    b.do(CachePartialBlock(r, 1, 8, 0, 4))  # longer than the primary: replaces every key
    assert b.spec.keys_of(1) == [key("a", 3)] and b.spec.tokens == {1: 8}
    kinds = [type(e).__name__ for e in b.do(TakeEvents())[0]]  # type: ignore[union-attr]
    assert kinds == ["BlockRemoved"] * 3 + ["BlockStored"]
    b.do(CachePartialBlock(r, 1, 2, 0, 4, replace_existing_hashes=True))
    assert b.spec.keys_of(1) == [key("a", 0)] and b.spec.tokens == {1: 2}
    assert b.do(CachePartialBlock(r, 0, 2, 0, 4))[0] is None  # the null block: None


def test_eviction_reuse_and_reset_drop_every_key() -> None:
    b = Both(4)
    b.do(GetNewBlocks(2))
    r = req("a", 4)
    b.do(CachePartialBlock(r, 1, 4, 0, 4))
    b.do(CachePartialBlock(r, 1, 2, 0, 4))
    b.do(CachePartialBlock(r, 2, 8, 0, 4))
    b.do(CachePartialBlock(r, 2, 6, 0, 4))
    b.do(EvictBlocks((1,)))
    assert b.spec.keys_of(1) == [] and len(b.spec.index) == 2
    b.do(FreeBlocks((1, 2)))
    b.do(GetNewBlocks(3))  # block 2 is reused: its keys go
    assert b.spec.index == {}
    b.do(FreeBlocks((1, 2, 3)))
    assert b.do(ResetPrefixCache())[0] is True
    assert b.do(TakeEvents())[0][-1] == AllBlocksCleared()  # type: ignore[index]


def test_move_block_hashes_moves_every_entry_without_events() -> None:
    b = Both(5)
    b.do(GetNewBlocks(3))
    r = req("a", 4)
    b.do(CachePartialBlock(r, 1, 6, 0, 4))
    b.do(CachePartialBlock(r, 1, 4, 0, 4))
    b.do(TakeEvents())
    b.do(MoveBlockHashes(1, 2))
    assert b.spec.keys_of(1) == [] and b.spec.keys_of(2) == [key("a", 2), key("a", 1)]
    assert b.spec.tokens == {2: 6} and b.do(TakeEvents())[0] == ()
    assert b.do(MoveBlockHashes(3, 1))[1] is None  # src holds nothing: a no-op
    assert b.do(MoveBlockHashes(3, 2))[1] == ErrorKind.ALREADY_CACHED  # dst keyed (vLLM asserts)
    assert b.do(MoveBlockHashes(2, 2))[1] == ErrorKind.ALREADY_CACHED
    assert b.do(MoveBlockHashes(1, 0))[1] == ErrorKind.NULL_BLOCK_MISUSE
    b.do(MoveBlockHashes(2, 3))
    b.do(FreeBlocks((3,)))
    assert b.do(MoveBlockHashes(1, 3))[1] == ErrorKind.ALREADY_CACHED  # 3 is cached, though free
    b.do(GetNewBlocks(2))  # reuses 3 and drops its keys


def test_get_cached_block_over_groups_is_all_or_nothing_oldest_first() -> None:
    b = Both(6)
    b.do(GetNewBlocks(4))
    for blk, g in ((1, 0), (2, 1), (3, 0)):
        b.do(CacheFullBlocks(req("a", 1), (blk,), 0, 1, 2, g))
    assert b.do(GetCachedBlockGroups(b"a0", (0, 1)))[0] == (1, 2)
    assert b.do(GetCachedBlockGroups(b"a0", (1, 0, 0)))[0] == (2, 1, 1)
    assert b.do(GetCachedBlockGroups(b"a0", (0, 2)))[0] is None
    assert b.do(GetCachedBlockGroups(b"a0", ()))[0] == ()
    assert b.do(GetCachedBlockGroups("a0", (0,)))[1] == ErrorKind.INVALID_ARGUMENT
    assert b.do(GetCachedBlockGroups(b"a0", (-1,)))[1] == ErrorKind.INVALID_ARGUMENT


def test_emit_cached_block_events_announces_a_hit_again() -> None:
    b = Both(4, lookahead=1)
    b.do(GetNewBlocks(2))
    r = req("a", 3, mm=(MMFeature("img", 1, 2),))
    b.do(CacheFullBlocks(r, (1, 2), 0, 2, 2, 0))
    stored = b.do(TakeEvents())[0][0]  # type: ignore[index]
    b.do(EmitCachedBlockEvents(r, 2, 2, 0))
    again = b.do(TakeEvents())[0][0]  # type: ignore[index]
    assert again == stored
    assert again.lookahead_token_ids == ((2,), (4,))  # type: ignore[union-attr]
    assert again.extra_keys == ((("img", 1),), (("img", -1),))  # type: ignore[union-attr]
    b.do(EmitCachedBlockEvents(r, 0, 2, 0))
    assert b.do(TakeEvents())[0] == ()
    assert b.do(EmitCachedBlockEvents(r, 4, 2, 0))[1] == ErrorKind.INVALID_ARGUMENT


def test_refusals_are_typed_and_change_nothing() -> None:
    b = Both(4)
    b.do(GetNewBlocks(1))
    r = req("a", 2)
    assert b.do(CacheFullBlocks(r, (1, 2), 0, 2, 2, 0))[1] == ErrorKind.BLOCK_NOT_IN_USE
    assert b.do(CacheFullBlocks(r, (1, 1), 0, 2, 2, 0))[1] == ErrorKind.INVALID_ARGUMENT
    assert b.do(CacheFullBlocks(r, (1,), 0, 1, 3, 0))[1] == ErrorKind.INVALID_ARGUMENT
    assert b.do(CacheFullBlocks(r, (1,), 0, 2, 2, 0))[1] == ErrorKind.INVALID_ARGUMENT
    assert (
        b.do(CacheFullBlocks(r, (1,), 0, 1, 2, 0, (True, False)))[1] == ErrorKind.INVALID_ARGUMENT
    )
    assert b.do(CacheFullBlocks(req("a", 0), (1,), 0, 1, 2, 0))[1] == ErrorKind.INVALID_ARGUMENT
    assert b.do(CacheFullBlocks(r, (1,), 1, 1, 2, 0))[1] is None  # nothing to cache
    assert b.do(CachePartialBlock(r, 1, 3, 0, 2))[1] == ErrorKind.INVALID_ARGUMENT
    assert b.do(CachePartialBlock(r, 1, 6, 0, 2))[1] == ErrorKind.INVALID_ARGUMENT
    assert b.do(CachePartialBlock(r, 2, 2, 0, 2))[1] == ErrorKind.BLOCK_NOT_IN_USE
    off = Both(3, events=False)
    off.world = World.of(PoolState.initial(3, False, False, hash_block_size=HSZ))
    off.pool = BlockPool(3, enable_caching=False, hash_block_size=HSZ)
    off.do(GetNewBlocks(1))
    assert off.do(CacheFullBlocks(r, (1,), 0, 1, 2, 0))[1] == ErrorKind.CACHING_DISABLED
    assert off.do(CachePartialBlock(r, 1, 2, 0, 2))[1] == ErrorKind.CACHING_DISABLED


def test_the_key_level_api_is_the_group_free_special_case() -> None:
    """cache_blocks(blocks, keys) keys blocks whole; get_cached_block(key) finds them."""
    b = Both(4)
    b.do(GetNewBlocks(2))
    b.do(CacheBlocks((1, 2), ("x", key("a", 0))))
    assert b.do(GetCachedBlock("x"))[0] == 1
    assert b.do(GetCachedBlockGroups(b"a0", (0,)))[0] == (2,)
    assert b.do(TakeEvents())[0] == (BlockStored(("x", key("a", 0))),)


def test_vllm_block_and_map_api() -> None:
    pool = BlockPool(4, True, 2)  # vLLM's positional order: hash_block_size third
    assert pool.hash_block_size == 2 and not pool.enable_kv_cache_events
    (blk,) = pool.get_new_blocks(1)
    with pytest.raises(InvalidArgument):
        blk.set_block_hash(b"k")  # a pooled block is keyed by its pool only
    with pytest.raises(InvalidArgument):
        blk.reset_hash()
    with pytest.raises(InvalidArgument):
        pool.cached_block_hash_to_block.insert(b"k", blk)
    pool.cache_partial_block(duck(req("a", 1)), blk, 2, 0, 2)
    index = pool.cached_block_hash_to_block
    assert index.get_one_block(key("a", 0)) is blk and index.contain(key("a", 0), blk.block_id)
    assert len(index) == 1 and blk.block_hash_num_tokens == 2
    loose = KVCacheBlock(9)
    loose.set_block_hash(b"k", num_tokens=4)
    assert loose.block_hash == b"k" and loose.block_hash_num_tokens == 4
    loose.reset_hash()
    assert loose.block_hash is None
    own = BlockHashToBlockMap()
    own.insert(b"k", loose)
    own.insert(b"k", blk)
    assert own.get_one_block(b"k") is loose and own.pop(b"k", 9) is loose
    assert own.pop(b"k", 9) is None and len(own) == 1
    empty = BlockPool(2, True, 2)
    empty.get_new_blocks(1)
    with pytest.raises(PoolError, match="No free blocks available"):
        empty.free_block_queue.popleft()


def test_the_metrics_collector_is_called_where_vllm_calls_it() -> None:
    calls: list[tuple[str, int]] = []

    class Collector:
        def on_block_allocated(self, b: KVCacheBlock) -> None:
            calls.append(("allocated", b.block_id))

        def on_block_evicted(self, b: KVCacheBlock) -> None:
            calls.append(("evicted", b.block_id))

        def on_block_accessed(self, b: KVCacheBlock) -> None:
            calls.append(("accessed", b.block_id))

        def reset(self) -> None:
            calls.append(("reset", -1))

    pool = BlockPool(3, True, 2, metrics_collector=Collector())
    blocks = pool.get_new_blocks(2)
    pool.touch([pool.null_block, blocks[0]])
    pool.evict_blocks([2])
    pool.free_blocks(blocks)
    pool.free_blocks(blocks[:1])
    assert pool.reset_prefix_cache()
    assert calls == [
        ("evicted", 1),
        ("allocated", 1),
        ("evicted", 2),
        ("allocated", 2),
        ("accessed", 1),
        ("evicted", 2),
        ("reset", -1),
    ]


# -- lockstep: random traces of the new operations -------------------------------------


N = 6
REQS = [req("a", 6), req("b", 6, lora=Lora(1, "l", "p")), req("c", 4, mm=(MMFeature("m", 0, 3),))]


@st.composite
def an_op(draw: st.DrawFn, ps: PoolState) -> Op:
    held = [b for b in range(1, ps.num_blocks) if ps.ref[b] > 0] or [1]
    any_block = st.integers(0, ps.num_blocks - 1)
    some_held = st.sampled_from(held)
    r = draw(st.sampled_from(REQS))
    size = draw(st.sampled_from((2, 4)))
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return GetNewBlocks(draw(st.integers(0, 3)))
    if kind == 1:
        return FreeBlocks(tuple(draw(st.lists(some_held, max_size=2))))
    if kind == 2:
        blocks = tuple(draw(st.lists(st.one_of(some_held, st.just(0)), min_size=1, max_size=3)))
        nf = draw(st.integers(0, len(blocks)))
        nc = draw(st.integers(0, nf))
        mask = draw(
            st.one_of(st.none(), st.lists(st.booleans(), min_size=nf - nc, max_size=nf - nc))
        )
        return CacheFullBlocks(
            r, blocks, nc, nf, size, draw(st.integers(0, 1)), None if mask is None else tuple(mask)
        )
    if kind in (3, 4):
        n = HSZ * draw(st.integers(1, len(r.block_hashes)))
        return CachePartialBlock(
            r, draw(some_held), n, draw(st.integers(0, 1)), size, draw(st.booleans())
        )
    if kind == 5:
        return MoveBlockHashes(draw(some_held), draw(st.one_of(some_held, any_block)))
    if kind == 6:
        h = draw(st.sampled_from([h for q in REQS for h in q.block_hashes]))
        return GetCachedBlockGroups(h, tuple(draw(st.lists(st.integers(0, 1), max_size=2))))
    if kind == 7:
        return EmitCachedBlockEvents(r, draw(st.integers(0, 2)), size, draw(st.integers(0, 1)))
    if kind == 8:
        return EvictBlocks(tuple(draw(st.lists(st.integers(1, ps.num_blocks - 1), max_size=2))))
    return draw(st.sampled_from([TakeEvents(), ResetPrefixCache(), Touch(tuple(held[:1]))]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_lockstep_of_the_vllm_operations(data: st.DataObject) -> None:
    b = Both(N)
    for _ in range(data.draw(st.integers(5, 30))):
        b.do(data.draw(an_op(b.spec)))


# -- the seeded bugs: each is caught on one trace through every new path ---------------


def exercise(cls: type[BlockPool]) -> None:
    """A fixed trace through every new code path, compared with the spec at each call."""
    b = Both(6, cls=cls)
    r = req("a", 6)
    b.do(GetNewBlocks(4))
    b.do(CachePartialBlock(r, 1, 2, 0, 4))  # partial primary
    b.do(CachePartialBlock(r, 1, 2, 0, 4))  # already held
    b.do(CacheFullBlocks(r, (1, 2, 3), 0, 3, 4, 0, (True, False, True)))  # promotion, mask
    b.do(CachePartialBlock(r, 3, 8, 0, 4))  # a further entry beside a primary key
    b.do(CachePartialBlock(r, 3, 10, 1, 4))  # a longer prefix replaces both
    b.do(CachePartialBlock(r, 2, 4, 0, 4))
    b.do(CachePartialBlock(r, 2, 2, 1, 4))
    b.do(CachePartialBlock(r, 2, 6, 0, 4))  # longer than the primary's 4: replaces both
    b.do(CachePartialBlock(r, 2, 4, 1, 4))
    b.do(TakeEvents())
    b.do(MoveBlockHashes(2, 4))
    b.do(GetCachedBlockGroups(b"a1", (0, 1)))
    b.do(GetCachedBlockGroups(b"a1", (0, 0)))
    b.do(GetCachedBlockGroups(b"a1", (0, 2)))
    b.do(TakeEvents())
    b.do(EvictBlocks((4,)))
    b.do(TakeEvents())


def test_the_real_pool_passes_the_exercise() -> None:
    exercise(BlockPool)


@pytest.mark.parametrize("mutant", mutants.VLLM_API_MUTANTS, ids=lambda m: m.name)
def test_each_vllm_api_mutant_is_caught(mutant: mutants.Mutant) -> None:
    with pytest.raises(AssertionError):
        exercise(mutant.pool_class())


def test_the_restated_invariants_see_a_block_with_a_stray_entry() -> None:
    ps = PoolState.initial(3)
    ps.entries[1] = [b"x"]  # further entries without a primary key
    assert [v.invariant for v in check_pool(ps)] == ["INV-CACHE"]
    ps = PoolState.initial(3, events=True)
    ps.key[1], ps.entries[1] = b"p", [b"q"]
    ps.index = {b"p": {1: None}, b"q": {1: None}}
    ps.view = {b"p"}  # consumers never heard of the further entry
    assert [v.invariant for v in check_pool(ps)] == ["INV-EVENTS"]
