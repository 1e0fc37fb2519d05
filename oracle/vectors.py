"""Golden vectors: traces with their expected results, generated from the spec.

A vector is a ``kvpool-trace/1`` file whose every step carries the spec's outcome
(``expected``), including the calls watchers make from inside a step (robust-level
vectors script raising and re-entrant watchers). ``vectors/golden/index.json`` lists
them with the schema version and the spec branch coverage the corpus reaches.

* ``kvpool vectors check`` -- every vector still matches the spec (:func:`check_vectors`);
* ``kvpool vectors run --target T`` -- run them on a target, no Hypothesis
  (:func:`run_vectors`);
* ``python -m kvpool.oracle.vectors generate`` -- regenerate: lockstep runs of the
  reference at every level, each run kept only if it adds spec branches (measured with
  coverage.py), until the examples run out;
* ``python -m kvpool.oracle.vectors coverage`` -- the spec's branch coverage under the
  corpus.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .conformance import (
    lockstep_config,
    oracle_machine,
    run_settings,
    trace_to_saved,
)
from .exits import BadInput
from .files import DEFAULT_LIMITS, Limits, load_trace, read_json
from .specbranches import SPEC_FILES, spec_paths  # the corpus must cover these files
from .target_base import Target
from .targets import resolve
from .traceformat import SavedTrace
from .tracereplay import Divergence, needs, replay

VECTOR_SCHEMA = "kvpool-vectors/1"
PACKAGE = Path(__file__).parent.parent
"""The ``kvpool`` package folder: in a checkout, its subfolders link to the repository's
top-level ones (``kvpool/vectors`` -> ``vectors/``); in an installed wheel they are real."""
ROOT = PACKAGE
DEFAULT_DIR = PACKAGE / "vectors" / "golden"


def _dir(where: str | Path | None) -> Path:
    return Path(where) if where else DEFAULT_DIR


def load(
    where: str | Path | None = None, limits: Limits = DEFAULT_LIMITS
) -> list[tuple[str, SavedTrace]]:
    """Every vector of the corpus in ``where``, each file checked as a trace
    (:class:`~.exits.BadInput` for an index or a vector that is not one)."""
    d = _dir(where)
    if not d.is_dir():
        raise BadInput(f"{d}: no such folder of golden vectors")
    index = read_json(d / "index.json", limits, "vector index")
    if not isinstance(index, dict) or index.get("schema") != VECTOR_SCHEMA:
        raise BadInput(f"{d / 'index.json'}: not a {VECTOR_SCHEMA} index")
    names = index.get("vectors")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BadInput(f"{d / 'index.json'}: 'vectors' must be a list of file names")
    if len(names) > limits.max_steps:
        raise BadInput(
            f"{d / 'index.json'}: {len(names):,} vectors, over the limit of "
            f"{limits.max_steps:,} (raise it with --max-file-steps)"
        )
    for name in names:  # a name is a file in this folder, never a path elsewhere
        if not name or name != Path(name).name or name in (".", ".."):
            raise BadInput(f"{d / 'index.json'}: {name!r} is not a file name in {d}")
    return [(name, load_trace(d / name, limits)) for name in names]


def check_vectors(
    where: str | Path | None = None, limits: Limits = DEFAULT_LIMITS
) -> list[tuple[str, Divergence]]:
    """The vectors whose recorded results the spec no longer gives."""
    bad = []
    for name, saved in load(where, limits):
        result = replay(saved, None, saved.level)
        if result.divergence is not None:
            bad.append((name, result.divergence))
    return bad


def not_runnable(
    target: Target, where: str | Path | None = None, limits: Limits = DEFAULT_LIMITS
) -> dict[str, list[str]]:
    """The vectors that use what ``target`` lacks, each with those capabilities (sorted)."""
    caps = set(target.capabilities)
    out = {name: sorted(needs(saved) - caps) for name, saved in load(where, limits)}
    return {name: lacking for name, lacking in out.items() if lacking}


def run_vectors(
    target: Target, where: str | Path | None = None, limits: Limits = DEFAULT_LIMITS
) -> list[tuple[str, Divergence | None]]:
    """Each vector the target can run, with its divergence (``None``: it passes). The
    others (:func:`not_runnable`) are not run, and count as neither passed nor failed."""
    skip = not_runnable(target, where, limits)
    return [
        (name, replay(saved, target, saved.level).divergence)
        for name, saved in load(where, limits)
        if name not in skip
    ]


def _arcs_of(saved: SavedTrace) -> set[tuple[str, int, int]]:
    import coverage

    cov = coverage.Coverage(branch=True, include=spec_paths(), data_file=None)
    cov.start()
    try:
        replay(saved, None, saved.level, stop=False)
    finally:
        cov.stop()
    data = cov.get_data()
    return {(f, a, b) for f in data.measured_files() for a, b in (data.arcs(f) or ())}


_MEASURE = """
import json, sys, coverage
cov = coverage.Coverage(branch=True, include=json.loads(sys.argv[2]), data_file=None)
cov.start()
from kvpool.oracle.vectors import load
from kvpool.oracle.tracereplay import replay
for _, saved in load(sys.argv[1]):
    replay(saved, None, saved.level, stop=False)
cov.stop()
out = {"statements": 0, "executed": 0, "branches": 0, "covered_branches": 0, "missing": []}
for path in json.loads(sys.argv[2]):
    a = cov._analyze(path)
    n = a.numbers
    out["statements"] += n.n_statements
    out["executed"] += n.n_executed
    out["branches"] += n.n_branches
    out["covered_branches"] += n.n_branches - n.n_missing_branches
    name = path.rsplit("/", 1)[-1]
    out["missing"] += [f"{name}:{line} (line)" for line in sorted(a.missing)]
    out["missing"] += [f"{name}:{k} -> {v}" for k, v in a.missing_branch_arcs().items()]
print(json.dumps(out))
"""


def branch_coverage(where: str | Path | None = None) -> tuple[float, list[str]]:
    """Statement and branch coverage (percent) of the spec's operations under the corpus.

    Measured in a fresh interpreter, so that the spec's modules are imported under
    coverage (their ``def`` lines count as executed, as they are).
    """
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(_dir(where)), json.dumps(spec_paths())],
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(done.stdout.strip().splitlines()[-1])
    total = r["statements"] + r["branches"]
    covered = r["executed"] + r["covered_branches"]
    return (100.0 * covered / total if total else 100.0), list(r["missing"])


def _hand_vectors() -> list[tuple[str, SavedTrace]]:
    """Written by hand: one vector per error kind, on the smallest pools that show it."""
    from kvpool.spec.ops import (
        BlockRef,
        CacheBlocks,
        EvictBlocks,
        FreeBlocks,
        GetNewBlocks,
        Touch,
        UnpinBlocks,
    )

    cases: dict[str, tuple[list[tuple[int, bool, bool]], list[Any]]] = {
        "InsufficientFreeBlocks": ([(2, True, False)], [GetNewBlocks(2)]),
        "InvalidArgument": ([(2, True, False)], [GetNewBlocks(-1), EvictBlocks((5,))]),
        "RefCountUnderflow": ([(3, True, False)], [GetNewBlocks(1), FreeBlocks((1, 1))]),
        "ForeignBlock": ([(2, True, False), (2, True, False)], [Touch((BlockRef(1, 1),))]),
        "NullBlockMisuse": ([(2, True, False)], [UnpinBlocks((0,), 1), EvictBlocks((0,))]),
        "CachingDisabled": ([(3, False, False)], [GetNewBlocks(1), CacheBlocks((1,), ("a",))]),
        "AlreadyCached": (
            [(3, True, True)],
            [GetNewBlocks(1), CacheBlocks((1,), ("a",)), CacheBlocks((1,), ("b",))],
        ),
        "BlockNotInUse": ([(3, True, False)], [CacheBlocks((1,), ("a",))]),
    }
    out = []
    for kind, (pools, ops) in cases.items():
        out.append(_hand_vector(f"kind-{kind}.json", pools, ops))
    out.append(_hand_vector("multikey-refusals.json", *_multikey_refusals()))
    return out


def _multikey_refusals() -> tuple[list[tuple[int, bool, bool]], list[Any]]:
    """vLLM's multi-key calls refused, one per check of the spec (with the valid calls
    that set each up), and the inputs that take the rare paths of their events."""
    from kvpool.spec.ops import (
        BlockRef,
        CacheBlocks,
        CacheFullBlocks,
        CachePartialBlock,
        GetCachedBlockGroups,
        GetNewBlocks,
        MMFeature,
        MoveBlockHashes,
        Request,
        TakeEvents,
    )

    r = Request((b"a", b"ab", b"abc"), tuple(range(48)))
    mm = Request(
        (b"m", b"mm", b"mmm"),
        tuple(range(48)),
        mm=(MMFeature("img", 20, 8), MMFeature("aud", 40, 4)),
    )
    odd = Request(("not bytes",), tuple(range(16)))
    mm2 = Request(
        (b"n", b"nn", b"nnn"),
        tuple(range(48)),
        mm=(MMFeature("img", 20, 8), MMFeature("aud", 40, 4)),
        cache_salt="salt",
    )
    embeds = Request((b"p",), (0,) * 16, prompt_embeds=tuple(bytes([i, 2 * i]) for i in range(16)))
    pools = [(9, True, True), (3, True, False), (3, False, False)]
    ops: list[Any] = [
        GetNewBlocks(3),  # blocks 1, 2, 3 in use; 4 free
        CacheFullBlocks("not a request", (1,), 0, 1, 16, 0),
        CacheFullBlocks(r, (1, 2), 0, 4, 16, 0),  # more blocks than listed
        CacheFullBlocks(r, (1, 2), 0, 2, 16, 0, (True,)),  # a mask of the wrong length
        CacheFullBlocks(r, (1, 2), 0, 2, 32, 0),  # one hash at block size 32, two needed
        CacheFullBlocks(odd, (1,), 0, 1, 16, 0),
        CacheFullBlocks(r, (BlockRef(1, 1),), 0, 1, 16, 0),  # another pool's
        CacheFullBlocks(r, (4,), 0, 1, 16, 0),  # free
        CacheFullBlocks(r, (1, 1), 0, 2, 16, 0),  # listed twice
        CacheBlocks((3,), ("k",)),
        CacheFullBlocks(r, (3,), 0, 1, 16, 0),  # cached, no token count: not promotable
        CachePartialBlock(r, 1, 16, 0, 16, "yes"),
        CachePartialBlock(r, 0, 16, 0, 16),  # the null block: None
        CachePartialBlock(odd, 1, 16, 0, 16),
        CachePartialBlock(r, BlockRef(2, 1), 16, 0, 16, pool=2),  # caching off
        CacheFullBlocks(mm, (1, 2, 0), 0, 3, 16, 0),  # inputs before, inside, after blocks
        MoveBlockHashes(1, 3),  # dst keyed
        MoveBlockHashes(1, 4),  # dst free
        CacheFullBlocks(r, (1,), "0", 1, 16, 0),  # a count that is no int
        CacheFullBlocks(r, (1,), 0, 1, 16, -1),  # a group out of range
        CacheFullBlocks(r, (1,), 0, 1, 24, 0),  # not a multiple of hash_block_size
        GetCachedBlockGroups(b"m", (0,)),  # a hit
        GetNewBlocks(3),  # 4, 5, 6
        # masked middle block: the event's scan passes an input that ends before a block
        CacheFullBlocks(mm2, (4, 5, 6), 0, 3, 16, 0, (True, False, True)),
        GetNewBlocks(1),  # 7
        CachePartialBlock(r, 7, 16, 1, 16),  # a primary key of 16 tokens
        CachePartialBlock(r, 7, 16, 0, 16),  # not longer: a further entry beside it
        CacheFullBlocks(r, (0, 7), 1, 2, 16, 1),  # covers 32 > 16: promoted
        CachePartialBlock(mm, 7, 48, 0, 16),  # longer; its event starts inside an input
        GetNewBlocks(1),  # 8
        CacheFullBlocks(embeds, (8,), 0, 1, 16, 0),  # prompt embeddings: a digest per block
        TakeEvents(),
    ]
    return pools, ops


def _hand_vector(name: str, pools: list[tuple[int, bool, bool]], ops: list[Any]) -> Any:
    from kvpool.spec.state import PoolState, World

    from .traceformat import op_to_json, outcome_to_json

    world = World.of(*(PoolState.initial(n, c, e) for n, c, e in pools))
    steps: list[dict[str, Any]] = [
        {"call": op_to_json(op), "expected": outcome_to_json(world.apply(op)), "nested": []}
        for op in ops
    ]
    return name, SavedTrace(pools, steps, "spec", "robust", None)


def generate(where: str | Path | None = None, examples: int = 300, seed: int = 0) -> dict[str, Any]:
    d = _dir(where)
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.json"):
        old.unlink()
    target = resolve("reference")
    kept: list[str] = []
    seen: set[tuple[str, int, int]] = set()
    from hypothesis.stateful import run_state_machine_as_test

    for level in ("exact", "robust", "safety"):
        for max_pools in (1, 3):
            config = lockstep_config(target, level, max_blocks=6, max_pools=max_pools)
            machine = oracle_machine(target, config)
            machine._hypothesis_internal_use_seed = seed
            base_teardown = machine.teardown

            def teardown(self: Any, _base: Any = base_teardown, _level: str = level) -> None:
                _base(self)
                saved = trace_to_saved(self.trace, type(self).last_actions, "spec", _level, None)
                for step in saved.steps:  # a vector records the spec's results only
                    step.pop("observed", None)
                    for n in step.get("nested", ()):
                        n.pop("observed", None)
                new = _arcs_of(saved) - seen
                if new:
                    seen.update(new)
                    name = f"{len(kept):03d}-{_level}.json"
                    saved.save(d / name)
                    kept.append(name)

            machine.teardown = teardown
            run_state_machine_as_test(machine, settings=run_settings(examples, 25, seed))
    for name, saved in _hand_vectors():
        saved.save(d / name)
        kept.append(name)
    index: dict[str, Any] = {
        "schema": VECTOR_SCHEMA,
        "trace_schema": "kvpool-trace/1",
        "vectors": kept,
    }
    (d / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    percent, missing = branch_coverage(d)
    index["spec_coverage_percent"] = round(percent, 2)
    index["spec_files"] = list(SPEC_FILES)
    index["not_covered"] = missing
    (d / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kvpool golden vectors")
    parser.add_argument("action", choices=["generate", "coverage", "check"])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--examples", type=int, default=300)
    args = parser.parse_args(argv)
    if args.action == "generate":
        index = generate(args.dir, args.examples)
        print(f"{len(index['vectors'])} vectors, spec coverage {index['spec_coverage_percent']}%")
        for m in index["not_covered"]:
            print("  not covered:", m)
        return 0
    if args.action == "coverage":
        percent, missing = branch_coverage(args.dir)
        print(f"spec statement+branch coverage under the corpus: {percent:.2f}%")
        for m in missing:
            print("  not covered:", m)
        return 0 if not missing else 1
    bad = check_vectors(args.dir)
    for name, dv in bad:
        print(f"{name}: step {dv.step}: {dv.rule}: {dv.detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
