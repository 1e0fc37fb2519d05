"""vLLM 0.33.0's real pool: the recorded findings (docs/errata.md) are still found.

Needs vLLM's wheel: the cached copy in $KVPOOL_CACHE (default ~/.cache/kvpool), else
it is downloaded once from PyPI with pip (about 340 MB).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kvpool.oracle.conformance import conform
from kvpool.oracle.findings import FINDINGS
from kvpool.oracle.targets import resolve
from kvpool.oracle.traceformat import SavedTrace
from kvpool.oracle.tracelog import check_log, record
from kvpool.oracle.tracereplay import replay
from kvpool.oracle.workload import serving_workload

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "findings"


@pytest.fixture(scope="module")
def vllm():  # type: ignore[no-untyped-def]
    return resolve("vllm==0.33.0")


def _vllm_or_torch() -> set[str]:
    return {m for m in sys.modules if m.split(".")[0] in ("vllm", "torch")}


def test_vllm_loads_in_isolation(vllm) -> None:  # type: ignore[no-untyped-def]
    # Loading a release (here a fresh copy, not the fixture's cached one) leaves no vllm or
    # torch module behind. Compared before/after: another test in this process may have
    # left one (see the session note on tests/test_releases.py).
    from kvpool.oracle import vllm_target

    cached = vllm_target._LOADED.pop("0.33.0", None)
    before = _vllm_or_torch()
    try:
        vllm_target.load_vllm("0.33.0")
        assert _vllm_or_torch() == before
    finally:
        if cached is not None:
            vllm_target._LOADED["0.33.0"] = cached
    assert "evict_first" not in vllm.capabilities
    assert {"UnpinBlocks", "CacheBlocks", "GetCachedBlock", "EvictBlocks"} <= vllm.capabilities


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_each_finding_is_still_found_and_reference_passes(vllm, finding) -> None:  # type: ignore[no-untyped-def]
    trace = finding.trace()
    found = replay(trace, vllm, trace.level)
    assert found.divergence is not None and found.divergence.rule == finding.rule
    assert replay(trace, resolve("reference"), trace.level).divergence is None
    saved = SavedTrace.load(VECTORS / f"{finding.name}.json")  # the file kept in the repo
    assert saved.to_json() == trace.to_json()


OTHER_TRACES = [(f, i) for f in FINDINGS for i in range(1, len(f.traces()))]

FOLDED = {
    # bad input a robust --all run met on vLLM 0.33.0 (12-05, three seeds) under a
    # signature that named no erratum: the erratum it is (its other trace shows it)
    "target crashed at GetNewBlocks: spec InvalidArgument": "negative-count",
    "target crashed at EvictBlocks: spec InvalidArgument": "evict-negative-id",
    "error kind differs at CacheFullBlocks: spec BlockNotInUse, target success": (
        "cache-free-block"
    ),
    "target crashed at UnpinBlocks: spec RefCountUnderflow": "unpin-null-block",
    "error kind differs at CacheFullBlocks: spec InvalidArgument, target success": (
        "full-blocks-unchecked"
    ),
    "error kind differs at CacheBlocks: spec InvalidArgument, target success": (
        "full-blocks-unchecked"
    ),
    "fired differs at ResetPrefixCache": "watcher-sees-half-handout",
    "target crashed at GetNewBlocks (ValueError)": "insufficient-blocks-untyped",
    "error kind differs at CacheFullBlocks: spec CachingDisabled, target success": (
        "caching-off-caches"
    ),
    "target crashed at CacheFullBlocks: spec CachingDisabled": "caching-off-caches",
    "error kind differs at CachePartialBlock: spec CachingDisabled, target success": (
        "caching-off-caches"
    ),
    "error kind differs at IsBlockWritable: spec ForeignBlock, target success": (
        "foreign-block-unchecked"
    ),
    "target crashed at UnpinBlocks: spec ForeignBlock": "foreign-block-unchecked",
    "error kind differs at CacheBlocks: spec ForeignBlock, target success": (
        "foreign-block-unchecked"
    ),
    "error kind differs at CacheFullBlocks: spec ForeignBlock, target success": (
        "foreign-block-unchecked"
    ),
    "error kind differs at EvictBlocks: spec NullBlockMisuse, target success": (
        "null-block-ignored"
    ),
    "error kind differs at CacheBlocks: spec AlreadyCached, target success": (
        "already-cached-unchecked"
    ),
    "target crashed at CacheFullBlocks: spec AlreadyCached": "already-cached-unchecked",
    "target crashed at MoveBlockHashes: spec AlreadyCached": "already-cached-unchecked",
    # met under no name by all three robust --all runs of 12-06 (sorted 12-06, issue 15)
    "error kind differs at CachePartialBlock: spec BlockNotInUse, target success": (
        "cache-free-block"
    ),
    "error kind differs at MoveBlockHashes: spec BlockNotInUse, target success": (
        "cache-free-block"
    ),
    "target crashed at EmitCachedBlockEvents: spec InvalidArgument": "emit-events-negative-count",
    "result differs: value at GetCachedBlock run by a watcher in GetNewBlocks": (
        "watcher-sees-half-handout"
    ),
    # met under no name by robust --all --seed 1 after the sort (12-06, issue 15)
    "target crashed at CacheBlocks: spec BlockNotInUse": "cache-free-block",
    # ... and by one of them each
    "error kind differs at CacheFullBlocks: spec AlreadyCached, target success": (
        "already-cached-unchecked"
    ),
    "target crashed at CacheFullBlocks: spec ForeignBlock": "foreign-block-unchecked",
    "target crashed at ResetPrefixCache (ValueError)": "insufficient-blocks-untyped",
    "error kind differs at FreeBlocks run by a watcher in ResetPrefixCache: spec "
    "RefCountUnderflow, target success": "double-free",
    "error kind differs at FreeBlocks run by a watcher in GetNewBlocks: spec "
    "RefCountUnderflow, target success": "double-free",
}


@pytest.mark.parametrize(
    ("finding", "i"), OTHER_TRACES, ids=[f"{f.name}-{i}" for f, i in OTHER_TRACES]
)
def test_each_other_trace_of_an_erratum_fails_on_vllm_and_passes_on_reference(
    vllm,  # type: ignore[no-untyped-def]
    finding,
    i: int,
) -> None:
    trace = finding.traces()[i]
    assert replay(trace, vllm, trace.level).divergence is not None
    assert replay(trace, resolve("reference"), trace.level).divergence is None


def test_every_signature_a_run_met_names_its_erratum(vllm) -> None:  # type: ignore[no-untyped-def]
    """The naming folds each further signature of an erratum into it (one erratum, one
    finding in ``--all``): each signature a robust ``--all`` run met under no name is
    named after its erratum, no signature names two errata, and each trace of an
    erratum adds a signature of its own."""
    from kvpool.oracle.conformance import errata_signatures

    known = errata_signatures(vllm, "robust")
    assert set(known) == {f.name for f in FINDINGS}
    names = {sig: name for name, sigs in known.items() for sig in sigs}
    assert sum(len(sigs) for sigs in known.values()) == len(names)  # no sig names two
    assert {sig: names.get(sig) for sig in FOLDED} == FOLDED
    for f in FINDINGS:
        assert len(known[f.name]) == len(f.traces()), (f.name, known[f.name])


def test_the_search_finds_vllm_bad_input_at_robust(vllm) -> None:  # type: ignore[no-untyped-def]
    report = conform(vllm, "robust", examples=50)
    assert not report.conforms and report.trace is not None


@pytest.mark.skipif(
    os.environ.get("KVPOOL_DEEP") != "1",
    reason="one --all run on vLLM takes minutes: make conform-vllm runs it (KVPOOL_DEEP=1)",
)
def test_one_all_run_at_robust_lists_every_erratum(vllm) -> None:  # type: ignore[no-untyped-def]
    """``kvpool conform --target vllm==0.33.0 --level robust --all`` (derandomized, the
    default budget, patience and cap) names every erratum of docs/errata.md, each with a
    trace of its own that fails on vLLM and passes on the reference pool, below the cap
    on findings (a run that stops at the cap has not shown that it lists everything)."""
    from kvpool.oracle.conformance import PATIENCE

    report = conform(vllm, "robust", keep_going=True, patience=PATIENCE)
    missing = {f.name for f in FINDINGS} - {d.erratum for d in report.findings}
    assert not missing, (missing, [d.signature for d in report.findings])
    assert not report.capped
    assert len({d.signature for d in report.findings}) == len(report.findings)
    for d in report.findings:
        assert d.trace is not None
        assert replay(d.trace, vllm, "robust").divergence is not None
        assert replay(d.trace, resolve("reference"), "robust").divergence is None


def test_serving_workload_on_vllm_diverges_in_check_log(tmp_path: Path) -> None:
    from kvpool.oracle.vllm_target import load_vllm

    pool = load_vllm("0.33.0").BlockPool(12, True, hash_block_size=4, enable_kv_cache_events=True)
    log = tmp_path / "serve.log"
    rec = record(pool, log)
    serving_workload(rec, requests=300, seed=0)
    rec.close()
    result = check_log(log)
    assert result.divergence is not None and result.divergence.rule == "fired differs"
    assert result.context  # the calls that led there


def test_hybrid_serving_workload_multi_group_lookups(tmp_path: Path) -> None:
    """Two KV cache groups in one pool: lookups of both groups at once, caching per group."""
    import json

    from kvpool.oracle.vllm_target import load_vllm

    module = load_vllm("0.33.0")
    quiet = tmp_path / "groups.log"
    rec = record(module.BlockPool(24, True, hash_block_size=4), quiet)
    serving_workload(rec, requests=150, seed=0, unpin_share=0.0, groups=2)
    rec.close()
    lines = [json.loads(x) for x in quiet.read_text().splitlines()[1:]]
    lookups = [x for x in lines if x["call"]["op"] == "GetCachedBlockGroups"]
    assert lookups and all(len(x["call"]["group_ids"]["v"]) == 2 for x in lookups)
    assert any(x["observed"]["value"] is not None for x in lookups)  # hits in both groups
    assert check_log(quiet).divergence is None
    # a wrong recorded multi-group result is reported at its line
    hit = next(i for i, x in enumerate(lines) if x in lookups and x["observed"]["value"])
    lines[hit]["observed"]["value"] = None
    header = quiet.read_text().splitlines()[0]
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join([header, *map(json.dumps, lines)]) + "\n")
    found = check_log(bad).divergence
    assert found is not None and found.step == hit + 1 and found.rule == "result differs: value"
    # with KV events on, a group that misses makes the others cache a second copy of a
    # key: vLLM's per-copy BlockRemoved (errata: removed-while-held) shows up
    loud = tmp_path / "events.log"
    rec = record(module.BlockPool(24, True, hash_block_size=4, enable_kv_cache_events=True), loud)
    serving_workload(rec, requests=150, seed=0, unpin_share=0.0, groups=2)
    rec.close()
    found = check_log(loud).divergence
    assert (
        found is not None
        and found.rule == "result differs: events"
        and "TakeEvents" in found.detail
    )


def test_record_group_block_size_mask_and_the_multikey_calls(tmp_path: Path) -> None:
    import json

    from kvpool.oracle.vllm_target import load_vllm
    from kvpool.oracle.workload import FakeRequest, chain_hashes

    pool = load_vllm("0.33.0").BlockPool(8, True, hash_block_size=4, enable_kv_cache_events=True)
    log = tmp_path / "coarse.log"
    rec = record(pool, log)
    tokens = list(range(16))
    req = FakeRequest("r", tokens, chain_hashes(tokens))  # four hashes of 4 tokens
    blocks = rec.get_new_blocks(2)
    rec.cache_full_blocks(req, blocks, 0, 2, 8, 1)  # group 1: blocks of 8 tokens
    assert rec.get_cached_block(req.block_hashes[3], [1]) == [blocks[1]]
    assert rec.get_cached_block(req.block_hashes[3], [0, 1]) is None  # group 0 misses
    masked = rec.get_new_blocks(2)
    rec.cache_full_blocks(req, masked, 0, 2, 8, 2, block_mask=[False, True])
    assert rec.get_cached_block(req.block_hashes[1], [2]) is None  # masked out
    assert rec.get_cached_block(req.block_hashes[3], [1, 2]) == [blocks[1], masked[1]]
    # vLLM's multi-key calls are modelled (kvpool-log/3): partial entries, moves, re-announces
    rec.cache_partial_block(req, masked[0], 4, 2, 8)
    rec.cache_partial_block(req, masked[0], 8, 0, 8)  # longer: replaces the shorter entry
    rec.cache_partial_block(req, masked[0], 4, 1, 8)  # a further entry beside it
    (fresh,) = rec.get_new_blocks(1)
    rec.move_block_hashes(masked[0], fresh)
    rec.emit_cached_block_events(req, 2, 8, 1)
    rec.take_events()
    rec.evict_blocks([fresh.block_id])
    rec.take_events()
    rec.close()
    assert check_log(log).divergence is None
    ops = [json.loads(x)["call"]["op"] for x in log.read_text().splitlines()[1:]]
    assert {"CachePartialBlock", "MoveBlockHashes", "EmitCachedBlockEvents"} <= set(ops)
    # a wrong recorded event field is reported at its take_events
    lines = log.read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if '"TakeEvents"' in x)
    lines[at] = lines[at].replace('"GPU"', '"CPU"', 1)
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(lines) + "\n")
    found = check_log(bad).divergence
    assert found is not None and found.step == at and found.rule == "result differs: events"
    # a kvpool-log/2 log's unmodelled record still stops the check there
    old = tmp_path / "v2.log"
    old.write_text(
        '{"schema": "kvpool-log/2", "num_blocks": 4, "caching": true, "events": false}\n'
        '{"unmodelled": "cache_partial_block"}\n'
    )
    found = check_log(old).divergence
    assert found is not None and found.rule == "unmodelled call"
    assert "cache_partial_block" in found.detail


def test_every_level_finds_a_recorded_vllm_finding(vllm) -> None:  # type: ignore[no-untyped-def]
    """What docs/errata.md says each level finds on vLLM 0.33.0 (reference: test_oracle.py)."""
    from kvpool.oracle.fastcheck import run_random

    # safety, valid use with KV events on: removed-while-held (INV-EVENTS)
    found = run_random(vllm, ops=5000, num_blocks=200, check_every=100, level="safety")
    assert found.divergence is not None and "INV-EVENTS" in found.divergence
    good = run_random(
        resolve("reference"), ops=5000, num_blocks=200, check_every=100, level="safety"
    )
    assert good.divergence is None
    # safety and exact, valid use with events off and no watchers: nothing to find
    for level in ("safety", "exact"):
        assert (
            run_random(vllm, 5000, 200, check_every=100, events=False, level=level).divergence
            is None
        )
    # exact, valid use: the search meets one of the recorded valid-use findings (which
    # first depends on the process's string hashing: unpin-one-watcher, removed-while-held,
    # further-entries-unordered), and the reference passes its minimal trace
    full = conform(vllm, "exact", examples=60)
    assert full.rule in ("state differs", "fired differs", "INV-EVENTS"), full.message
    assert full.trace is not None
    assert replay(full.trace, resolve("reference"), "exact").divergence is None
    # unpin-one-watcher (the second request's watcher replaces the first's), on the rules
    # that share and unpin requests
    report = conform(
        vllm, "exact", examples=60, rules=frozenset({"allocate", "share_request", "unpin_request"})
    )
    assert report.rule in ("state differs", "fired differs") and report.trace is not None
    assert [s["call"]["op"] for s in report.trace.steps if "call" in s][-2:] == [
        "UnpinBlocks",
        "UnpinBlocks",
    ]
    # robust, bad input: the first invalid call of the fast check is already accepted
    fast = run_random(vllm, 5000, 200, check_every=100, events=False, level="robust")
    assert fast.divergence is not None and fast.ops < 50


def test_an_event_log_erratum_is_named_whichever_rule_shows_it(vllm) -> None:  # type: ignore[no-untyped-def]
    """``--seed 1`` at exact met removed-while-held at a ``get_new_blocks`` that evicts
    both copies of a key (vLLM logs ``BlockRemoved`` twice, the spec once): INV-EVENTS
    holds after the call, so it shows as ``state differs (event log)``. Its minimal trace
    had kept 11 leading resets, whose ``AllBlocksCleared`` were part of the detail that
    minimisation must keep; the detail now shows the log from its first difference."""
    from kvpool.oracle.conformance import _divergence_signature, log_difference
    from kvpool.oracle.findings import log_erratum
    from kvpool.oracle.minimize import delete_steps
    from kvpool.oracle.traceformat import op_to_json
    from kvpool.spec.ops import CacheBlocks, FreeBlocks, GetNewBlocks, ResetPrefixCache

    ops = [ResetPrefixCache()] * 3 + [
        GetNewBlocks(2),
        CacheBlocks((1,), ("a",)),
        CacheBlocks((2,), ("a",)),
        FreeBlocks((2, 1)),
        GetNewBlocks(2),
    ]
    saved = SavedTrace(
        [(3, True, True)], [{"call": op_to_json(op)} for op in ops], "vllm==0.33.0", "exact", None
    )
    short = delete_steps(saved, vllm)
    assert [s["call"]["op"] for s in short.steps] == [
        "GetNewBlocks",
        "CacheBlocks",
        "CacheBlocks",
        "FreeBlocks",
        "GetNewBlocks",
    ]
    at = _divergence_signature(short, vllm)
    assert at is not None and at[2] == "state differs at GetNewBlocks (event log)"
    logs = log_difference(short, vllm)
    assert logs is not None and log_erratum(*logs) == "removed-while-held"
    assert replay(short, resolve("reference"), "exact").divergence is None
