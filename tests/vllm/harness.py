"""Drive vLLM 0.33.0's KVCacheManager on one pool kind and record what a caller can see.

``Manager("vllm", ...)`` builds vLLM's manager on vLLM's own BlockPool; ``Manager("kvpool",
...)`` builds the same manager with ``kvpool.vllm_plugin.install()`` in force while it is
constructed, so its coordinator's pool is a ``kvpool.impl.BlockPool``. Every step returns
what vLLM's callers read (block ids per group, computed tokens) and appends a snapshot of the
pool to ``log``: the free queue in order, every ref count, every block's primary key and
token count, its further entries, and the events taken since the last step, as plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from vllm.v1.request import Request

import kvpool.vllm_plugin as plugin

BLOCK = 16
KINDS = ("vllm", "kvpool")
init_none_hash(sha256)
_HASHER = get_request_block_hasher(BLOCK, sha256)


def full_spec() -> FullAttentionSpec:
    return FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)


def window_spec(window: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=window
    )


def event_data(event: Any) -> tuple[Any, ...]:
    """An event as (class name, every field), exactly as the pool emitted it -- msgspec
    structs list their fields. (Both pools put block hashes in vLLM's external form:
    ints by default, ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``.)"""
    names = getattr(event, "__struct_fields__", None)
    if names is None:
        names = sorted(vars(event))
    return (type(event).__name__, *((n, _plain(getattr(event, n))) for n in names))


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    return value


@dataclass
class Manager:
    kind: str
    num_blocks: int = 12
    specs: tuple[Any, ...] = field(default_factory=lambda: (full_spec(),))
    events: bool = True
    log: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        groups = [KVCacheGroupSpec([f"layer{i}"], s) for i, s in enumerate(self.specs)]
        config = KVCacheConfig(
            num_blocks=self.num_blocks, kv_cache_tensors=[], kv_cache_groups=groups
        )
        if self.kind == "kvpool":
            plugin.install()
        try:
            self.manager = KVCacheManager(
                config,
                max_model_len=4096,
                scheduler_block_size=BLOCK,
                hash_block_size=BLOCK,
                enable_caching=True,
                enable_kv_cache_events=self.events,
            )
        finally:
            plugin.uninstall()
        self.pool = self.manager.block_pool
        expected = "kvpool.impl.pool" if self.kind == "kvpool" else "vllm.v1.core.block_pool"
        if type(self.pool).__module__ != expected:
            raise AssertionError(f"{self.kind} manager built on {type(self.pool)}")
        self.requests: dict[str, Request] = {}

    # -- steps --------------------------------------------------------------------------

    def add(self, rid: str, tokens: list[int]) -> tuple[Any, ...]:
        """A new request: look up its prefix, allocate the rest of its prompt, cache it."""
        req = Request(rid, tokens, SamplingParams(max_tokens=64), None, block_hasher=_HASHER)
        self.requests[rid] = req
        hit, num_computed, _ = self.manager.get_computed_blocks(req)
        hit_ids = hit.get_block_ids()
        new = self.manager.allocate_slots(req, len(tokens) - num_computed, num_computed, hit)
        if new is not None:
            req.num_computed_tokens = len(tokens)
        out = ("add", rid, num_computed, hit_ids, None if new is None else new.get_block_ids())
        return self._record(out)

    def decode(self, rid: str, token: int) -> tuple[Any, ...]:
        """One generated token: append it, allocate its slot, cache any block it filled."""
        req = self.requests[rid]
        req.append_output_token_ids(token)
        new = self.manager.allocate_slots(req, 1)
        if new is not None:
            req.num_computed_tokens += 1
        out = ("decode", rid, None if new is None else new.get_block_ids())
        return self._record(out)

    def skip_window(self, rid: str) -> tuple[Any, ...]:
        """Free blocks a sliding window no longer needs (they become null in the table)."""
        req = self.requests[rid]
        self.manager.remove_skipped_blocks(req.request_id, req.num_computed_tokens)
        return self._record(("skip", rid, self.manager.get_block_ids(rid)))

    def free(self, rid: str) -> tuple[Any, ...]:
        self.manager.free(self.requests.pop(rid))
        return self._record(("free", rid))

    def evict(self, block_ids: set[int]) -> tuple[Any, ...]:
        self.manager.evict_blocks(block_ids)
        return self._record(("evict", tuple(sorted(block_ids))))

    def reset(self) -> tuple[Any, ...]:
        return self._record(("reset", self.manager.reset_prefix_cache()))

    # -- observation ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        pool = self.pool
        further = getattr(pool, "cached_block_hashes_by_block", {})
        return {
            "free": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "num_free": pool.get_num_free_blocks(),
            "ref": [b.ref_cnt for b in pool.blocks[1:]],
            "keys": [(b.block_hash, b.block_hash_num_tokens) for b in pool.blocks],
            "further": {i: sorted(hs) for i, hs in further.items() if hs},
            "usage": self.manager.usage,
        }

    def _record(self, out: tuple[Any, ...]) -> tuple[Any, ...]:
        entry = {"out": out, **self.snapshot()}
        entry["events"] = [event_data(e) for e in self.manager.take_events()]
        self.log.append(entry)
        return out


def prompt(seed: int, n: int, prefix: list[int] | None = None) -> list[int]:
    """``n`` tokens: ``prefix`` then tokens no other seed produces."""
    head = list(prefix or [])
    return head + [1000 * (seed + 1) + i for i in range(n - len(head))]
