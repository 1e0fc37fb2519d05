"""What vLLM 0.33.0's callers reach of its BlockPool beyond the manager's calls, on kvpool.impl.

The live event queue (``kv_event_queue``), block hashes in events as vLLM's ints
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``), prompt-embedding digests in events, and the
helpers vLLM's CPU offload manager calls (``_insert_block_hash``, the queue's
``iter_blocks_after``). Where vLLM's own ``block_pool.py`` can run without torch
(``load_vllm``) the same calls go to both pools and are compared; each check has a
seeded bug it catches. (With vLLM 0.33.0 installed, tests/vllm/test_dropin_api.py makes
the same comparisons on vLLM's real classes, torch tensors included.)
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import pytest
from test_multikey import HSZ, duck

import kvpool.impl.pool as pool_module
from kvpool.impl import (
    INT_HASHES_SETTING,
    BlockNotInUse,
    BlockPool,
    BlockRemoved,
    BlockStored,
    CachingDisabled,
    ForeignBlock,
    InvalidArgument,
    NullBlockMisuse,
    external_block_hash,
)
from kvpool.oracle.vllm_target import load_vllm
from kvpool.spec import Request

KEY = b"h" * 8 + (0).to_bytes(4, "big")
REQ = Request(tuple(b"r%d" % i for i in range(6)), tuple(range(6 * HSZ + 2)))


def state(pool: BlockPool) -> tuple[Any, ...]:
    return (
        [(b.ref_cnt, b.block_hash, b.block_hash_num_tokens) for b in pool.blocks],
        pool.cached_block_hashes_by_block,
        {k: list(v) for k, v in pool._index.items()},
        [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
        list(pool.kv_event_queue),
        set(pool._event_view),
    )


@pytest.fixture(autouse=True)
def _no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INT_HASHES_SETTING, raising=False)


# -- the live event queue --------------------------------------------------------------


def cached(pool: BlockPool, n: int = 2, group: int = 0) -> list[Any]:
    blocks = pool.get_new_blocks(n)
    pool.cache_full_blocks(duck(REQ), blocks, 0, n, HSZ, group)
    return blocks


def test_the_event_queue_is_the_live_list_take_events_hands_out() -> None:
    pool = BlockPool(8, True, HSZ, True)
    queue = pool.kv_event_queue
    blocks = cached(pool)
    assert pool.kv_event_queue is queue and len(queue) == 1
    queue.append("a caller's event")  # vLLM's CPU offload manager appends its own
    pool.evict_blocks([blocks[0].block_id])
    taken = pool.take_events()
    assert taken is queue
    assert [type(e).__name__ for e in taken] == ["BlockStored", "str", "BlockRemoved"]
    assert pool.kv_event_queue == [] and pool.kv_event_queue is not queue
    assert pool.check_invariants() == []


class SharedQueuePool(BlockPool):
    """vLLM's hisparse pattern: a pool publishing into another pool's live event queue."""

    def __init__(self, *args: Any, event_owner: BlockPool, **kwargs: Any) -> None:
        self._event_owner = event_owner
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def kv_event_queue(self) -> list[Any]:
        return self._event_owner.kv_event_queue

    @kv_event_queue.setter
    def kv_event_queue(self, events: list[Any]) -> None:
        if events:
            raise AssertionError("the owner drains the queue")


def shared_story(cls: type[BlockPool]) -> list[Any]:
    owner = cls(8, True, HSZ, True)
    shared = SharedQueuePool(8, True, HSZ, True, event_owner=owner)
    cached(owner)
    cached(shared)
    first = owner.take_events()
    blocks = cached(shared, 1, group=1)
    shared.evict_blocks([blocks[0].block_id])
    assert owner.check_invariants() == [] and shared.check_invariants() == []
    return [*first, *owner.take_events()]


def test_a_subclass_can_make_the_queue_another_pools() -> None:
    events = shared_story(BlockPool)
    assert [type(e).__name__ for e in events] == [
        "BlockStored",
        "BlockStored",
        "BlockStored",
        "BlockRemoved",
    ]


def test_a_copy_of_the_queue_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded bug: events logged to the pool's own list only (kvpool's copy, before)."""

    def own_list_only(self: BlockPool, event: Any) -> None:
        self._events.append(event)
        pool_module.apply_event(self._event_view, event)

    monkeypatch.setattr(BlockPool, "_log", own_list_only)
    with pytest.raises(AssertionError):
        test_the_event_queue_is_the_live_list_take_events_hands_out()
    with pytest.raises(AssertionError):
        test_a_subclass_can_make_the_queue_another_pools()


def test_the_spec_log_follows_the_queue_it_was_written_to() -> None:
    """The bridge's pending log (``_events``) restarts when the queue is taken or emptied,
    so a pool whose events another pool drains keeps no stale log."""
    pool = BlockPool(8, True, HSZ, True)
    cached(pool)
    pool.kv_event_queue.clear()  # a caller empties the list in place
    cached(pool)
    assert len(pool._events) == 1 == len(pool.kv_event_queue)
    pool.kv_event_queue = []  # or replaces it
    cached(pool)
    assert len(pool._events) == 1


# -- block hashes as vLLM's ints -------------------------------------------------------


def test_external_block_hash_is_the_low_64_bits_big_endian() -> None:
    assert external_block_hash(bytes(24) + b"\x00\x00\x00\x00\x00\x00\x01\x02") == 0x102
    assert external_block_hash(b"\xff" * 32) == 2**64 - 1
    assert external_block_hash(b"\x01" + bytes(8)) == 0  # bit 64 is dropped


@pytest.mark.parametrize(("setting", "ints"), [(None, False), ("0", False), ("1", True)])
def test_the_setting_without_vllm_is_read_from_the_environment(
    setting: str | None, ints: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if setting is not None:
        monkeypatch.setenv(INT_HASHES_SETTING, setting)
    pool = BlockPool(8, True, HSZ, True)
    (blk,) = cached(pool, 1)
    pool.evict_blocks([blk.block_id])
    stored, gone = pool.take_events()
    assert isinstance(stored, BlockStored) and isinstance(gone, BlockRemoved)
    want = external_block_hash(b"r0") if ints else b"r0"
    assert stored.block_hashes == (want,) and gone.block_hashes == (want,)
    assert stored.keys == (b"r0" + bytes(4),)  # the key itself is the spec's, always
    assert pool.check_invariants() == []


def test_the_parent_hash_is_converted_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INT_HASHES_SETTING, "1")
    pool = BlockPool(8, True, HSZ, True)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(duck(REQ), blocks, 1, 2, HSZ, 0)
    (event,) = pool.take_events()
    assert event.parent_block_hash == external_block_hash(b"r0")
    assert pool._events == [] or pool._events[0].parent_block_hash == b"r0"


def test_a_setting_vllm_cannot_parse_is_refused_before_anything_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INT_HASHES_SETTING, "yes")
    with pytest.raises(InvalidArgument, match=INT_HASHES_SETTING):
        BlockPool(8, True, HSZ, True)
    BlockPool(8, True, HSZ, False)  # without events the setting is never read (as in vLLM)


def vllm_with_int_hashes(monkeypatch: pytest.MonkeyPatch) -> Any:
    """vLLM 0.33.0's pool module with its ``envs`` saying int hashes (its default)."""
    vllm = load_vllm("0.33.0")
    utils_globals = vllm.maybe_convert_block_hash.__globals__  # kv_cache_utils' namespace
    monkeypatch.setitem(
        utils_globals, "envs", SimpleNamespace(VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=True)
    )
    return vllm


@pytest.mark.parametrize("seed", [0, 2])
def test_int_hashes_match_vllms_on_valid_calls(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import test_vllm_dropin

    vllm = vllm_with_int_hashes(monkeypatch)
    monkeypatch.setattr(test_vllm_dropin, "load_vllm", lambda version: vllm)
    monkeypatch.setenv(INT_HASHES_SETTING, "1")
    test_vllm_dropin.test_no_deviation_from_vllm_on_valid_calls(seed, seed % 2)


def test_a_pool_ignoring_the_setting_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded bug: the setting unread (kvpool before): vLLM's events say ints, kvpool's bytes."""
    import test_vllm_dropin

    vllm = vllm_with_int_hashes(monkeypatch)
    monkeypatch.setattr(test_vllm_dropin, "load_vllm", lambda version: vllm)
    monkeypatch.setattr(pool_module, "int_event_hashes", lambda with_vllm: False)
    monkeypatch.setenv(INT_HASHES_SETTING, "1")
    with pytest.raises(AssertionError, match="events differ"):
        test_vllm_dropin.test_no_deviation_from_vllm_on_valid_calls(0, 0)


# -- prompt embeddings -----------------------------------------------------------------


WIDTH = 6  # bytes per position's embedding


def embedding_bytes(n: int) -> tuple[bytes, ...]:
    return tuple(hashlib.sha256(b"%d" % i).digest()[:WIDTH] for i in range(n))


def embeds_request(n_positions: int, form: str = "buffer") -> SimpleNamespace:
    """A request of prompt embeddings: a 2-D buffer (what kvpool reads without torch), or
    the rows as a tuple, which vLLM's code slices (its tensor_data is stood in below)."""
    rows = embedding_bytes(n_positions)
    req = duck(Request(REQ.block_hashes, (0,) * n_positions, session_id="e"))
    req.prompt_embeds = (
        memoryview(b"".join(rows)).cast("B", (n_positions, WIDTH)) if form == "buffer" else rows
    )
    req._prompt_embeds_per_block_hashes = {}  # vLLM's per-request cache (vLLM reads it)
    return req


def embeds_story(pool: Any, form: str = "buffer") -> list[Any]:
    req = embeds_request(6 * HSZ + 1, form)
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 2, HSZ, 0)
    pool.cache_full_blocks(req, blocks, 2, 3, HSZ, 0)
    wide = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, wide, 0, 2, 2 * HSZ, 1)
    (part,) = pool.get_new_blocks(1)
    pool.cache_partial_block(req, part, 5 * HSZ, 2, 2 * HSZ)
    pool.emit_cached_block_events(req, 2, HSZ, 0)
    from test_vllm_dropin import normalised

    return normalised(pool.take_events())


def test_prompt_embedding_digests_are_the_sha256_of_each_blocks_rows() -> None:
    pool = BlockPool(8, True, HSZ, True)
    req = embeds_request(3 * HSZ)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, blocks, 0, 2, HSZ, 0)
    (event,) = pool.take_events()
    rows = embedding_bytes(3 * HSZ)
    assert event.extra_keys == tuple(
        (hashlib.sha256(b"".join(rows[i * HSZ : (i + 1) * HSZ])).digest(),) for i in range(2)
    )


def test_prompt_embedding_events_match_vllms(monkeypatch: pytest.MonkeyPatch) -> None:
    vllm = load_vllm("0.33.0")
    # vLLM reads a tensor's bytes with torch (tensor_data): here its slice is rows of bytes
    utils_globals = vllm.maybe_convert_block_hash.__globals__
    monkeypatch.setitem(utils_globals, "tensor_data", b"".join)
    ours = embeds_story(BlockPool(8, True, HSZ, True))
    assert ours == embeds_story(vllm.BlockPool(8, True, HSZ, True), "rows")
    assert ours == embeds_story(BlockPool(8, True, HSZ, True), "rows")  # the spec's form


def test_wrong_embedding_rows_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded bug: the digest of the rows one position later."""
    right = pool_module.embedding_rows
    monkeypatch.setattr(
        pool_module, "embedding_rows", lambda e, *window: right(e)[1:] + right(e)[:1]
    )
    with pytest.raises(AssertionError):
        test_prompt_embedding_events_match_vllms(monkeypatch)


def test_only_the_rows_an_event_reads_are_copied() -> None:
    rows = embedding_bytes(6)
    flat = memoryview(b"".join(rows)).cast("B", (6, WIDTH))
    assert pool_module.embedding_rows(flat, 2, 4) == (b"", b"", rows[2], rows[3], b"", b"")
    assert pool_module.embedding_rows(flat) == rows
    assert pool_module.embedding_rows(flat, 5, 99) == (b"",) * 5 + (rows[5],)
    assert pool_module.embedding_rows(rows, 2, 4) is rows  # the spec's rows, as they are


def test_prompt_embeddings_that_are_no_tensor_are_refused_and_change_nothing() -> None:
    pool = BlockPool(8, True, HSZ, True)
    blocks = pool.get_new_blocks(2)
    before = state(pool)
    for bad in (object(), 3.0, memoryview(b"x").cast("B", ())):
        req = embeds_request(3 * HSZ)
        req.prompt_embeds = bad
        with pytest.raises(InvalidArgument, match="prompt_embeds"):
            pool.cache_full_blocks(req, blocks, 0, 2, HSZ, 0)
        assert state(pool) == before


# -- what vLLM's CPU offload manager calls ---------------------------------------------


def offload_story(cls: Any) -> list[Any]:
    """Walk the GPU pool's free queue, give CPU blocks every key of the cached ones."""
    gpu = cls(8, True, HSZ, True)
    cpu = cls(8, True, HSZ, True, medium="CPU")
    req = duck(REQ)
    blocks = gpu.get_new_blocks(3)
    gpu.cache_full_blocks(req, blocks, 0, 3, HSZ, 0)
    gpu.cache_partial_block(req, blocks[2], HSZ, 1, HSZ)  # a further entry of block 3
    gpu.free_blocks(blocks)
    walk = [b.block_id for b in gpu.free_block_queue.iter_blocks_after(None)]
    after = [b.block_id for b in gpu.free_block_queue.iter_blocks_after(gpu.blocks[walk[1]])]
    (held,) = gpu.get_new_blocks(1)
    none_after_held = list(gpu.free_block_queue.iter_blocks_after(held))
    out: list[Any] = [walk, after, none_after_held]
    keyed = [gpu.blocks[i] for i in walk if gpu.blocks[i].block_hash is not None]
    targets = cpu.get_new_blocks(len(keyed))
    for g, c in zip(keyed, targets, strict=True):
        cpu._insert_block_hash(g.block_hash, c, num_tokens=g.block_hash_num_tokens)
        for h in sorted(gpu.cached_block_hashes_by_block.get(g.block_id, ())):
            cpu._insert_block_hash(h, c, num_tokens=None)
        cpu._insert_block_hash(g.block_hash, c, num_tokens=7)  # held already: nothing
    cpu.free_blocks(targets)
    out.append([(b.block_hash, b.block_hash_num_tokens) for b in cpu.blocks])
    out.append({i: sorted(hs) for i, hs in cpu.cached_block_hashes_by_block.items() if hs})
    out.append(cpu.take_events())
    out.append([b.block_id for b in cpu.get_cached_block(b"r0", [0]) or ()])
    cpu.get_new_blocks(cpu.get_num_free_blocks())  # reuse drops every key, with events
    from test_vllm_dropin import normalised

    out.append(normalised(cpu.take_events()))
    if isinstance(cpu, BlockPool):
        assert cpu.check_invariants() == [] and gpu.check_invariants() == []
    return out


def test_the_offload_managers_calls_match_vllms() -> None:
    ours = offload_story(BlockPool)
    assert ours == offload_story(load_vllm("0.33.0").BlockPool)
    walk, after, none_after_held = ours[:3]
    assert len(walk) == 7 and after == walk[2:] and none_after_held == []
    assert ours[4]  # some CPU block holds a further entry


def test_an_insert_that_drops_further_entries_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded bug: a key given to a block that has a primary one is dropped."""
    right = BlockPool._insert_block_hash

    def primary_only(self: BlockPool, key: bytes, block: Any, num_tokens: int | None) -> None:
        if block.block_hash is None:
            right(self, key, block, num_tokens)

    monkeypatch.setattr(BlockPool, "_insert_block_hash", primary_only)
    assert offload_story(BlockPool) != offload_story(load_vllm("0.33.0").BlockPool)


def test_an_inserted_key_joins_the_consumers_view() -> None:
    """INV-EVENTS holds after ``_insert_block_hash`` (the caller announces the key itself);
    seeded bug: the key left out of the view is reported."""
    pool = BlockPool(4, True, HSZ, True)
    (blk,) = pool.get_new_blocks(1)
    pool._insert_block_hash(KEY, blk, num_tokens=HSZ)
    assert pool.take_events() == [] and pool.check_invariants() == []
    pool._event_view.discard(KEY)
    assert [v.invariant for v in pool.check_invariants()] == ["INV-EVENTS"]


def test_insert_block_hash_refusals_change_nothing() -> None:
    pool = BlockPool(4, True, HSZ, True)
    other = BlockPool(4, True, HSZ, True)
    blk, free = pool.get_new_blocks(2)
    pool.free_blocks([free])
    (theirs,) = other.get_new_blocks(1)
    off = BlockPool(4, False, HSZ, True)
    (off_blk,) = off.get_new_blocks(1)
    before = state(pool)
    cases: list[tuple[type[Exception], Any, Any, Any]] = [
        (InvalidArgument, b"abcd", blk, 2),  # no hash before the group id
        (InvalidArgument, "text", blk, 2),
        (InvalidArgument, KEY, blk, 0),
        (InvalidArgument, KEY, blk, True),
        (InvalidArgument, KEY, object(), 2),
        (ForeignBlock, KEY, theirs, 2),
        (NullBlockMisuse, KEY, pool.null_block, 2),
        (BlockNotInUse, KEY, free, 2),
    ]
    for kind, key, block, n in cases:
        with pytest.raises(kind):
            pool._insert_block_hash(key, block, num_tokens=n)
        assert state(pool) == before, (kind, key, n)
    with pytest.raises(CachingDisabled):
        off._insert_block_hash(KEY, off_blk, num_tokens=2)
    assert off_blk.block_hash is None


def test_iter_blocks_after_refuses_a_cursor_that_is_no_block() -> None:
    pool = BlockPool(4, True, HSZ)
    with pytest.raises(InvalidArgument):
        pool.free_block_queue.iter_blocks_after("block 1")  # type: ignore[arg-type]
    other = BlockPool(4, True, HSZ)
    last = other.free_block_queue.get_all_free_blocks()[-1]
    # a block of another queue: its walk stops before that queue's tail sentinel
    assert list(pool.free_block_queue.iter_blocks_after(last)) == []
    assert [b.block_id for b in pool.free_block_queue.iter_blocks_after(None)] == [1, 2, 3]


# -- the plugin's rebuilt subclasses ----------------------------------------------------


class _Original:
    def __init__(self, n: int) -> None:
        self.made_by = ("original", n)


class _Replacement:
    def __init__(self, n: int) -> None:
        self.made_by = ("replacement", n)


class _Sub(_Original):
    """Like vLLM's SharedEventQueueBlockPool: zero-argument super() in __init__."""

    def __init__(self, n: int, *, owner: str) -> None:
        self.owner = owner
        super().__init__(n)

    @property
    def label(self) -> str:
        return f"{type(self).__name__} of {self.owner}"


def test_a_rebuilt_subclass_calls_its_new_base() -> None:
    from kvpool.vllm_plugin import _rebase

    rebuilt = _rebase(_Sub, _Replacement, _Original)
    obj = rebuilt(3, owner="o")
    assert obj.made_by == ("replacement", 3) and obj.label == "_Sub of o"
    assert _Sub(4, owner="p").made_by == ("original", 4)  # the original is untouched


def test_a_rebuilt_subclass_whose_super_names_the_old_class_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: the methods copied as they are (the plugin before): super() refuses."""
    import kvpool.vllm_plugin as plugin

    monkeypatch.setattr(plugin, "_rebind_class_cell", lambda fn, old, new: fn)
    with pytest.raises(TypeError, match="super"):
        test_a_rebuilt_subclass_calls_its_new_base()
