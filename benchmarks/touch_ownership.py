"""Ideas for ``touch``'s ownership test, measured on vLLM 0.33.0's call paths (issue 13, item 5).

    PYTHONPATH=. .venv/bin/python benchmarks/touch_ownership.py [--rounds 5] [--repeats 3]
                                                                [--pools 2 --chunk 64]

Each variant is kvpool's ``BlockPool`` built from ``impl/pool.py``'s own source with a few
text patches (as ``kvpool.mutants`` builds its seeded bugs), so it measures exactly the
code it names and nothing is kept in a second copy:

* ``kvpool``: the pool as it is (per block: the exact type, then the pool's mark);
* ``pool-class``: each pool makes a class of its own, a slot-less subclass of
  ``KVCacheBlock``, and builds its blocks of it; every hot path's two tests become one,
  ``type(block) is own_class`` (an exact type, and this pool's). A prototype for the
  measurement: it does not refuse calling or subclassing that class, as a real one would;
* ``no-ownership-test``: ``touch`` with no per-block test at all (unsafe: the floor of
  any ownership test);
* ``nor-rollback-links``: nor the neighbour each unlinked block keeps for a refusal's
  rollback (so no ``unlinked`` flag, and no pass after the loop to empty those links);
* ``unlink-after-pass``: the pass only counts (a free block stays linked, and a refusal
  only gives the counts back); after it, the blocks still linked leave the queue, each
  through ``_remove`` (the idea before dancing links, without the list it kept).

Every variant replays benchmarks/vllm_paths.py's traces (the same calls of vLLM's API on
a fresh pool of each kind, each call timed, each call's fastest time over ``repeats``
replays kept, variants and vLLM's pool interleaved, the order alternating per round) and
the table gives, per call type, the ratio to vLLM's time: median over the rounds [min-max].

``--pools 2`` replays the trace on two pools of each kind in one process, ``--chunk``
calls on the first, then as many on the second, and so on (vLLM 0.33.0's pool frees
blocks of other pools: a process may hold more than one, e.g. a CPU offload pool). A class
per pool makes every block attribute read of the hot paths see more than one class there:
CPython's specialized attribute reads are per class, so they miss.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import vllm_paths as vp

import kvpool.impl.pool as _real_pool
from kvpool.impl import BlockPool

Patch = tuple[str, str]

POOL_CLASS: tuple[Patch, ...] = (
    (
        "self.blocks: list[KVCacheBlock] = [KVCacheBlock(i) for i in range(num_gpu_blocks)]",
        'self._block_cls = type("KVCacheBlock", (KVCacheBlock,), {"__slots__": ()})\n'
        "        self.blocks: list[KVCacheBlock] = "
        "[self._block_cls(i) for i in range(num_gpu_blocks)]",
    ),
    ("mark = self._weak_self", "mark = self._block_cls"),
    ("type(block) is not KVCacheBlock or block._pool is not mark", "type(block) is not mark"),
    ("type(block) is KVCacheBlock and block._pool is mark", "type(block) is mark"),
    (
        "type(blk) is not KVCacheBlock  # no block, or a proxy of one\n"
        "                    or blk._pool is not mark  # another pool's\n",
        "type(blk) is not mark\n",
    ),
    (
        "type(block) is KVCacheBlock and _holds(mine, block)",
        "type(block) is self._block_cls and _holds(mine, block)",
    ),
    (
        "    if type(block) is not KVCacheBlock:\n        raise _NotABlock\n",
        "    if type(block).__base__ is not KVCacheBlock:\n        raise _NotABlock\n",
    ),
)

NO_OWNERSHIP_TEST: tuple[Patch, ...] = (
    (
        "if type(block) is not KVCacheBlock or block._pool is not mark:\n"
        "                    raise _NotABlock\n"
        "                ref_cnt = block.ref_cnt\n",
        "ref_cnt = block.ref_cnt\n",
    ),
)

NOR_ROLLBACK: tuple[Patch, ...] = (
    *NO_OWNERSHIP_TEST,
    (
        "                    prev = block.prev_free_block\n"
        "                    self.free_block_queue._remove(block)\n"
        "                    block.prev_free_block = prev\n"
        "                    unlinked = True\n",
        "                    self.free_block_queue._remove(block)\n",
    ),
)

UNLINK_AFTER: tuple[Patch, ...] = (
    (
        "                    prev = block.prev_free_block\n"
        "                    self.free_block_queue._remove(block)\n"
        "                    block.prev_free_block = prev\n"
        "                    unlinked = True\n",
        "                    unlinked = True\n",
    ),
    (
        "                if block.prev_free_block is not None:\n"
        "                    block.prev_free_block = None\n",
        "                if block.prev_free_block is not None:\n"
        "                    self.free_block_queue._remove(block)\n",
    ),
    (
        "unlinked = list({id(b): b for b in done if b.prev_free_block is not None}.values())",
        "unlinked: list[Any] = []",
    ),
)

VARIANTS: dict[str, tuple[Patch, ...]] = {
    "kvpool": (),
    "pool-class": POOL_CLASS,
    "no-ownership-test": NO_OWNERSHIP_TEST,
    "nor-rollback-links": NOR_ROLLBACK,
    "unlink-after-pass": UNLINK_AFTER,
}


def variant(name: str) -> type[BlockPool]:
    """``BlockPool`` from impl/pool.py's source with the variant's patches (each must apply)."""
    patches = VARIANTS[name]
    if not patches:
        return BlockPool
    source = inspect.getsource(_real_pool)
    for old, new in patches:
        if old not in source:
            raise SystemExit(f"variant {name}: impl/pool.py no longer reads {old!r}")
        source = source.replace(old, new)
    namespace: dict[str, Any] = {
        "__name__": f"{_real_pool.__name__}__{name.replace('-', '_')}",
        "__package__": _real_pool.__package__,
        "__file__": _real_pool.__file__,
    }
    exec(compile(source, f"<impl/pool.py, variant {name}>", "exec"), namespace)
    cls: type[BlockPool] = namespace["BlockPool"]
    return cls


def _ids(pool: Any, actions: Sequence[vp.Action]) -> list[Any]:
    out: list[Any] = []
    for op, f, args in vp._calls(pool, actions):
        r = f(*args)
        if op == "get_new_blocks":
            out.append([b.block_id for b in r])
        elif op == "get_cached_block":
            out.append(None if r is None else [b.block_id for b in r])
    return out


def _maker(cls: type[BlockPool], num_blocks: int) -> Callable[[], Any]:
    return lambda: cls(num_blocks, True, vp.BLOCK)


def replay(
    make: Callable[[], Any], actions: Sequence[vp.Action], pools: int, chunk: int
) -> tuple[list[str], list[float]]:
    """Each call's time, on ``pools`` fresh pools taking turns ``chunk`` calls at a time."""
    per_pool = [vp._calls(make(), actions) for _ in range(pools)]
    calls: list[tuple[str, Any, tuple[Any, ...]]] = []
    for start in range(0, len(actions), chunk):
        for c in per_pool:
            calls += c[start : start + chunk]
    clock = time.perf_counter
    times: list[float] = []
    for _, f, args in calls:
        t = clock()
        f(*args)
        times.append(clock() - t)
    return [op for op, _, _ in calls], times


def run(
    variants: Sequence[str],
    rounds: int,
    repeats: int,
    pools: int,
    chunk: int,
    num_blocks: int,
    steps: int,
) -> dict[str, dict[str, list[list[float]]]]:
    """mix -> call -> per variant (in ``variants``' order), its ratio to vLLM's time per round."""
    module = vp._vllm_module()
    kinds: dict[str, Callable[[], Any]] = {
        "vllm": lambda: module.BlockPool(num_blocks, True, vp.BLOCK)
    }
    for name in variants:
        kinds[name] = _maker(variant(name), num_blocks)
    names = list(kinds)
    out: dict[str, dict[str, list[list[float]]]] = {}
    for mix in ("serving", "lookup-heavy"):
        actions = vp.record(module, mix, num_blocks, steps)
        expected = _ids(kinds["vllm"](), actions)
        for name in variants:
            if _ids(kinds[name](), actions) != expected:
                raise SystemExit(f"{name} hands out other blocks than vLLM on this trace")
        totals: dict[str, dict[str, list[float]]] = {k: {c: [] for c in vp.CALLS} for k in names}
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            best: dict[str, list[float]] = {}
            ops: list[str] = []
            for _ in range(repeats):
                for k in order:
                    ops, times = replay(kinds[k], actions, pools, chunk)
                    best[k] = list(map(min, best.get(k, times), times))
            for k in names:
                sums = dict.fromkeys(vp.CALLS, 0.0)
                for op, t in zip(ops, best[k], strict=True):
                    sums[op] += t
                for c in vp.CALLS:
                    totals[k][c].append(sums[c])
        out[mix] = {
            c: [
                [x / y for x, y in zip(totals[k][c], totals["vllm"][c], strict=True)]
                for k in variants
            ]
            for c in vp.CALLS
        }
    return out


def markdown(variants: Sequence[str], result: dict[str, dict[str, list[list[float]]]]) -> str:
    lines = [
        "| mix | call | " + " | ".join(variants) + " |",
        "| --- | --- |" + " ---: |" * len(variants),
    ]
    for mix, calls in result.items():
        for call, per_variant in calls.items():
            cells = [
                f"{statistics.median(rs):.2f} [{min(rs):.2f}-{max(rs):.2f}]" for rs in per_variant
            ]
            lines.append(f"| {mix} | `{call}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="replays per pool per round")
    parser.add_argument("--pools", type=int, default=1, help="pools of each kind, taking turns")
    parser.add_argument("--chunk", type=int, default=64, help="calls per turn (with --pools)")
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args(argv)
    result = run(
        args.variants, args.rounds, args.repeats, args.pools, args.chunk, args.blocks, args.steps
    )
    print(markdown(args.variants, result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
