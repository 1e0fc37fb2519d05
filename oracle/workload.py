"""A synthetic serving workload on vLLM's real ``BlockPool``, for trace validation.

Requests share prompt prefixes (a few system prompts, then per-user text). Each
request looks its full blocks up in the prefix cache (``get_cached_block``), touches
the hits, takes fresh blocks for the rest (``get_new_blocks``), caches its full
blocks (``cache_full_blocks``), and finishes by freeing its blocks (``free_blocks``,
last block first, as vLLM's scheduler does) or, for some, by unpinning them
(``unpin_blocks``: the blocks stay readable until reused). Every few requests the
router takes the event log. Run it on ``kvpool.oracle.record(pool, LOG)`` and check
the log with ``kvpool check-log LOG``.

With ``groups > 1`` it is a hybrid model's traffic: every KV cache group keeps its
own blocks for a request in the one shared pool, lookups ask every group at once
(``get_cached_block(hash, [0, 1, ...])``, a hit only when every group has the block),
and each group caches and frees its own blocks.

    python -m kvpool.oracle.workload LOG [--requests N] [--seed S] [--groups G]
"""

from __future__ import annotations

import argparse
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

BLOCK_SIZE = 4


@dataclass
class FakeRequest:
    """What ``cache_full_blocks`` reads of a vLLM request."""

    request_id: str
    all_token_ids: list[int]
    block_hashes: list[bytes] = field(default_factory=list)
    lora_request: None = None
    cache_salt: None = None
    mm_features: tuple[()] = ()
    prompt_embeds: None = None
    session_id: None = None


def chain_hashes(tokens: list[int]) -> list[bytes]:
    """Prefix-chained block hashes of the full blocks (each covers all tokens before it)."""
    out: list[bytes] = []
    parent = b"root"
    for i in range(len(tokens) // BLOCK_SIZE):
        chunk = tokens[i * BLOCK_SIZE : (i + 1) * BLOCK_SIZE]
        parent = hashlib.sha256(parent + bytes(str(chunk), "ascii")).digest()[:16]
        out.append(parent)
    return out


def serving_workload(
    pool: Any, requests: int = 200, seed: int = 0, unpin_share: float = 0.3, groups: int = 1
) -> dict[str, int]:
    """Drive ``pool`` (vLLM's BlockPool API, possibly recorded) like a small server."""
    group_ids = list(range(groups))
    rng = random.Random(seed)
    systems = [
        [rng.randrange(1000) for _ in range(BLOCK_SIZE * rng.randint(1, 4))] for _ in range(3)
    ]
    running: list[tuple[FakeRequest, list[list[Any]]]] = []
    stats = {"requests": 0, "hits": 0, "unpinned": 0, "rejected": 0}
    reused: list[int] = []

    def on_reuse(what: Any) -> None:
        reused.append(what)

    for r in range(requests):
        prompt = list(rng.choice(systems)) + [rng.randrange(1000) for _ in range(rng.randint(0, 9))]
        req = FakeRequest(f"r{r}", prompt, chain_hashes(prompt))
        hits: list[list[Any]] = [[] for _ in group_ids]  # per group
        for h in req.block_hashes:
            found = pool.get_cached_block(h, group_ids)
            if not found:
                break
            for g in group_ids:
                hits[g].append(found[g])
        n_hits = len(hits[0])
        need = -(-len(prompt) // BLOCK_SIZE) - n_hits
        all_hits = [b for hs in hits for b in hs]

        def idle(hits: list[Any] = all_hits) -> int:  # touching takes idle hits off the queue
            return sum(1 for b in hits if b.ref_cnt == 0)

        while need * groups + idle() > pool.get_num_free_blocks() and running:
            _finish(pool, running.pop(0), rng, unpin_share, on_reuse, stats)
        if need * groups + idle() > pool.get_num_free_blocks():
            stats["rejected"] += 1
            continue
        if all_hits:
            pool.touch(all_hits)
            stats["hits"] += len(all_hits)
        full = len(prompt) // BLOCK_SIZE
        per_group = []
        for g in group_ids:
            blocks = hits[g] + pool.get_new_blocks(need)
            pool.cache_full_blocks(req, blocks, n_hits, full, BLOCK_SIZE, g)
            per_group.append(blocks)
        running.append((req, per_group))
        stats["requests"] += 1
        if len(running) > 6:
            _finish(
                pool, running.pop(rng.randrange(len(running))), rng, unpin_share, on_reuse, stats
            )
        if r % 10 == 9:
            pool.take_events()
    while running:
        _finish(pool, running.pop(), rng, unpin_share, on_reuse, stats)
    pool.take_events()
    stats["reuse_notifications"] = len(reused)
    return stats


def _finish(
    pool: Any,
    job: tuple[FakeRequest, list[list[Any]]],
    rng: random.Random,
    unpin_share: float,
    on_reuse: Any,
    stats: dict[str, int],
) -> None:
    req, per_group = job
    if rng.random() < unpin_share:

        def this_request_reused(block: Any) -> None:  # one callback per request
            on_reuse((req.request_id, block))

        for blocks in per_group:
            pool.unpin_blocks(list(reversed(blocks)), this_request_reused)
        stats["unpinned"] += 1
    else:
        for blocks in per_group:
            pool.free_blocks(list(reversed(blocks)))


def main(argv: list[str] | None = None) -> int:
    from .tracelog import check_log, record
    from .vllm_target import load_vllm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--version", default="0.33.0")
    parser.add_argument("--groups", type=int, default=1, help="KV cache groups (hybrid model)")
    parser.add_argument("--no-unpin", action="store_true", help="finish requests by freeing only")
    args = parser.parse_args(argv)
    module = load_vllm(args.version)
    pool = module.BlockPool(
        args.blocks, True, hash_block_size=BLOCK_SIZE, enable_kv_cache_events=True
    )
    rec = record(pool, args.log)
    stats = serving_workload(
        rec, args.requests, args.seed, 0.0 if args.no_unpin else 0.3, args.groups
    )
    rec.close()
    print(f"recorded {stats} to {args.log}")
    result = check_log(args.log)
    print("conforms" if result.divergence is None else f"diverges: {result.divergence}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
