"""After Hypothesis, the oracle deletes every step a failing trace does not need."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvpool import mutants
from kvpool.impl import BlockPool
from kvpool.oracle.conformance import conform
from kvpool.oracle.minimize import delete_steps
from kvpool.oracle.pytest_plugin import as_target
from kvpool.oracle.traceformat import SavedTrace, op_to_json
from kvpool.oracle.tracereplay import replay
from kvpool.spec import BlockRef, EvictBlocks, FreeBlocks, GetNewBlocks, GetNumFreeBlocks


def _trace(*ops: object) -> SavedTrace:
    return SavedTrace(
        pools=[(4, True, False)],
        steps=[{"call": op_to_json(op), "nested": []} for op in ops],  # type: ignore[arg-type]
        level="exact",
    )


def test_steps_that_do_nothing_are_deleted_and_the_rest_still_fails() -> None:
    target = as_target(mutants.get("lifo-fifo-swapped").pool_class())
    padded = _trace(
        GetNewBlocks(0),
        EvictBlocks([]),
        GetNewBlocks(2),
        GetNumFreeBlocks(),
        FreeBlocks([1, 2]),
        GetNewBlocks(0),
        GetNewBlocks(1),
    )
    assert replay(padded, target).divergence is not None
    short = delete_steps(padded, target)
    calls = [s["call"]["op"] for s in short.steps]
    # the free queue's order is compared after every call, so the free already shows it
    assert calls == ["GetNewBlocks", "FreeBlocks"], calls
    again = replay(short, target)
    assert again.divergence is not None and again.divergence.step == 2
    # the recorded outcomes are those of the short trace: a spec-only replay agrees
    assert replay(short).divergence is None


def test_a_trace_that_does_not_fail_is_left_alone() -> None:
    target = as_target("reference")
    fine = _trace(GetNewBlocks(0), GetNewBlocks(2))
    assert delete_steps(fine, target) == fine


@pytest.mark.deep
def test_conform_reports_the_shortened_trace() -> None:
    m = mutants.get("cross-pool-freed-here")
    target = as_target(m.pool_class())
    report = conform(target, "robust", 300, max_blocks=8, seed=0, max_pools=2)
    assert not report.conforms and report.trace is not None
    calls = [s for s in report.trace.steps if "call" in s]
    assert len(calls) <= 3, [s["call"] for s in calls]
    # one step fewer no longer fails: nothing left to delete
    for i in range(len(report.trace.steps)):
        shorter = replace(report.trace, steps=report.trace.steps[:i] + report.trace.steps[i + 1 :])
        result = replay(shorter, target)
        first = replay(report.trace, target).divergence
        assert result.divergence is None or first is None or result.divergence.rule != first.rule


def test_pools_no_step_names_are_dropped_and_a_named_one_is_kept() -> None:
    target = as_target(mutants.get("lifo-fifo-swapped").pool_class())
    three = replace(
        _trace(GetNewBlocks(2), FreeBlocks([1, 2]), GetNewBlocks(1)),
        pools=[(4, True, False), (3, True, False), (5, False, False)],
    )
    assert [p[0] for p in delete_steps(three, target).pools] == [4]
    # a step on pool 2 keeps pools 0..2 (the failure is on pool 2, so nothing else goes)
    on_two = replace(
        three,
        steps=[
            {"call": op_to_json(op), "nested": []}
            for op in (GetNewBlocks(2, pool=2), FreeBlocks([1, 2], pool=2), GetNewBlocks(1, pool=2))
        ],
    )
    short = delete_steps(on_two, target)
    assert len(short.pools) == 3 and replay(short, target).divergence is not None


class _CrashesOnForeignFree(BlockPool):
    """Raises (no pool error: a crash) when asked to free another pool's block."""

    def free_blocks(self, ordered_blocks, evict_first=False):  # type: ignore[no-untyped-def]
        blocks = list(ordered_blocks)
        if any(b.pool is not self for b in blocks if hasattr(b, "pool")):
            raise RuntimeError("foreign block")
        return super().free_blocks(blocks, evict_first)


def test_a_pool_whose_block_a_step_names_is_kept_even_for_a_crash() -> None:
    # Dropping pool 1 here would make the driver crash differently on the same step and
    # look like the same failure ("target crashed"): only the names guard keeps it.
    target = as_target(_CrashesOnForeignFree)
    trace = replace(
        _trace(),
        pools=[(4, True, False), (4, True, False)],
        steps=[
            {"call": op_to_json(GetNewBlocks(1, pool=1)), "nested": []},
            {"call": op_to_json(FreeBlocks([BlockRef(1, 1)], pool=0)), "nested": []},
        ],
    )
    assert replay(trace, target).divergence.rule == "target crashed"  # type: ignore[union-attr]
    assert len(delete_steps(trace, target).pools) == 2
