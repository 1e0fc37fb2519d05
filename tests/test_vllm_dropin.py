"""kvpool.impl as a drop-in for vLLM 0.33.0's BlockPool: a differential test against the real one.

vLLM 0.33.0's own ``block_pool.py`` (loaded by ``kvpool.oracle.vllm_target.load_vllm``,
without torch) and kvpool's pool get the same valid calls -- partial entries, groups,
promotions, moves, masks, null blocks, lookups over groups, re-announced hits,
eviction, reuse and reset -- and after every call the test compares what a caller
can see: results (block ids, keys), the free queue, ref counts, every block's primary
key and token count, its further entries, the index (holders in order) and the
events, field by field.

The calls are chosen by the spec: a call it refuses is not valid and is not made.
Two documented differences are kept out of the workload rather than papered over:
a key is never held by two blocks at once (vLLM announces ``BlockRemoved`` per block,
kvpool only when the last holder drops it), and the ``BlockRemoved`` events of one
block's keys are compared as a set (vLLM keeps further entries in a ``set``, whose
order is the hash seed's).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_multikey import HSZ, duck

from kvpool import mutants
from kvpool.impl import BlockPool
from kvpool.oracle.vllm_target import load_vllm
from kvpool.spec import (
    BlockRemoved,
    BlockStored,
    CacheFullBlocks,
    CachePartialBlock,
    EmitCachedBlockEvents,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlockGroups,
    GetNewBlocks,
    Lora,
    MMFeature,
    MoveBlockHashes,
    Op,
    PoolState,
    Request,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    World,
    group_key,
)

N = 8
STEPS = 1500


def requests() -> list[Request]:
    out = []
    for q, extra in enumerate(
        (
            {},
            {"lora": Lora(3, "ad", "/ad")},
            {"mm": (MMFeature("img", 0, 1),), "cache_salt": "salt"},
            {"session_id": "s"},
        )
    ):
        n = 8
        out.append(
            Request(
                tuple(f"r{q}h{i}".encode() for i in range(n)),
                tuple(100 * q + t for t in range(n * HSZ + 2)),
                **extra,  # type: ignore[arg-type]
            )
        )
    return out


REQS = requests()
DUCKS = [duck(r) for r in REQS]


def random_op(rng: random.Random, ps: PoolState) -> Op:
    held = [b for b in range(1, ps.num_blocks) if ps.ref[b] > 0] or [1]
    qi = rng.randrange(len(REQS))
    r = REQS[qi]
    size = rng.choice((2, 4))
    g = rng.randrange(2)
    kind = rng.randrange(11)
    if kind == 0:
        return GetNewBlocks(rng.randrange(4))
    if kind == 1:
        return FreeBlocks(tuple(rng.sample(held, min(len(held), rng.randrange(3)))))
    if kind in (2, 3):
        blocks = [rng.choice([*held, 0]) for _ in range(rng.randrange(1, 4))]
        nf = rng.randrange(len(blocks) + 1)
        nc = rng.randrange(nf + 1)
        mask = None if rng.random() < 0.6 else tuple(rng.random() < 0.7 for _ in range(nf - nc))
        return CacheFullBlocks(r, tuple(blocks), nc, nf, size, g, mask)
    if kind in (4, 5):
        n = HSZ * rng.randrange(1, len(r.block_hashes) + 1)
        return CachePartialBlock(r, rng.choice(held), n, g, size, rng.random() < 0.2)
    if kind == 6:
        return MoveBlockHashes(rng.choice(held), rng.choice(held))
    if kind == 7:
        h = rng.choice(r.block_hashes)
        return GetCachedBlockGroups(h, tuple(rng.randrange(2) for _ in range(rng.randrange(3))))
    if kind == 8:
        return EmitCachedBlockEvents(r, rng.randrange(3), size, g)
    if kind == 9:
        return EvictBlocks(tuple(rng.sample(range(1, ps.num_blocks), 2)))
    return rng.choice([TakeEvents(), ResetPrefixCache(), Touch((rng.choice(held),))])


def shares_a_key(ps: PoolState, op: Op) -> bool:
    """Whether ``op`` would give a key to a block while another block holds it."""
    if isinstance(op, CacheFullBlocks):
        assert isinstance(op.request, Request) and isinstance(op.block_size, int)
        scale = op.block_size // HSZ
        hashes = op.request.block_hashes
        for i in range(min(len(hashes) // scale, op.num_full_blocks)):  # type: ignore[call-overload]
            k = group_key(hashes[(i + 1) * scale - 1], op.group)  # type: ignore[arg-type]
            if k in ps.index:
                return True
    if isinstance(op, CachePartialBlock):
        assert isinstance(op.request, Request) and isinstance(op.num_tokens, int)
        k = group_key(op.request.block_hashes[op.num_tokens // HSZ - 1], op.group)  # type: ignore[arg-type]
        return any(b != op.block.block for b in ps.index.get(k, ()))  # type: ignore[union-attr]
    return False


def drive(pool: Any, op: Op) -> object:
    """Make the call on a pool with vLLM's API (vLLM's own or kvpool's); what it returned."""
    bl = pool.blocks
    if isinstance(op, GetNewBlocks):
        return [b.block_id for b in pool.get_new_blocks(op.n)]
    if isinstance(op, FreeBlocks):
        return pool.free_blocks([bl[r.block] for r in op.blocks])  # type: ignore[union-attr]
    if isinstance(op, Touch):
        return pool.touch([bl[r.block] for r in op.blocks])  # type: ignore[union-attr]
    if isinstance(op, EvictBlocks):
        return pool.evict_blocks(set(op.block_ids))
    if isinstance(op, ResetPrefixCache):
        return pool.reset_prefix_cache()
    if isinstance(op, TakeEvents):
        return None  # events are compared after every call
    if isinstance(op, CacheFullBlocks):
        return pool.cache_full_blocks(
            DUCKS[REQS.index(op.request)],  # type: ignore[arg-type]
            [bl[r.block] for r in op.blocks],  # type: ignore[union-attr]
            op.num_cached_blocks,
            op.num_full_blocks,
            op.block_size,
            op.group,
            None if op.block_mask is None else list(op.block_mask),
        )
    if isinstance(op, CachePartialBlock):
        return pool.cache_partial_block(
            request=DUCKS[REQS.index(op.request)],  # type: ignore[arg-type]
            block=bl[op.block.block],  # type: ignore[union-attr]
            num_tokens=op.num_tokens,
            kv_cache_group_id=op.group,
            block_size=op.block_size,
            replace_existing_hashes=op.replace_existing_hashes,
        )
    if isinstance(op, MoveBlockHashes):
        return pool.move_block_hashes(bl[op.src.block], bl[op.dst.block])  # type: ignore[union-attr]
    if isinstance(op, GetCachedBlockGroups):
        hit = pool.get_cached_block(op.block_hash, list(op.group_ids))
        return None if hit is None else [b.block_id for b in hit]
    if isinstance(op, EmitCachedBlockEvents):
        return pool.emit_cached_block_events(
            DUCKS[REQS.index(op.request)],  # type: ignore[arg-type]
            op.num_cached_blocks,
            op.block_size,
            op.group,
        )
    raise AssertionError(op)


def _holders(value: Any) -> list[int]:
    if isinstance(value, dict):
        return list(value)
    return [value.block_id]


def observe(pool: Any) -> dict[str, object]:
    """What a caller can read of a pool with vLLM's API (vLLM's own or kvpool's)."""
    free = []
    node = pool.free_block_queue.fake_free_list_head.next_free_block
    while node is not None and node is not pool.free_block_queue.fake_free_list_tail:
        free.append(node.block_id)
        node = node.next_free_block
    index = pool.cached_block_hash_to_block._cache
    return {
        "free": free,
        "ref": [b.ref_cnt for b in pool.blocks],
        "primary": [(b.block_hash, b.block_hash_num_tokens) for b in pool.blocks],
        "entries": {b: set(ks) for b, ks in pool.cached_block_hashes_by_block.items() if ks},
        "index": {k: _holders(v) for k, v in index.items()},
        "num_free": pool.get_num_free_blocks(),
        "usage": pool.get_usage(),
    }


def _plain(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


STORED = (
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "session_id",
    "lookahead_token_ids",
)


def event_fields(e: Any) -> tuple[str, tuple[Any, ...]]:
    name = type(e).__name__
    if name == "BlockStored":
        return name, tuple(repr(_plain(getattr(e, f, None))) for f in STORED)
    if name == "BlockRemoved":
        return name, tuple(
            repr(_plain(getattr(e, f, None))) for f in ("block_hashes", "medium", "group_idx")
        )
    return name, ()


def normalised(events: list[Any]) -> list[Any]:
    """Events as field tuples, each run of BlockRemoved as a sorted list (vLLM's set order)."""
    out: list[Any] = []
    run: list[Any] = []
    for e in map(event_fields, events):
        if e[0] == "BlockRemoved":
            run.append(e)
            continue
        if run:
            out.append(sorted(run))
            run = []
        out.append(e)
    if run:
        out.append(sorted(run))
    return out


@pytest.mark.parametrize(("seed", "lookahead"), [(0, 0), (1, 0), (2, 1), (3, 0), (4, 1)])
def test_no_deviation_from_vllm_on_valid_calls(seed: int, lookahead: int) -> None:
    vllm = load_vllm("0.33.0")
    theirs = vllm.BlockPool(
        N, True, HSZ, enable_kv_cache_events=True, num_hash_lookahead_tokens=lookahead
    )
    ours = BlockPool(N, True, HSZ, enable_kv_cache_events=True, num_hash_lookahead_tokens=lookahead)
    world = World.of(PoolState.initial(N, True, True, hash_block_size=HSZ, lookahead=lookahead))
    rng = random.Random(seed)
    used: dict[str, int] = {}
    for _ in range(STEPS):
        op = random_op(rng, world.pools[0])
        if shares_a_key(world.pools[0], op):
            continue  # keep each key on one block, even within a call (see the docstring)
        trial = world.copy()
        if not trial.apply(op).ok:
            continue  # not a valid call
        if any(len(h) > 1 for h in trial.pools[0].index.values()):
            continue  # keep each key on one block (see the module docstring)
        world = trial
        used[type(op).__name__] = used.get(type(op).__name__, 0) + 1
        got, want = drive(ours, op), drive(theirs, op)
        assert got == want, f"{op!r}: kvpool {got!r}, vLLM {want!r}"
        assert observe(ours) == observe(theirs), f"state differs after {op!r}"
        assert normalised(ours.take_events()) == normalised(theirs.take_events()), (
            f"events differ after {op!r}"
        )
    # the workload did reach the new paths
    for name in ("CacheFullBlocks", "CachePartialBlock", "MoveBlockHashes", "GetCachedBlockGroups"):
        assert used.get(name, 0) >= 5, used


def test_the_event_objects_look_like_vllms() -> None:
    pool = BlockPool(4, True, HSZ, enable_kv_cache_events=True)
    (blk,) = pool.get_new_blocks(1)
    pool.cache_full_blocks(DUCKS[1], [blk], 0, 1, HSZ, 2)
    (event,) = pool.take_events()
    assert isinstance(event, BlockStored)
    assert event.block_hashes == (b"r1h0",) and event.group_idx == 2 and event.lora_id == 3
    pool.evict_blocks([blk.block_id])
    assert pool.take_events() == [
        BlockRemoved(b"r1h0" + (2).to_bytes(4, "big"), (b"r1h0",), "GPU", 2)
    ]


@pytest.mark.parametrize("mutant", mutants.VLLM_API_MUTANTS, ids=lambda m: m.name)
def test_the_differential_catches_each_vllm_api_mutant(
    mutant: mutants.Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(globals(), "BlockPool", mutant.pool_class())
    with pytest.raises(AssertionError):
        test_no_deviation_from_vllm_on_valid_calls(0, 0)
