"""Who failed, and what the report says: the target's crash, the oracle's own, and a
headline that is the minimal trace's own failure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from click.testing import CliRunner
from forks import shaped as forks_shaped

from kvpool import mutants
from kvpool.impl import BlockPool
from kvpool.oracle import machine as machine_module
from kvpool.oracle.cli import main
from kvpool.oracle.conformance import conform
from kvpool.oracle.exits import ORACLE_ERROR, VIOLATION
from kvpool.oracle.minimize import delete_steps
from kvpool.oracle.pytest_plugin import as_target
from kvpool.oracle.traceformat import SavedTrace, op_to_json
from kvpool.oracle.tracereplay import replay
from kvpool.spec import GetNewBlocks, GetNumFreeBlocks

ME = "test_oracle_attribution"


def _deep_inside_the_target(n: int) -> None:
    if n == 2:
        raise ValueError("boom from the target")


class CrashesOnTwo(BlockPool):
    """get_new_blocks(2) raises an exception that is no pool error."""

    def get_new_blocks(self, num_blocks: int) -> Any:
        _deep_inside_the_target(num_blocks)
        return super().get_new_blocks(num_blocks)


class CountsOneMore(BlockPool):
    """get_num_free_blocks is one too many: the detail names both numbers."""

    def get_num_free_blocks(self) -> int:
        return super().get_num_free_blocks() + 1


def test_a_target_crash_is_a_finding_with_the_targets_traceback() -> None:
    report = conform(as_target(CrashesOnTwo), "exact", 100, max_blocks=8, max_pools=1)
    assert report.rule == "target crashed", report.message
    assert "get_new_blocks raised ValueError: boom from the target" in report.message
    assert report.crash is not None
    assert "_deep_inside_the_target" in report.crash
    assert report.to_json()["target_traceback"] == report.crash


def test_the_cli_prints_the_targets_traceback_under_a_crash() -> None:
    result = CliRunner().invoke(
        main, ["conform", "-t", f"python:{ME}:CrashesOnTwo", "-n", "100", "--max-pools", "1"]
    )
    assert result.exit_code == VIOLATION, result.output
    assert "the target's traceback:" in result.output
    assert "_deep_inside_the_target" in result.output


def test_a_crash_of_the_oracle_itself_is_an_oracle_error_not_the_targets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a seeded bug in the oracle: comparing two outcomes raises
    def broken(self: Any, *a: Any, **k: Any) -> None:
        raise RuntimeError("a bug in the oracle")

    monkeypatch.setattr(machine_module._Lockstep, "compare", broken)
    with pytest.raises(RuntimeError, match="a bug in the oracle"):
        conform(as_target("reference"), "exact", 5, max_blocks=4, max_pools=1)
    result = CliRunner().invoke(main, ["conform", "-t", "reference", "-n", "5"])
    assert result.exit_code == ORACLE_ERROR, result.output
    assert "target crashed" not in result.output
    assert "internal error of the oracle" in result.stderr


def test_a_state_reader_that_raises_is_the_targets_crash_not_a_skipped_check() -> None:
    target = as_target("reference")

    def unreadable(driver: Any, i: int) -> Any:
        raise AttributeError("no such field in this target")

    broken = replace(target, state_check=unreadable)
    report = conform(broken, "exact", 5, max_blocks=4, max_pools=1)
    assert report.rule == "target crashed", report.message
    assert "reading pool 0's state raised AttributeError" in report.message
    saved = SavedTrace([(4, True, False)], [{"call": op_to_json(GetNewBlocks(1))}], level="exact")
    found = replay(saved, broken).divergence
    assert found is not None and found.rule == "target crashed"
    assert "no such field" in found.traceback


def _trace(*ops: Any) -> SavedTrace:
    return SavedTrace(
        pools=[(4, True, False)],
        steps=[{"call": op_to_json(op), "nested": []} for op in ops],
        level="exact",
    )


def test_minimisation_keeps_the_same_failure_not_just_the_same_rule() -> None:
    target = as_target(CountsOneMore)
    trace = _trace(GetNewBlocks(1), GetNumFreeBlocks())
    first = replay(trace, target).divergence
    assert first is not None and first.rule == "result differs: value"
    assert "spec 2, target 3" in first.detail
    # deleting the GetNewBlocks keeps the rule but changes the failure (spec 3, target
    # 4): a minimiser that compared rules only would take it
    fewer = _trace(GetNumFreeBlocks())
    other = replay(fewer, target).divergence
    assert other is not None and other.rule == first.rule and other.detail != first.detail
    short = delete_steps(trace, target)
    again = replay(short, target).divergence
    assert again is not None and (again.rule, again.detail) == (first.rule, first.detail)


@pytest.mark.parametrize("name", ["lifo-fifo-swapped", "cross-pool-freed-here", "null-touched"])
def test_the_headline_is_the_minimal_traces_own_failure(name: str) -> None:
    target = as_target(mutants.get(name).pool_class())
    report = conform(target, "robust", 200, max_blocks=8, seed=0, max_pools=2)
    assert not report.conforms and report.trace is not None
    found = replay(report.trace, target, report.level).divergence
    assert found is not None
    assert report.rule == found.rule
    assert report.message == f"{found.rule}: {found.detail}"
    assert report.trace.violation == {"rule": found.rule, "message": report.message}


class BackFirst(BlockPool):
    """Hands out the blocks at the back of the free queue: a different eviction order,
    which ``safety`` allows (the invariants still hold)."""

    def get_new_blocks(self, num_blocks: int) -> Any:
        if not 0 < num_blocks < self.get_num_free_blocks():
            return super().get_new_blocks(num_blocks)
        every = super().get_new_blocks(self.get_num_free_blocks())
        self.free_blocks(every[:-num_blocks])
        return every[-num_blocks:]


def test_replay_follows_the_targets_ids_at_safety_as_the_search_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpool.oracle import tracereplay
    from kvpool.spec import BlockRef, FreeBlocks

    target = as_target(BackFirst)
    # the target hands out block 3 where the spec would hand out block 1; freeing block 3
    # is then right (the search renames the spec's blocks after the target's choice)
    trace = SavedTrace(
        [(4, True, False)],
        [
            {"call": op_to_json(GetNewBlocks(1))},
            {"call": op_to_json(FreeBlocks([BlockRef(0, 3)]))},
            {"call": op_to_json(GetNewBlocks(2))},
        ],
        level="safety",
    )
    assert replay(trace, target, "safety").divergence is None
    assert conform(target, "safety", 100, max_blocks=6, max_pools=1).conforms
    # at exact the order is compared, and it differs
    found = replay(trace, target, "exact").divergence
    assert found is not None and found.rule == "result differs: ids"
    # without the renaming, the replay would call the free of block 3 a double free
    monkeypatch.setattr(tracereplay, "follow_target_ids", lambda *a: False)
    found = replay(trace, target, "safety").divergence
    assert found is not None and found.rule == "error kind differs", found


# -- the cross-pool hint ----------------------------------------------------------------


def _trace(*ops: Any, pools: int = 2) -> SavedTrace:
    from kvpool.oracle.traceformat import outcome_to_json
    from kvpool.spec.ops import Outcome

    ok = outcome_to_json(Outcome())
    return SavedTrace(
        [(4, False, False)] * pools,
        [{"note": "", "call": op_to_json(op), "expected": ok, "observed": ok} for op in ops],
    )


def test_the_hint_names_the_rule_and_the_option_when_a_trace_crosses_pools() -> None:
    from kvpool.oracle.conformance import cross_pool_hint
    from kvpool.spec.ops import BlockRef, DropPool, FreeBlocks, Touch

    here = _trace(GetNewBlocks(1), FreeBlocks((BlockRef(0, 1),), pool=0))
    assert cross_pool_hint(here) is None
    freed = cross_pool_hint(_trace(GetNewBlocks(1), FreeBlocks((BlockRef(0, 1),), pool=1)))
    assert freed and "forwarded to that pool" in freed and "--max-pools 1" in freed
    assert "DropPool" not in freed and "drops a pool" not in freed
    touched = cross_pool_hint(_trace(GetNewBlocks(1), Touch((BlockRef(0, 1),), pool=1)))
    assert touched and "ForeignBlock" in touched and "forwarded" not in touched
    dropped = cross_pool_hint(_trace(GetNewBlocks(1), DropPool(1)))
    assert dropped and "drops a pool" in dropped


def test_a_single_pool_design_failing_across_pools_gets_the_hint() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "list-pool"))
    try:
        from list_pool import ListPool  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    report = conform(as_target(ListPool), "exact", 100, max_blocks=6)
    assert not report.conforms and report.hint and "--max-pools 1" in report.hint
    assert report.to_json()["hint"] == report.hint
    alone = conform(as_target(CountsOneMore), "exact", 50, max_blocks=6, max_pools=1)
    assert not alone.conforms and alone.hint is None


# -- one order for the search and the replay -----------------------------------------------


def test_state_problem_names_the_cause_then_the_invariant_then_the_difference() -> None:
    # the one function machine.check_state and replay both call: if either order were
    # swapped here, ERR-ATOMIC mutants would be reported as INV-* and INV-* as "state
    # differs" (docs/08-bug-zoo.md's "The oracle reports" lines)
    from kvpool.oracle.machine import state_problem
    from kvpool.spec.invariants import Violation
    from kvpool.spec.ops import Touch
    from kvpool.spec.state import PoolState

    spec = PoolState.initial(4, False, False)
    moved = spec.copy()
    moved.free.move_to_end(1)  # same blocks, another order: a difference, no invariant
    broken = [Violation("INV-FREE", "made up for the test", 1, 0)]
    refused = Touch(())
    assert state_problem(0, spec, spec.copy(), [], "exact", None) is None
    assert state_problem(0, spec, moved, [], "exact", None)[0] == "state differs"  # type: ignore[index]
    assert state_problem(0, spec, moved, broken, "exact", None)[0] == "INV-FREE"  # type: ignore[index]
    assert state_problem(0, spec, moved, broken, "exact", refused)[0] == "ERR-ATOMIC"  # type: ignore[index]
    assert state_problem(0, spec, moved, [], "safety", refused) is None  # order is not safety's
    assert state_problem(0, spec, spec.copy(), broken, "safety", refused)[0] == "INV-FREE"  # type: ignore[index]


def test_a_state_read_that_hangs_is_a_finding_of_the_replay_not_an_escape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpool.oracle.exits import TargetHung

    target = as_target(BlockPool)

    def hangs(driver: Any, i: int) -> Any:
        raise TargetHung("reading pool 0's state", 1.0)

    monkeypatch.setattr(target, "state_check", hangs)
    trace = SavedTrace([(4, False, False)], [{"note": "", "call": op_to_json(GetNewBlocks(1))}])
    found = replay(trace, target, "exact").divergence
    assert found is not None and found.rule == "target hung" and "reading its state" in found.detail


def test_a_stateless_targets_own_invariants_are_checked_by_replay_as_by_the_search() -> None:
    """A target without a state reader but with its own invariant check: both name it.

    The replay used to skip a pool it could not read, own checks and all, so a trace the
    search reported replayed clean (this test fails on that code).
    """
    from kvpool.oracle.targets import resolve
    from kvpool.spec.invariants import Violation

    def own_check(driver: Any, i: int) -> list[Violation]:
        pool = driver.pool(i)
        if pool.get_num_free_blocks() < 2:
            return [Violation("INV-FREE", "seeded: fewer than 2 free blocks")]
        return []

    target = resolve("python:oracle_targets:MinimalPool")
    assert target.state_check is None
    target.target_invariants = own_check
    report = conform(target, "exact", examples=30, max_blocks=4, max_pools=1)
    assert report.rule == "INV-FREE" and report.trace is not None
    again = resolve("python:oracle_targets:MinimalPool")
    again.target_invariants = own_check
    found = replay(report.trace, again, "exact").divergence
    assert found is not None and found.rule == "INV-FREE" and "seeded" in found.detail
    # Without the check the same trace replays clean: the finding is the check's.
    assert replay(report.trace, resolve("python:oracle_targets:MinimalPool")).divergence is None


class StartsOutOfOrder(forks_shaped.BlockPool):
    """A pool built with block 1 at the back of its free queue, where the spec has it first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.num_gpu_blocks > 2:
            first = self.free_block_queue.popleft()
            self.free_block_queue.append(first)


def test_a_pool_that_starts_unlike_the_spec_diverges_before_any_call_in_search_and_replay() -> None:
    report = conform(as_target(StartsOutOfOrder), "exact", 50, max_blocks=8, max_pools=1)
    assert report.rule == "state differs", report.message
    assert report.trace is not None and report.trace.steps == []
    again = replay(report.trace, as_target(StartsOutOfOrder))
    # The search found it with no call made; the replay of its trace must say the same
    # (it used to check nothing until the first call, and so found no divergence).
    assert again.divergence is not None, "the saved trace replays clean"
    assert again.divergence.step == 0
    assert again.divergence.rule == "state differs"
    assert "free queue" in again.divergence.detail
    # The pool that starts as the spec's replays the same trace clean.
    assert replay(report.trace, as_target(forks_shaped.BlockPool)).divergence is None
