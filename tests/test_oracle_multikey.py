"""vLLM 0.33.0's calls on blocks with several keys in the oracle's search (issue 13, item 4).

The lockstep machine's ``multikey`` rule makes valid ``cache_full_blocks``,
``cache_partial_block``, ``move_block_hashes``, ``get_cached_block(hash, groups)`` and
``emit_cached_block_events`` calls, and ``multikey_refused`` (a kind of invalid call, at
``robust``) their refusals. The driver runs them on any vLLM-API target: kvpool's pool,
vLLM's (through the adapter, when the release has the method), a fork's. Each test
below can fail: a seeded multi-key bug is caught only with the new rules; a saved trace
replays to the same failure; a target without a method is not given it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvpool import mutants
from kvpool.oracle.conformance import conform
from kvpool.oracle.files import load_trace
from kvpool.oracle.machine import MULTIKEY_OPS
from kvpool.oracle.targets import as_target, resolve
from kvpool.oracle.traceformat import dec, enc, op_from_json, op_to_json
from kvpool.oracle.tracereplay import replay
from kvpool.spec import BlockRemoved, BlockStored, CachePartialBlock, ErrorKind, Lora, MMFeature
from kvpool.spec.ops import BlockRef, CacheFullBlocks, Request

VALID = frozenset({"allocate", "free_request", "multikey"})
"""A search focused on the new calls (allocation gives them blocks in use)."""
REFUSALS = VALID | {"invalid_call", "multikey_refused"}


def made(report: Any) -> dict[str, dict[str, int]]:
    by_op: dict[str, dict[str, int]] = report.coverage.by_op()
    return by_op


def test_the_reference_conforms_at_exact_and_every_new_call_is_made() -> None:
    report = conform(resolve("reference"), "exact", examples=80, steps=20)
    assert report.conforms, report.message
    for name in MULTIKEY_OPS:
        assert made(report).get(name, {}).get("ok", 0) > 0, (name, report.coverage.lines())
    assert not set(MULTIKEY_OPS) & set(report.coverage.missing())


def test_the_reference_conforms_at_robust_and_each_refusal_kind_is_made() -> None:
    report = conform(resolve("reference"), "robust", examples=150, steps=20, rules=REFUSALS)
    assert report.conforms, report.message
    kinds = {k for name in MULTIKEY_OPS for k in made(report).get(name, {}) if k != "ok"}
    assert kinds == {
        str(k)
        for k in (
            ErrorKind.INVALID_ARGUMENT,
            ErrorKind.ALREADY_CACHED,
            ErrorKind.BLOCK_NOT_IN_USE,
            ErrorKind.FOREIGN_BLOCK,
            ErrorKind.NULL_BLOCK_MISUSE,
            ErrorKind.CACHING_DISABLED,
        )
    }


def without_multikey(cls: Any) -> Any:
    target = as_target(cls)
    target.capabilities = target.capabilities - set(MULTIKEY_OPS)
    return target


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("groups-lookup-partial", "result differs: value"),
        pytest.param("move-leaves-source-key", "INV-CACHE", marks=pytest.mark.deep),
    ],
)
def test_a_multikey_bug_is_caught_through_the_new_rules_and_was_not_before(
    name: str, rule: str
) -> None:
    cls = mutants.get(name).pool_class()
    caught = conform(as_target(cls), "exact", examples=150, steps=20, rules=VALID)
    assert not caught.conforms and caught.rule == rule, caught.message
    assert caught.trace is not None
    ops = {s["call"]["op"] for s in caught.trace.steps if "call" in s}
    assert ops & set(MULTIKEY_OPS)
    # the same search without the new calls (the oracle before them) passes the bug
    blind = conform(without_multikey(cls), "exact", examples=150, steps=20)
    assert blind.conforms, blind.message
    assert set(MULTIKEY_OPS) <= set(blind.coverage.missing())


def test_a_multikey_trace_saves_loads_and_replays_to_its_failure(tmp_path: Path) -> None:
    cls = mutants.get("groups-lookup-partial").pool_class()
    report = conform(as_target(cls), "exact", examples=150, steps=20, rules=VALID)
    assert report.trace is not None
    path = report.trace.save(tmp_path / "trace.json")
    loaded = load_trace(path)
    assert loaded.steps == report.trace.steps  # JSON round trip of requests, bytes, events
    again = replay(loaded, as_target(cls))
    assert again.divergence is not None and again.divergence.rule == report.rule
    assert replay(loaded, resolve("reference")).divergence is None
    assert replay(loaded).divergence is None  # the spec agrees with the trace's expectations


def test_the_trace_format_carries_requests_bytes_and_vllm_event_fields() -> None:
    req = Request(
        (b"h0:a", b"h0:ab"),
        tuple(range(32)),
        Lora(7, "ad", "/p"),
        (MMFeature("img", 3, 4),),
        "salt",
        "s1",
    )
    op = CacheFullBlocks(req, (BlockRef(0, 1), BlockRef(0, 0)), 0, 2, 16, 1, (True, False))
    assert op_from_json(op_to_json(op)) == op
    partial = CachePartialBlock(req, BlockRef(1, 2), 32, 0, 32, True, pool=1)
    assert op_from_json(op_to_json(partial)) == partial
    stored = BlockStored((b"k",), (b"h",), None, (1, 2), 16, 7, "GPU", "ad", ((("img", 1),),), 0)
    removed = BlockRemoved(b"h\x00\x00\x00\x00", (b"h",), "GPU", 0)
    for value in (stored, removed, BlockStored(("a",)), BlockRemoved("a"), b"\x00\xff"):
        assert dec(enc(value)) == value
    assert enc(BlockStored(("a",))) == {"t": "BlockStored", "v": ["a"]}  # old traces' form


@pytest.mark.parametrize(
    "call",
    [
        {"op": "CacheFullBlocks", "request": {"t": "request", "v": {"nope": 1}}},
        {"op": "CachePartialBlock", "request": {"t": "lora", "v": [1]}, "block": 1},
        {"op": "GetCachedBlockGroups", "block_hash": {"t": "bytes", "v": "zz"}, "group_ids": []},
        {"op": "TakeEvents", "pool": {"t": "BlockStored", "v": [], "f": {"evil": 1}}},
    ],
)
def test_a_malformed_multikey_call_in_a_file_is_bad_input(call: dict[str, Any]) -> None:
    from kvpool.oracle.exits import BadInput
    from kvpool.oracle.files import check_op

    with pytest.raises(BadInput):
        check_op(call, 1, "trace.json: step 1")


def test_a_vllm_api_class_without_a_method_is_not_given_its_calls() -> None:
    from kvpool.impl import BlockPool

    class NoMoves(BlockPool):
        move_block_hashes = None  # type: ignore[assignment]

    class KeyLevelLookup(BlockPool):
        def get_cached_block(self, key: Any) -> Any:  # type: ignore[override]
            return super().get_cached_block(key)

    assert "MoveBlockHashes" not in as_target(NoMoves).capabilities
    assert "GetCachedBlockGroups" not in as_target(KeyLevelLookup).capabilities
    assert set(MULTIKEY_OPS) <= as_target(BlockPool).capabilities
    assert not set(MULTIKEY_OPS) & resolve("spec").capabilities  # its get_cached_block(key)
    report = conform(as_target(NoMoves), "exact", examples=30, steps=15, rules=VALID)
    assert report.conforms and "MoveBlockHashes" in report.coverage.missing()


def test_fastcheck_makes_the_new_calls_and_catches_a_multikey_bug() -> None:
    from kvpool.oracle.fastcheck import run_random

    for events in (False, True):
        good = run_random(resolve("reference"), 3000, 64, check_every=50, events=events)
        assert good.divergence is None, good.divergence
    cls = mutants.get("groups-lookup-partial").pool_class()
    bad = run_random(as_target(cls), 3000, 64)
    assert bad.divergence is not None and "GetCachedBlockGroups" in bad.divergence
    blind = run_random(without_multikey(cls), 3000, 64)
    assert blind.divergence is None  # without the new calls the bug is not met


def test_check_log_replays_the_multikey_calls_of_kvpools_pool(tmp_path: Path) -> None:
    from kvpool.impl import BlockPool
    from kvpool.oracle.driver import RequestView
    from kvpool.oracle.tracelog import check_log, record

    req = RequestView(Request((b"a", b"ab", b"abc"), tuple(range(48)), session_id="s"))
    log = tmp_path / "pool.log"
    moves_loudly = mutants.get("move-announces-removal").pool_class()
    for cls, clean in ((BlockPool, True), (moves_loudly, False)):
        rec = record(cls(6, enable_caching=True, enable_kv_cache_events=True), log)
        a, b, c = rec.get_new_blocks(3)
        rec.cache_full_blocks(req, [a, b], 0, 2, 16, 0)
        rec.cache_partial_block(req, c, 48, 1, 16)
        rec.cache_partial_block(req, c, 32, 1, 16)  # a further entry
        assert rec.get_cached_block(b"ab", [0, 1]) == [b, c]
        (d,) = rec.get_new_blocks(1)
        rec.move_block_hashes(c, d)
        rec.emit_cached_block_events(req, 2, 16, 0)
        rec.take_events()
        rec.close()
        found = check_log(log).divergence
        assert (found is None) == clean, found
    assert found is not None and found.rule == "result differs: events"


def test_vllm_0_33_is_driven_through_its_own_multikey_methods() -> None:
    """The adapter probes vLLM 0.33.0's class; on valid multi-key calls with events off the
    search finds no deviation but the recorded one (further-entries-unordered)."""
    vllm = resolve("vllm==0.33.0")
    assert set(MULTIKEY_OPS) <= vllm.capabilities
    report = conform(vllm, "exact", examples=60, steps=20, events=False, rules=VALID)
    for name in MULTIKEY_OPS:
        assert made(report).get(name, {}).get("ok", 0) > 0, (name, report.coverage.lines())
    assert report.conforms or (
        report.rule == "state differs" and "further keys" in report.message
    ), report.message


def test_kvpools_pool_through_the_vllm_adapter_conforms_on_the_new_calls() -> None:
    """One path: kvpool.impl.BlockPool driven as a vLLM class (the adapter a release or a
    fork gets) conforms at exact and robust on the multi-key calls; a multi-key mutant of
    it does not."""
    from kvpool.impl import BlockPool
    from kvpool.oracle.targets import _probed
    from kvpool.oracle.vllm_target import class_factory

    target = _probed("impl-as-vllm", class_factory(BlockPool))
    assert set(MULTIKEY_OPS) <= target.capabilities
    for level in ("exact", "robust"):
        report = conform(target, level, examples=80, steps=20, max_blocks=6, rules=REFUSALS)
        assert report.conforms, report.message
    bad = class_factory(mutants.get("groups-lookup-partial").pool_class())
    report = conform(_probed("mutant-as-vllm", bad), "exact", 150, steps=20, rules=VALID)
    assert not report.conforms and report.rule == "result differs: value"
