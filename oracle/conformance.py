"""Conformance runs: the lockstep search, with shrinking and step deletion.

:func:`conform` points helper A's lockstep machine (:mod:`.machine`) at a
:class:`~.target_base.Target` at one level and returns a :class:`Report`; the machine is
subclassed here only to honour capabilities the machine has no switch for
(``evict_first``) and to record watcher scripts as data, so that a saved trace can be
replayed exactly (:func:`~.tracereplay.replay`). The trace format itself (schema
``kvpool-trace/1``, :class:`~.traceformat.SavedTrace`) is :mod:`.traceformat`.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from kvpool.spec.invariants import INVARIANT_NAMES, INVARIANTS
from kvpool.spec.ops import (
    OP_CLASSES,
    VLLM_OP_CLASSES,
    DropPool,
    FreeBlocks,
    GetNewBlocks,
    Op,
    Outcome,
)

from .driver import WatcherAction
from .exits import TargetCrashed, TargetHung
from .machine import (
    COMPARISON_RULES,
    LockstepConfig,
    LockstepFailure,
    Trace,
    TraceStep,
    build_machine,
)
from .minimize import delete_steps
from .specbranches import BranchCoverage, SpecBranches
from .target_base import DROP_POOL, EVICT_FIRST, METHODS, MULTI_POOL, Target
from .traceformat import (
    LEVELS,
    SavedTrace,
    block_refs,
    op_from_json,
    op_to_json,
    outcome_to_json,
)
from .tracereplay import follow_target_ids


def action_to_json(wid: int, action: WatcherAction | None) -> dict[str, Any]:
    return {
        "watcher": wid,
        "raise": bool(action and action.raise_error),
        "call": op_to_json(action.op) if action and action.op else None,
    }


def trace_to_saved(
    trace: Trace,
    actions: dict[int, tuple[int, WatcherAction | None]],
    target: str,
    level: str,
    violation: dict[str, Any] | None,
) -> SavedTrace:
    steps: list[dict[str, Any]] = []
    for i, s in enumerate(trace.steps):
        if s.op is None:
            wid, action = actions.get(i, (-1, None))
            steps.append({"note": s.note, "script": action_to_json(wid, action)})
            continue
        steps.append(
            {
                "call": op_to_json(s.op),
                "expected": outcome_to_json(s.spec),
                "observed": outcome_to_json(s.target),
                "nested": [
                    {
                        "call": op_to_json(o),
                        "expected": outcome_to_json(e),
                        "observed": outcome_to_json(t),
                    }
                    for o, e, t in s.nested
                ],
            }
        )
    return SavedTrace(list(trace.pools), steps, target, level, violation)


# -- the lockstep run -------------------------------------------------------------------------


def lockstep_config(
    target: Target,
    level: str,
    max_blocks: int = 16,
    check_every: int = 1,
    max_pools: int = 3,
    **overrides: Any,
) -> LockstepConfig:
    overrides = {**getattr(target, "defaults", {}), **overrides}  # options win
    caps = set(target.capabilities)
    ops = {c for c in caps if c in METHODS}
    if DROP_POOL in caps:
        ops.add("DropPool")
    multi = MULTI_POOL in caps
    if not multi:
        overrides["max_pools"] = 1
    return replace(
        LockstepConfig(
            level=level,  # type: ignore[arg-type]
            max_blocks=max_blocks,
            max_pools=max_pools,
            capabilities=frozenset(ops),
            state_check=target.state_check,
            target_invariants=target.target_invariants,
            check_every=check_every,
        ),
        **overrides,
    )


@dataclass
class Coverage:
    """What a search exercised: runs, calls, each operation's outcomes on the spec, the
    rules it checked and the spec's branches it took.

    A call is counted once per time the search made it (nested calls a watcher makes
    included), by the spec's outcome: ``ok`` or the error kind. A rule is counted each
    time it was checked on the target: an INV-* per pool state read, a comparison rule
    per call compared (``Machine.rule_checks``). It says what a "conforms" is worth: an
    operation never made or never refused, a rule never checked, a spec branch never
    taken, was not compared.
    """

    runs: int = 0
    calls: int = 0
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    rules: Counter[str] = field(default_factory=Counter)
    branches: BranchCoverage | None = None

    def add(self, op: Op, outcome: Outcome) -> None:
        self.calls += 1
        self.outcomes[type(op).__name__, "ok" if outcome.ok else str(outcome.error)] += 1

    def by_op(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (name, kind), n in sorted(self.outcomes.items()):
            out.setdefault(name, {})[kind] = n
        return out

    def missing(self) -> list[str]:
        """The operations of the spec that the search never made."""
        made = {name for name, _ in self.outcomes}
        return [c.__name__ for c in (*OP_CLASSES, *VLLM_OP_CLASSES) if c.__name__ not in made]

    def rules_checked(self) -> dict[str, int]:
        """Each rule checked on the target and how many times: INV-* first, in order."""
        order = [*INVARIANT_NAMES, *COMPARISON_RULES]
        known = [r for r in order if self.rules[r]]
        return {r: self.rules[r] for r in known + sorted(set(self.rules) - set(order))}

    def rules_never(self) -> list[str]:
        """The invariants and comparison rules the run never checked on the target."""
        return [r for r in (*INVARIANT_NAMES, *COMPARISON_RULES) if not self.rules[r]]

    def lines(self) -> list[str]:
        """The summary ``kvpool conform`` prints under "conforms"."""
        out = [f"{self.calls:,} calls in {self.runs:,} runs; by operation (refusals in brackets):"]
        for name, kinds in self.by_op().items():
            total = sum(kinds.values())
            refused = ", ".join(f"{k} {n}" for k, n in kinds.items() if k != "ok")
            out.append(f"  {name} {total:,}" + (f" ({refused})" if refused else ""))
        never = self.missing()
        if never:
            out.append("never made (not compared): " + ", ".join(never))
        checked = self.rules_checked()
        out.append(
            "rules checked (times): "
            + (", ".join(f"{r} {n:,}" for r, n in checked.items()) if checked else "none")
        )
        unchecked = self.rules_never()
        if unchecked:
            out.append("never checked: " + ", ".join(unchecked))
        if self.branches is not None:
            out.append(self.branches.line())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "calls": self.calls,
            "by_op": self.by_op(),
            "never": self.missing(),
            "rules": self.rules_checked(),
            "rules_never": self.rules_never(),
            "spec_branches": self.branches.to_json() if self.branches is not None else None,
        }


def oracle_machine(target: Target, config: LockstepConfig) -> type[Any]:
    """A lockstep machine for ``target`` that honours its capabilities and records scripts."""
    base = build_machine(target.factory, config)
    evict_first = EVICT_FIRST in target.capabilities

    def do(self: Any, op: Op, *, refused: bool = False) -> Outcome:
        if isinstance(op, FreeBlocks) and op.evict_first is not False and not evict_first:
            if op.evict_first is not True:
                return Outcome()  # a bad evict_first: not expressible on this target
            op = replace(op, evict_first=False)
        steps = len(self.trace.steps)
        try:
            expected: Outcome = base.do(self, op, refused=refused)  # type: ignore[attr-defined]
        finally:
            # Count what was made, also when the comparison then failed.
            coverage: Coverage = type(self).coverage
            for step in self.trace.steps[steps:]:
                if step.op is not None:
                    coverage.add(step.op, step.spec)
                    for nop, nexp, _ in step.nested:
                        coverage.add(nop, nexp)
        if config.level == "safety" and isinstance(op, GetNewBlocks) and expected.ok:
            # Any eviction order is allowed: rename the spec's blocks after the target's
            # choice, so the requests hold what the target handed out. Both sides then
            # agree on which blocks are free and in use (their keys may differ, which
            # safety does not compare); the target's INV-* are checked on its own state.
            observed = self.trace.steps[-1].target
            if observed is not None and follow_target_ids(
                self.world.pools[op.pool], expected, observed
            ):
                expected = replace(expected, value=observed.value)
        return expected

    def arm(self: Any, wid: int, action: WatcherAction | None, pool: int, text: str) -> None:
        base.arm(self, wid, action, pool, text)  # type: ignore[attr-defined]
        type(self).last_actions[len(self.trace.steps) - 1] = (wid, action)

    def spec_apply(self: Any, op: Op) -> Outcome:
        branches: SpecBranches | None = type(self).spec_branches
        if branches is None:
            return base.spec_apply(self, op)  # type: ignore[attr-defined, no-any-return]
        measured: Outcome = branches.measure(base.spec_apply, self, op)  # type: ignore[attr-defined]
        return measured

    def init(self: Any) -> None:
        base.__init__(self)
        type(self).last_actions = {}
        type(self).coverage.runs += 1

    coverage = Coverage()
    return type(
        base.__name__,
        (base,),
        {
            "do": do,
            "spec_apply": spec_apply,
            "spec_branches": None,
            "arm": arm,
            "__init__": init,
            "last_actions": {},
            "coverage": coverage,
            "rule_checks": coverage.rules,
        },
    )


@dataclass
class Report:
    """The result of one ``kvpool conform`` run."""

    target: str
    level: str
    conforms: bool
    rule: str | None
    message: str
    examples: int
    seed: int | None
    seconds: float
    skipped: list[str] = field(default_factory=list)
    trace: SavedTrace | None = None
    crash: str | None = None
    """The target's traceback, when the finding is a crash of the target."""
    hint: str | None = None
    """When the minimal trace needs more than one pool: the rule it exercises, the option."""
    coverage: Coverage = field(default_factory=Coverage)
    """What the search made (shrinking included, when there was a failure)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "level": self.level,
            "conforms": self.conforms,
            "violated": self.rule,
            "message": self.message.split("\n--- trace ---")[0],
            "examples": self.examples,
            "seed": self.seed,  # null: derandomized, the same search on every run
            "derandomized": self.seed is None,
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
            "trace": self.trace.to_json() if self.trace else None,
            "target_traceback": self.crash,
            "hint": self.hint,
            "coverage": self.coverage.to_json(),
        }


def run_settings(
    examples: int, steps: int = 30, seed: int | None = None, shrink: bool = True
) -> settings:
    phases = [Phase.explicit, Phase.generate, Phase.target]
    if shrink:
        phases.append(Phase.shrink)
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=seed is None,
        print_blob=False,
        report_multiple_bugs=False,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )


def conform(
    target: Target,
    level: str = "exact",
    examples: int = 200,
    seed: int | None = None,
    steps: int = 30,
    max_blocks: int = 16,
    check_every: int = 1,
    spec_coverage: bool = True,
    **overrides: Any,
) -> Report:
    """Search for a trace on which ``target`` parts from the spec at ``level``.

    ``spec_coverage``: measure the spec's branches taken during the search
    (:mod:`.specbranches`; off: not measured, and the report says so).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    config = lockstep_config(target, level, max_blocks, check_every, **overrides)
    machine = oracle_machine(target, config)
    if seed is not None:
        machine._hypothesis_internal_use_seed = seed
    start = time.perf_counter()
    rule, message = None, ""
    crash: str | None = None
    branches = machine.spec_branches = SpecBranches(spec_coverage)
    try:
        with branches:
            run_state_machine_as_test(machine, settings=run_settings(examples, steps, seed))
    except LockstepFailure as failure:
        rule, message = failure.rule, str(failure)
        crash = failure.traceback or None
    except Flaky as exc:
        rule, message = "flaky", f"the target does not behave the same on the same calls: {exc}"
    except TargetHung as exc:  # a state read past the per-call timeout
        rule, message = "target hung", str(exc)
    except TargetCrashed as exc:  # building a pool: the target's constructor raised
        rule, message, crash = "target crashed", str(exc), exc.traceback
    # Anything else is a bug in the oracle: it propagates (exit 3, with its traceback)
    # rather than being reported as the target's crash.
    seconds = time.perf_counter() - start
    machine.coverage.branches = branches.result()
    saved = None
    if rule is not None and machine.last_trace is not None:
        saved = trace_to_saved(
            machine.last_trace,
            machine.last_actions,
            target.name,
            level,
            {"rule": rule, "message": message.split("\n--- trace ---")[0]},
        )
        # Hypothesis shrinks the choices behind a run, which can leave steps that do
        # nothing; deleting steps on the trace itself removes them, keeping the failure.
        # The headline is the minimal trace's own failure, as its replay shows it.
        saved = delete_steps(saved, target)
        rule, message = saved.violation["rule"], saved.violation["message"]  # type: ignore[index]
    return Report(
        target.name,
        level,
        rule is None,
        rule,
        message,
        examples,
        seed,
        seconds,
        list(target.skipped),
        saved,
        crash,
        cross_pool_hint(saved) if saved is not None else None,
        machine.coverage,
    )


def cross_pool_hint(saved: SavedTrace) -> str | None:
    """What a trace does across pools, the semantics' rule for it, and how to leave it out.

    A design that is only ever used with one pool fails on a block freed through a pool
    that does not own it, or on a pool dropped while another runs on; the report says so
    instead of leaving the user to find ``--max-pools 1``. ``None``: the trace stays in one
    pool.
    """
    dropped = freed = other = False
    for step in saved.steps:
        calls = [step.get("call"), *(n.get("call") for n in step.get("nested", ()))]
        for raw in calls:
            if raw is None:
                continue
            op = op_from_json(raw)
            foreign = any(ref.pool != op.pool for ref in block_refs(op))
            dropped |= isinstance(op, DropPool)
            freed |= foreign and isinstance(op, FreeBlocks)
            other |= foreign and not isinstance(op, FreeBlocks)
    if not (dropped or freed or other):
        return None
    what = []
    if freed:
        what.append(
            "frees a block through a pool that does not own it (semantics, free_blocks: "
            "entries owned by another live pool are forwarded to that pool)"
        )
    if other:
        what.append("hands a pool another pool's block (semantics: ForeignBlock)")
    if dropped:
        what.append(
            "drops a pool while another runs on (semantics, free_blocks: entries whose "
            "pool is gone are dropped)"
        )
    return (
        "this trace "
        + "; it ".join(what)
        + ". A pool only ever used alone can leave this out: --max-pools 1 (or --skip "
        "multi_pool)."
    )


def rule_names() -> list[str]:
    return [*INVARIANTS, "INV-LIST"]


__all__ = [
    "Report",
    "TraceStep",
    "conform",
    "cross_pool_hint",
    "lockstep_config",
    "oracle_machine",
]
