"""The parts of vLLM 0.33.0's BlockPool API its callers reach past the manager, on both pools.

Each test makes the same calls on vLLM's own ``BlockPool`` and on kvpool's and compares
what a caller sees: events field by field (prompt embeddings, the live event queue a
subclass shares), the free-queue walk and the keys vLLM's CPU offload manager gives
blocks of its CPU pool (``_insert_block_hash``, ``iter_blocks_after``). Each has a seeded
bug showing the comparison can fail.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import vllm.v1.core.block_pool as vllm_pool
from harness import BLOCK, event_data
from vllm.distributed.kv_events import BlockStored
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, make_block_hash_with_group_id
from vllm.v1.request import Request

import kvpool.impl.pool as kvpool_pool
import kvpool.vllm_plugin as plugin
from kvpool.impl import BlockNotInUse, InvalidArgument
from kvpool.impl import BlockPool as KvpoolBlockPool

POOLS = {"vllm": vllm_pool.BlockPool, "kvpool": KvpoolBlockPool}


def embeds_request(rid: str, n: int, lookahead: int = 0) -> Request:
    """A request of ``n`` prompt embeddings and no token ids (vLLM's prompt-embeds path)."""
    torch.manual_seed(len(rid))
    hasher = get_request_block_hasher(BLOCK, sha256, num_hash_lookahead_tokens=lookahead)
    return Request(
        rid,
        None,
        SamplingParams(max_tokens=4),
        None,
        prompt_embeds=torch.randn(n, 8, dtype=torch.bfloat16),
        block_hasher=hasher,
    )


def embeds_story(pool: Any, lookahead: int) -> list[Any]:
    """cache_full_blocks at two block sizes, a partial entry, a re-announced hit."""
    req = embeds_request("e", 5 * BLOCK + 3, lookahead)
    out = []
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(req, blocks, 0, 2, BLOCK, 0)
    pool.cache_full_blocks(req, blocks, 2, 3, BLOCK, 0)
    out += pool.take_events()
    wide = pool.get_new_blocks(2)
    pool.cache_full_blocks(req, wide, 0, 2, 2 * BLOCK, 1)
    (part,) = pool.get_new_blocks(1)
    pool.cache_partial_block(req, part, 5 * BLOCK, 2, 2 * BLOCK)
    pool.emit_cached_block_events(req, 2, BLOCK, 0)
    out += pool.take_events()
    return [event_data(e) for e in out]


@pytest.mark.parametrize("lookahead", [0, 3])
def test_prompt_embedding_events_match_vllms(lookahead: int) -> None:
    logs = {
        kind: embeds_story(
            cls(16, True, BLOCK, True, num_hash_lookahead_tokens=lookahead), lookahead
        )
        for kind, cls in POOLS.items()
    }
    assert logs["kvpool"] == logs["vllm"]
    extra = [dict(e[1:])["extra_keys"] for e in logs["kvpool"] if e[0] == "BlockStored"]
    digests = [k for keys in extra for block in keys for k in block]
    assert digests and all(type(d) is bytes and len(d) == 32 for d in digests)


def test_a_pool_hashing_the_wrong_embedding_rows_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded bug: every row shifted by one position (the digest of the wrong slice)."""
    right = kvpool_pool.embedding_rows

    def shifted(embeds: Any, *window: Any) -> tuple[bytes, ...]:
        rows = right(embeds)
        return rows[1:] + rows[:1]

    monkeypatch.setattr(kvpool_pool, "embedding_rows", shifted)
    ours = embeds_story(KvpoolBlockPool(16, True, BLOCK, True), 0)
    theirs = embeds_story(vllm_pool.BlockPool(16, True, BLOCK, True), 0)
    assert ours != theirs


def shared_queue_story(owner_cls: type, shared_cls: type) -> list[Any]:
    """vLLM's hisparse pool: a pool publishing into its owner's live event queue."""
    owner = owner_cls(8, True, BLOCK, True)
    shared = shared_cls(8, True, BLOCK, True, event_owner=owner)
    req = Request(
        "s",
        list(range(2 * BLOCK)),
        SamplingParams(max_tokens=4),
        None,
        block_hasher=get_request_block_hasher(BLOCK, sha256),
    )
    a = owner.get_new_blocks(2)
    owner.cache_full_blocks(req, a, 0, 2, BLOCK, 0)
    b = shared.get_new_blocks(2)
    shared.cache_full_blocks(req, b, 0, 2, BLOCK, 1)
    shared.evict_blocks({b[0].block_id})
    return [event_data(e) for e in owner.take_events()] + [
        event_data(e) for e in shared.kv_event_queue
    ]


def test_a_subclass_sharing_its_owners_event_queue_works_on_kvpool() -> None:
    import vllm.v1.hisparse.block_pool as hisparse

    theirs = shared_queue_story(vllm_pool.BlockPool, hisparse.SharedEventQueueBlockPool)
    plugin.install()
    try:
        ours = shared_queue_story(KvpoolBlockPool, hisparse.SharedEventQueueBlockPool)
    finally:
        plugin.uninstall()
    assert ours == theirs
    assert [e[0] for e in ours] == ["BlockStored", "BlockStored", "BlockRemoved"]


def test_a_pool_whose_event_queue_is_a_copy_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded bug: kv_event_queue a fresh copy on every read (kvpool before this change):
    the shared pool's events never reach the owner's queue."""
    import vllm.v1.hisparse.block_pool as hisparse

    theirs = shared_queue_story(vllm_pool.BlockPool, hisparse.SharedEventQueueBlockPool)

    def log_to_a_copy(self: Any, event: Any) -> None:
        self._events.append(event)
        kvpool_pool.apply_event(self._event_view, event)

    monkeypatch.setattr(KvpoolBlockPool, "_log", log_to_a_copy)
    plugin.install()
    try:
        ours = shared_queue_story(KvpoolBlockPool, hisparse.SharedEventQueueBlockPool)
    finally:
        plugin.uninstall()
    assert ours != theirs


def offload_story(cls: type) -> list[Any]:
    """What vLLM's CPU offload manager does with a GPU pool and a CPU pool."""
    gpu = cls(8, True, BLOCK, True)
    cpu = cls(8, True, BLOCK, True, medium="CPU")
    req = Request(
        "o",
        list(range(3 * BLOCK)),
        SamplingParams(max_tokens=4),
        None,
        block_hasher=get_request_block_hasher(BLOCK, sha256),
    )
    blocks = gpu.get_new_blocks(3)
    gpu.cache_full_blocks(req, blocks, 0, 3, BLOCK, 0)
    gpu.cache_partial_block(req, blocks[2], BLOCK, 1, BLOCK)  # a further entry of block 3
    gpu.free_blocks(blocks)
    seen = []
    walk = [b.block_id for b in gpu.free_block_queue.iter_blocks_after(None)]
    cursor = gpu.blocks[walk[1]]
    after = [b.block_id for b in gpu.free_block_queue.iter_blocks_after(cursor)]
    seen.append(("walk", walk, after))
    # the offload: a CPU block per cached GPU block, every key of it, its own event
    cached = [gpu.blocks[i] for i in walk if gpu.blocks[i].block_hash is not None]
    cpu_blocks = cpu.get_new_blocks(len(cached))
    for g, c in zip(cached, cpu_blocks, strict=True):
        cpu._insert_block_hash(g.block_hash, c, num_tokens=g.block_hash_num_tokens)
        for h in sorted(gpu.cached_block_hashes_by_block.get(g.block_id, ())):
            cpu._insert_block_hash(h, c, num_tokens=None)
        cpu._insert_block_hash(g.block_hash, c, num_tokens=g.block_hash_num_tokens)  # again
        cpu.kv_event_queue.append(
            BlockStored(
                block_hashes=[7],
                parent_block_hash=None,
                token_ids=[],
                block_size=BLOCK,
                lora_id=None,
                medium="CPU",
                lora_name=None,
            )
        )
    cpu.free_blocks(cpu_blocks)
    seen.append(
        (
            "cpu",
            [(b.block_hash, b.block_hash_num_tokens) for b in cpu.blocks],
            {i: sorted(hs) for i, hs in cpu.cached_block_hashes_by_block.items() if hs},
            [b.block_id for b in cpu.free_block_queue.iter_blocks_after(None)],
            [event_data(e) for e in cpu.take_events()],
        )
    )
    key = make_block_hash_with_group_id(req.block_hashes[0], 0)
    hit = cpu.get_cached_block(req.block_hashes[0], [0])
    seen.append(("hit", key == cpu.blocks[hit[0].block_id].block_hash if hit else None))
    cpu.get_new_blocks(cpu.get_num_free_blocks())  # reuse drops every key, with events
    seen.append(("evicted", sorted(event_data(e) for e in cpu.take_events())))
    return seen


def test_the_offload_managers_calls_match_vllms() -> None:
    ours, theirs = offload_story(KvpoolBlockPool), offload_story(vllm_pool.BlockPool)
    assert ours == theirs
    assert ours[0][1] and ours[0][2] == ours[0][1][2:]


def test_a_pool_whose_insert_drops_further_entries_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: _insert_block_hash ignores a key when the block has a primary one."""
    right = KvpoolBlockPool._insert_block_hash

    def primary_only(self: Any, key: bytes, block: Any, num_tokens: int | None) -> None:
        if block.block_hash is None:
            right(self, key, block, num_tokens)

    monkeypatch.setattr(KvpoolBlockPool, "_insert_block_hash", primary_only)
    assert offload_story(KvpoolBlockPool) != offload_story(vllm_pool.BlockPool)


def test_insert_block_hash_refuses_what_vllm_would_corrupt_itself_with() -> None:
    pool = KvpoolBlockPool(4, True, BLOCK, True)
    (free,) = pool.get_new_blocks(1)
    pool.free_blocks([free])
    before = (pool.take_events(), [b.block_hash for b in pool.blocks])
    key = b"h" * 32 + bytes(4)
    with pytest.raises(BlockNotInUse):
        pool._insert_block_hash(key, free, num_tokens=16)  # vLLM keys a free block
    with pytest.raises(InvalidArgument):
        pool._insert_block_hash(b"abc", pool.blocks[1], num_tokens=16)
    assert (pool.take_events(), [b.block_hash for b in pool.blocks]) == before


def test_the_plugins_rebuilt_subclass_without_its_class_cell_rebound_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded bug: the subclass's methods copied as they are (the plugin before): its
    ``super().__init__`` names vLLM's class and refuses the rebuilt pool."""
    import vllm.v1.hisparse.block_pool as hisparse

    monkeypatch.setattr(plugin, "_rebind_class_cell", lambda fn, old, new: fn)
    plugin.install()
    try:
        with pytest.raises(TypeError, match="super"):
            shared_queue_story(KvpoolBlockPool, hisparse.SharedEventQueueBlockPool)
    finally:
        plugin.uninstall()


# the names of vLLM 0.33.0's pool classes kvpool leaves out (docs/10-vllm.md says why)
NOT_THERE = {
    "BlockPool": {
        "_reuse_watchers",
        "_notify_reuse",
        "_remove_cached_block_hashes",
        "_emit_block_removed_events",
        "_build_block_stored_event",
        "_generate_event_extra_keys",
        "_lookahead_token_ids",
        "_get_partial_block_hash",
        "_get_partial_block_parent_hash_and_start",
    },
    "BlockHashToBlockMap": {"_unexpected_blocks_type"},
    "KVCacheBlock": set(),
    "FreeKVCacheBlockQueue": set(),
}


def _names(obj: Any) -> set[str]:
    return {n for n in dir(obj) if not (n.startswith("__") and n.endswith("__"))}


def missing_names() -> dict[str, set[str]]:
    import vllm.v1.core.kv_cache_utils as utils

    import kvpool.impl as ours

    theirs = {**vars(utils), **vars(vllm_pool)}
    out = {}
    for name in NOT_THERE:
        cls = theirs[name]
        mine = getattr(ours, name)
        out[name] = _names(cls) - _names(mine)
        if name == "BlockPool":  # instance attributes too
            out[name] |= set(vars(cls(4, True, BLOCK))) - _names(mine(4, True, BLOCK))
    return out


def test_what_kvpool_leaves_out_is_what_the_docs_list() -> None:
    assert missing_names() == NOT_THERE


def test_no_vllm_module_but_the_pools_own_uses_what_kvpool_leaves_out() -> None:
    from pathlib import Path

    import vllm

    root = Path(vllm.__file__).parent
    own = {root / "v1" / "core" / "block_pool.py"}
    names = set().union(*NOT_THERE.values())
    users = {
        (str(path.relative_to(root)), name)
        for path in root.rglob("*.py")
        if path not in own
        for name in names
        if f".{name}" in path.read_text(encoding="utf-8", errors="replace")
    }
    assert users == set()


def test_a_name_lost_from_kvpools_pool_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded: kvpool without the helper vLLM's offload manager calls."""
    monkeypatch.delattr(KvpoolBlockPool, "_insert_block_hash")
    assert missing_names()["BlockPool"] == NOT_THERE["BlockPool"] | {"_insert_block_hash"}
