"""kvpool's pool against vLLM's real BlockPool, in one process, interleaved.

    .venv/bin/python benchmarks/pool_vs_vllm.py [--reps 5] [--json FILE]
    .venv/bin/python benchmarks/pool_vs_vllm.py --memory-only

Rows:

* micro-operations of the free queue on 10,000 blocks, in pairs that leave the
  queue as it was (so every repetition measures the same thing): kvpool's public
  methods (which validate their arguments), kvpool's internal ones (which the pool
  itself calls), and vLLM's;
* a serving-like workload on pools of 1,000 / 10,000 / 100,000 blocks: requests
  with shared prefixes allocate blocks, cache the full ones, hit cached prefixes
  (``touch`` of cached free blocks), free in reverse order, and now and then unpin
  or evict. The workload is recorded once on kvpool and replayed on each pool
  through its own API (the two hand out the same block ids on valid calls, which
  the oracle checks), so both do exactly the same work;
* bytes per block after building a 100,000-block pool (tracemalloc; alone with
  ``--memory-only``).

Ratios are kvpool time / vLLM time per repetition, run back to back; the table
shows their median, min and max. Below 1.0 means kvpool is faster.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kvpool.impl import BlockPool, FreeKVCacheBlockQueue, KVCacheBlock


def load_vllm() -> tuple[ModuleType, ModuleType]:
    """vLLM's ``block_pool`` module, loaded as the oracle loads it, and the queue's home.

    The block pool module imports ``FreeKVCacheBlockQueue`` and ``KVCacheBlock``
    from ``kv_cache_utils``, so it serves for both.
    """
    from kvpool.oracle.vllm_target import load_vllm as load

    block_pool = load()
    return block_pool, block_pool


# -- micro-operations --------------------------------------------------------------------

QUEUE_BLOCKS = 10_000
BATCH = 16
MICRO_LOOPS = 20_000


def _micro(queue: Any, kind: str, checked: bool) -> float:
    """Seconds per pair of queue operations that leaves the queue unchanged."""
    popleft_n = queue.popleft_n if checked else getattr(queue, "_popleft_n", queue.popleft_n)
    append_n = queue.append_n if checked else getattr(queue, "_append_n", queue.append_n)
    prepend_n = queue.prepend_n if checked else getattr(queue, "_prepend_n", queue.prepend_n)
    remove = queue.remove if checked else getattr(queue, "_remove", queue.remove)
    middle = queue.get_all_free_blocks()[QUEUE_BLOCKS // 2]
    start = time.perf_counter()
    if kind == "popleft_n + append_n":
        for _ in range(MICRO_LOOPS):
            append_n(popleft_n(BATCH))
    elif kind == "popleft_n + prepend_n":
        for _ in range(MICRO_LOOPS):
            prepend_n(popleft_n(BATCH))
    else:  # remove from the middle, append it back
        for _ in range(MICRO_LOOPS):
            remove(middle)
            append_n([middle])
    return (time.perf_counter() - start) / MICRO_LOOPS


MICRO_KINDS = ("popleft_n + append_n", "popleft_n + prepend_n", "remove + append_n")


# -- the serving workload -------------------------------------------------------------------

Action = tuple[Any, ...]


def record_workload(num_blocks: int, steps: int, seed: int = 0) -> list[Action]:
    """A valid sequence of pool calls, by block id, recorded on kvpool's pool."""
    rng = random.Random(seed)
    pool = BlockPool(num_blocks)
    actions: list[Action] = []
    running: list[list[int]] = []
    prefixes = [[f"p{p}-{i}".encode() for i in range(8)] for p in range(max(4, num_blocks // 200))]
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.55 or not running:
            prefix = rng.choice(prefixes)
            hits: list[int] = []
            for key in prefix[: rng.randint(0, len(prefix))]:
                block = pool.get_cached_block(key)
                actions.append(("lookup", key))
                if block is None:
                    break
                hits.append(block.block_id)
            if hits:
                pool.touch([pool.blocks[i] for i in hits])
                actions.append(("touch", hits))
            n = rng.randint(1, 8)
            if n > pool.get_num_free_blocks():
                continue
            new = [b.block_id for b in pool.get_new_blocks(n)]
            actions.append(("alloc", n))
            full = new[:-1]  # the last block of a request is still being written
            keys = prefix[len(hits) : len(hits) + len(full)]
            full = full[: len(keys)]
            if full:
                pool.cache_blocks([pool.blocks[i] for i in full], keys)
                actions.append(("cache", full, keys))
            running.append(hits + new)
        elif roll < 0.93:
            ids = running.pop(rng.randrange(len(running)))
            pool.free_blocks([pool.blocks[i] for i in reversed(ids)])
            actions.append(("free", ids[::-1]))
        elif roll < 0.97:
            ids = running.pop(rng.randrange(len(running)))
            pool.unpin_blocks([pool.blocks[i] for i in ids], _ignore)
            actions.append(("unpin", ids))
        else:
            ids = [rng.randrange(1, num_blocks) for _ in range(4)]
            pool.evict_blocks(ids)
            actions.append(("evict", ids))
    return actions


def _ignore(block: object) -> None:
    return None


class _KvpoolAdapter:
    def __init__(self, num_blocks: int) -> None:
        self.pool = BlockPool(num_blocks)

    def replay(self, actions: Sequence[Action]) -> float:
        pool, blocks = self.pool, self.pool.blocks
        start = time.perf_counter()
        for a in actions:
            op = a[0]
            if op == "lookup":
                pool.get_cached_block(a[1])
            elif op == "touch":
                pool.touch([blocks[i] for i in a[1]])
            elif op == "alloc":
                pool.get_new_blocks(a[1])
            elif op == "cache":
                pool.cache_blocks([blocks[i] for i in a[1]], a[2])
            elif op == "free":
                pool.free_blocks([blocks[i] for i in a[1]])
            elif op == "unpin":
                pool.unpin_blocks([blocks[i] for i in a[1]], _ignore)
            else:
                pool.evict_blocks(a[1])
        return time.perf_counter() - start


@dataclass
class _FakeRequest:
    """The few attributes vLLM's cache_full_blocks reads with events off."""

    block_hashes: list[bytes]


class _VllmAdapter:
    def __init__(self, block_pool: ModuleType, num_blocks: int) -> None:
        self.pool = block_pool.BlockPool(num_blocks, True, hash_block_size=16)

    def replay(self, actions: Sequence[Action]) -> float:
        pool, blocks = self.pool, self.pool.blocks
        group = [0]
        start = time.perf_counter()
        for a in actions:
            op = a[0]
            if op == "lookup":
                pool.get_cached_block(a[1], group)
            elif op == "touch":
                pool.touch([blocks[i] for i in a[1]])
            elif op == "alloc":
                pool.get_new_blocks(a[1])
            elif op == "cache":
                n = len(a[1])
                pool.cache_full_blocks(
                    _FakeRequest(list(a[2])), [blocks[i] for i in a[1]], 0, n, 16, 0
                )
            elif op == "free":
                pool.free_blocks([blocks[i] for i in a[1]])
            elif op == "unpin":
                pool.unpin_blocks([blocks[i] for i in a[1]], _ignore)
            else:
                pool.evict_blocks(set(a[1]))
        return time.perf_counter() - start


# -- memory ----------------------------------------------------------------------------------


def bytes_per_block(build: Callable[[int], object], n: int = 100_000) -> float:
    gc.collect()
    tracemalloc.start()
    pool = build(n)
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del pool
    return current / n


def measure_memory(block_pool: Any = None) -> dict[str, float]:
    """Bytes per block of each pool, built with 100,000 blocks (``--memory-only``)."""
    if block_pool is None:
        block_pool, _ = load_vllm()
    return {
        "kvpool": bytes_per_block(BlockPool),
        "vllm": bytes_per_block(lambda n: block_pool.BlockPool(n, True, hash_block_size=16)),
    }


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    kvpool_us: float
    vllm_us: float
    ratios: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)


def run(
    reps: int, sizes: Sequence[int] = (1_000, 10_000, 100_000), steps: int = 20_000
) -> dict[str, Any]:
    block_pool, kv_utils = load_vllm()
    rows: list[Row] = []

    def side_by_side(name: str, ours: Callable[[], float], theirs: Callable[[], float]) -> None:
        a, b = [], []
        for _ in range(reps):
            a.append(ours())
            b.append(theirs())
        rows.append(
            Row(
                name,
                statistics.median(a) * 1e6,
                statistics.median(b) * 1e6,
                [x / y for x, y in zip(a, b, strict=True)],
            )
        )

    def our_queue() -> FreeKVCacheBlockQueue:
        return FreeKVCacheBlockQueue([KVCacheBlock(i) for i in range(QUEUE_BLOCKS)])

    def their_queue() -> Any:
        return kv_utils.FreeKVCacheBlockQueue(
            [kv_utils.KVCacheBlock(i) for i in range(QUEUE_BLOCKS)]
        )

    for kind in MICRO_KINDS:
        for checked in (True, False):
            label = f"queue {kind} ({'checked' if checked else 'internal'})"
            q1, q2 = our_queue(), their_queue()
            side_by_side(
                label,
                functools.partial(_micro, q1, kind, checked),
                functools.partial(_micro, q2, kind, True),
            )

    workload_points: list[dict[str, float]] = []
    for size in sizes:
        actions = record_workload(size, steps)
        ours_t: list[float] = []
        theirs_t: list[float] = []

        def ours(
            actions: list[Action] = actions, size: int = size, out: list[float] = ours_t
        ) -> float:
            t = _KvpoolAdapter(size).replay(actions) / len(actions)
            out.append(t)
            return t

        def theirs(
            actions: list[Action] = actions, size: int = size, out: list[float] = theirs_t
        ) -> float:
            t = _VllmAdapter(block_pool, size).replay(actions) / len(actions)
            out.append(t)
            return t

        side_by_side(f"serving workload, {size:,} blocks ({len(actions):,} calls)", ours, theirs)
        workload_points.append(
            {
                "blocks": size,
                "kvpool_us": statistics.median(ours_t) * 1e6,
                "vllm_us": statistics.median(theirs_t) * 1e6,
            }
        )

    memory = measure_memory(block_pool)
    return {
        "reps": reps,
        "rows": [
            {
                "name": r.name,
                "kvpool_us": r.kvpool_us,
                "vllm_us": r.vllm_us,
                "median": r.median,
                "min": min(r.ratios),
                "max": max(r.ratios),
            }
            for r in rows
        ],
        "workload": workload_points,
        "bytes_per_block": memory,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--memory-only", action="store_true", help="only the bytes per block, no timing"
    )
    args = parser.parse_args(argv)
    if args.memory_only:
        m = measure_memory()
        print(
            f"bytes per block (100,000-block pool): kvpool {m['kvpool']:.0f}, vLLM {m['vllm']:.0f}"
        )
        return 0
    result = run(args.reps, steps=args.steps)
    print(f"kvpool / vLLM time, {args.reps} interleaved repetitions (below 1.0: kvpool faster)")
    print(f"{'row':<62} {'kvpool us':>10} {'vLLM us':>10} {'median':>7} {'min':>6} {'max':>6}")
    for r in result["rows"]:
        print(
            f"{r['name']:<62} {r['kvpool_us']:>10.3f} {r['vllm_us']:>10.3f} "
            f"{r['median']:>7.2f} {r['min']:>6.2f} {r['max']:>6.2f}"
        )
    m = result["bytes_per_block"]
    print(f"bytes per block (100,000-block pool): kvpool {m['kvpool']:.0f}, vLLM {m['vllm']:.0f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
