"""Conformance runs: the lockstep search, with shrinking and step deletion.

:func:`conform` points helper A's lockstep machine (:mod:`.machine`) at a
:class:`~.target_base.Target` at one level and returns a :class:`Report`; the machine is
subclassed here only to honour capabilities the machine has no switch for
(``evict_first``) and to record watcher scripts as data, so that a saved trace can be
replayed exactly (:func:`~.tracereplay.replay`). The trace format itself (schema
``kvpool-trace/1``, :class:`~.traceformat.SavedTrace`) is :mod:`.traceformat`.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from kvpool.spec.invariants import INVARIANT_NAMES, INVARIANTS, check_pool
from kvpool.spec.ops import (
    OP_CLASSES,
    VLLM_OP_CLASSES,
    BlockRef,
    DropPool,
    FreeBlocks,
    GetNewBlocks,
    Op,
    Outcome,
    TakeEvents,
    UnpinBlocks,
)

from .driver import WatcherAction, WatcherRaised
from .exits import BadInput, TargetCrashed, TargetHung
from .findings import FINDINGS, log_erratum
from .machine import (
    COMPARISON_RULES,
    REFUSED_NOTE,
    LockstepConfig,
    LockstepFailure,
    Trace,
    TraceStep,
    build_machine,
    common_start,
)
from .minimize import delete_steps
from .specbranches import BranchCoverage, SpecBranches
from .steering import Steering
from .target_base import DROP_POOL, EVICT_FIRST, METHODS, MULTI_POOL, Target
from .traceformat import (
    LEVELS,
    SavedTrace,
    block_refs,
    op_from_json,
    op_to_json,
    outcome_to_json,
)
from .tracereplay import follow_target_ids, needs, replay


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


RULES: tuple[str, ...] = (*INVARIANT_NAMES, *COMPARISON_RULES, "target crashed", "target hung")
"""Every rule a search can report (the first word of a finding's signature)."""

_FIELD = re.compile(r"pool \d+: ([a-z ]+?)(?: \([a-z ]+\))?: spec ")
_RAISED = re.compile(r" raised (\w+)")
_KINDS = re.compile(r": spec (\w+), target (\w+)$")
_REFUSED = re.compile(re.escape(REFUSED_NOTE) + r"(\w+)\)")


def signature(rule: str, detail: str, op: Op | None) -> str:
    """What tells one finding from another: the rule, the call, and what differs in it.

    A broken invariant is its name (``INV-EVENTS``). Any other rule: ``RULE at OP``
    (``OP``: the operation of the failing call, or of the call a watcher made from
    inside it), then for ``error kind differs`` the spec's and the target's
    outcome (and whether a block is listed twice in the call), for ``state differs`` and
    ``ERR-ATOMIC`` the first field that differs, for ``target crashed`` on a call the
    spec refuses the kind it refuses it with (bad input that crashes the target is one
    finding per call and kind, whichever exception each bad value raises), on any other
    call the exception's type (a scripted watcher's own error that escapes the pool is
    one finding, whichever call fired the watcher). Two traces with one signature are
    one finding to ``--all``; values (ids, counts, keys, pool sizes) take no part, so a
    search does not report one difference once per value.
    """
    if rule in INVARIANT_NAMES:  # the invariant names the bug; the call that shows it,
        return rule  # an eviction by get_new_blocks or by evict_blocks, does not
    where = type(op).__name__ if op is not None else "start"
    if " (run by a watcher)" in detail:
        where = f"{detail.split('(', 1)[0]} run by a watcher in {where}"
    out = f"{rule} at {where}"
    first = detail.split("\n", 1)[0]
    if rule == "error kind differs":
        kinds = _KINDS.search(first)
        if kinds:
            out += f": spec {kinds[1]}, target {kinds[2]}"
        blocks = getattr(op, "blocks", None) if op is not None else None
        # a block listed twice is told apart only where it can be the cause: releasing
        # a block more often than it is held (RefCountUnderflow: over-free-in-one-call
        # beside double-free); beside another refusal (a foreign block in the same
        # touch) it is incidental, and the finding the same as without it
        underflow = kinds is not None and kinds[1] == "RefCountUnderflow"
        if underflow and isinstance(op, (FreeBlocks, UnpinBlocks)) and isinstance(blocks, tuple):
            hashable = [b for b in blocks if isinstance(b, (int, BlockRef))]
            if len(set(hashable)) < len(hashable):
                out += " (a block listed twice)"
    elif rule in ("state differs", "ERR-ATOMIC"):
        field_ = _FIELD.search(first)
        if field_:
            out += f" ({field_[1]})"
    elif rule == "target crashed":
        raised = _RAISED.search(first)
        if raised and raised[1] == WatcherRaised.__name__:
            # a scripted watcher's own error escaped the pool: one finding, whichever
            # call fired the watcher
            return f"target crashed ({raised[1]})"
        refused = _REFUSED.search(first)
        if refused:
            # bad input the spec refuses with this kind: one finding, whichever exception
            # a particular bad value makes the target raise (None: TypeError, 0:
            # ZeroDivisionError, 1 << 32: OverflowError...)
            out += f": spec {refused[1]}"
        elif raised:
            out += f" ({raised[1]})"
    return out


class _Accepted(Exception):
    """A difference the run accepts (``--allow``, or found already by ``--all``)."""


@dataclass(frozen=True)
class Acceptance:
    """Which differences a search accepts and searches past: by signature or by rule."""

    signatures: frozenset[str] = frozenset()
    rules: frozenset[str] = frozenset()

    def accepts(self, sig: str, rule: str) -> bool:
        return sig in self.signatures or rule in self.rules

    def plus(self, *sigs: str) -> Acceptance:
        return replace(self, signatures=self.signatures | set(sigs))


class SignedFailure(LockstepFailure):
    """A :class:`LockstepFailure` that carries its :func:`signature`."""

    def __init__(self, failure: LockstepFailure, sig: str) -> None:
        super().__init__(failure.rule, str(failure), failure.traceback)
        self.signature = sig


def oracle_machine(
    target: Target,
    config: LockstepConfig,
    accept: Acceptance = Acceptance(),
    coverage: Coverage | None = None,
    steering: Steering | None = None,
) -> type[Any]:
    """A lockstep machine for ``target`` that honours its capabilities and records scripts.

    A failure whose :func:`signature` ``accept`` accepts does not end the search: the
    run goes on with the spec alone (the target's state has parted from the spec's, so
    nothing after it would be a comparison) and counts as passing. ``steering``: told
    the shape of each invalid call that shows an accepted difference (:mod:`.steering`),
    and steers the machine's invalid calls.
    """
    base = build_machine(target.factory, config)
    evict_first = EVICT_FIRST in target.capabilities

    def fail(self: Any, rule: str, detail: str, traceback: str = "") -> None:
        op = next((s.op for s in reversed(self.trace.steps) if s.op is not None), None)
        sig = signature(rule, detail, op)
        if accept.accepts(sig, rule):
            if steering is not None:
                steering.spend(self.shape)
            raise _Accepted(sig)
        try:
            base.fail(self, rule, detail, traceback)  # type: ignore[attr-defined]
        except LockstepFailure as failure:
            raise SignedFailure(failure, sig) from None

    def do(self: Any, op: Op, *, refused: bool = False) -> Outcome:
        if isinstance(op, FreeBlocks) and op.evict_first is not False and not evict_first:
            if op.evict_first is not True:
                return Outcome()  # a bad evict_first: not expressible on this target
            op = replace(op, evict_first=False)
        if self.accepted:  # past an accepted difference: the spec alone, no comparison
            return self.world.apply(op)  # type: ignore[no-any-return]
        steps = len(self.trace.steps)
        try:
            expected: Outcome = base.do(self, op, refused=refused)  # type: ignore[attr-defined]
        except _Accepted:
            # A wrong value from a call that changed the target as the spec changed (a
            # read, say) leaves both in step: the comparison goes on. Otherwise the
            # run goes on with the spec alone.
            self.accepted = not in_step(self)
            return self.trace.steps[-1].spec if len(self.trace.steps) > steps else Outcome()
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

    def in_step(self: Any) -> bool:
        """Is every live pool of the target in the spec's state, its invariants whole?"""
        reader, extra = config.state_check, config.target_invariants
        if reader is None:
            return False
        try:
            for i in self.alive():
                observed = reader(self.driver, i)
                if observed.snapshot() != self.ps(i).snapshot() or check_pool(observed):
                    return False
                if extra is not None and extra(self.driver, i):
                    return False
        except Exception:  # a target that cannot be read is not known to be in step
            return False
        return True

    def check_state(self: Any, refused: Op | None = None) -> None:
        if not self.accepted:
            try:
                base.check_state(self, refused)  # type: ignore[attr-defined]
            except _Accepted:
                self.accepted = True

    def check_invariant(self: Any, name: str) -> None:
        if not self.accepted:
            try:
                base.check_invariant(self, name)  # type: ignore[attr-defined]
            except _Accepted:
                self.accepted = True

    def init(self: Any) -> None:
        self.accepted = False
        base.__init__(self)
        type(self).last_actions = {}
        type(self).coverage.runs += 1

    coverage = coverage if coverage is not None else Coverage()  # shared by a run's searches
    return type(
        base.__name__,
        (base,),
        {
            "do": do,
            "fail": fail,
            "spec_apply": spec_apply,
            "spec_branches": None,
            "arm": arm,
            "check_state": check_state,
            "check_invariant": check_invariant,
            "__init__": init,
            "last_actions": {},
            "coverage": coverage,
            "rule_checks": coverage.rules,
            "steering": steering,
            "searching_past": bool(accept.signatures or accept.rules),
        },
    )


@dataclass
class Difference:
    """One finding of a search: its signature, the erratum it is (if known), its minimal trace."""

    signature: str
    rule: str
    message: str
    trace: SavedTrace | None = None
    crash: str | None = None
    """The target's traceback, when the finding is a crash of the target."""
    hint: str | None = None
    """When the minimal trace needs more than one pool: the rule it exercises, the option."""
    erratum: str | None = None
    """The name of the vLLM 0.33.0 erratum (``docs/errata.md``) with this signature."""
    also: list[str] = field(default_factory=list)
    """``--all``: the other signatures under which the run met the same erratum (one
    erratum is one finding; its trace is the first one found)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "erratum": self.erratum,
            "also_seen_as": self.also,
            "violated": self.rule,
            "message": self.message.split("\n--- trace ---")[0],
            "trace": self.trace.to_json() if self.trace else None,
            "target_traceback": self.crash,
            "hint": self.hint,
        }


@dataclass
class Report:
    """The result of one ``kvpool conform`` run.

    ``rule``, ``message``, ``trace``, ``crash`` and ``hint`` are the first finding's;
    ``findings`` holds every finding (one without ``--all``).
    """

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
    findings: list[Difference] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)
    """The ``--allow`` names the search accepted and searched past."""
    keep_going: bool = False
    """``--all``: the search went on past each finding."""
    searches: int = 1
    """How many searches of ``examples`` examples the run made (every stage)."""
    max_findings: int | None = None
    """``--all``: the cap on distinct findings the run was given."""
    capped: bool = False
    """``--all``: the run stopped at ``max_findings`` (it may have missed others)."""

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
            "all": self.keep_going,
            "searches": self.searches,
            "max_findings": self.max_findings,
            "stopped_at_cap": self.capped,
            "allowed": self.allowed,
            "findings": [f.to_json() for f in self.findings],
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


MAX_FINDINGS = 100
"""``--all``'s default cap (``--max-findings``): the run stops after this many distinct
findings (each costs a search and a shrink, a few seconds of CPU on vLLM 0.33.0). One
erratum is one finding, so this is well above the errata of ``docs/errata.md`` with what
else a run on vLLM 0.33.0 meets; a run that stops at the cap says so
(:attr:`Report.capped`)."""

PATIENCE = 3
"""``kvpool conform``'s default ``--patience``: a stage of the search ends after this many
searches in a row found nothing (new), each of ``examples`` fresh examples (see
:func:`search_seed`). One search of the default budget is about 4,700 calls on vLLM
0.33.0, 4 s: a "conforms" that rests on one draw of them is weak (``--seed 6`` at
``exact`` drew none of vLLM's valid-use errata where 400 examples, or any other seed
of the 20 measured, find one)."""


def search_seed(seed: int | None, k: int) -> int | None:
    """The seed of a stage's ``k``-th search (``k`` = 0 the first).

    The first search of each stage uses the run's seed (None: derandomized). A stage
    searches again after a search that found nothing (``patience``) and, with
    ``--all``, after each finding; with the same seed a search would make the same
    examples as the one before (stopped, with ``--all``, at the same places by the
    difference it now accepts) and find nothing new. Each later search draws fresh
    examples from a seed of its own, derived from the run's, so that a run is as
    reproducible as its seed.
    """
    if k == 0:
        return seed
    return k if seed is None else (seed + 1) * 1_000_003 + k


def fails_at(saved: SavedTrace, target: Target, level: str) -> tuple[int, str] | None:
    """Where ``target`` fails ``saved`` at ``level``: the step (1-based) and the signature
    (:func:`signature`). None: it passes, or fails before the first call (building the
    pools, step 0) or past the last."""
    found = replay(saved, target, level).divergence
    if found is None or not 0 < found.step <= len(saved.steps):
        return None
    call = saved.steps[found.step - 1].get("call")
    return found.step, signature(found.rule, found.detail, op_from_json(call) if call else None)


def errata_signatures(target: Target, level: str) -> dict[str, list[str]]:
    """Each erratum of ``docs/errata.md`` whose traces ``target`` fails as vLLM 0.33.0 does:
    the signatures they fail with there (its own trace's first, then those of its
    :attr:`.findings.Finding.other_traces`, each once).

    A trace names its erratum only when the target fails it at the erratum's first
    divergent call (or after it, for a trace vLLM itself fails at a step that varies
    from process to process), with the signature vLLM fails it with there
    (:class:`.findings.FailsAt`, recorded with each trace and checked on vLLM 0.33.0 by
    ``tests/test_errata_step.py``): a target that parts from the trace earlier, or
    under another signature, does so for a reason of its own (a pool whose ``touch``
    leaves a block free fails, at the touch, a trace that begins with one), which must
    not be named after the erratum. The errata are vLLM 0.33.0's; on another target a
    name means "the same difference". A trace that needs what the target lacks
    (:func:`.tracereplay.needs`: an operation, a second pool, events, ``evict_first``)
    is left out.
    """
    caps = set(target.capabilities)
    out: dict[str, list[str]] = {}
    for f in FINDINGS:
        for saved, at in f.traces_at():
            if needs(saved) - caps:
                continue
            found = fails_at(saved, target, level)
            if found is None or not at.names(*found):
                continue
            sigs = out.setdefault(f.name, [])
            if found[1] not in sigs:
                sigs.append(found[1])
    return out


def log_difference(
    saved: SavedTrace, target: Target
) -> tuple[tuple[object, ...], tuple[object, ...]] | None:
    """Where ``saved`` fails on replay, the spec's and the target's KV event logs from
    their first difference on: the events a failing ``take_events`` returned, else the
    first pool's log that differs. None: the failure is not about the event log."""
    result = replay(saved, target, saved.level)
    found = result.divergence
    if found is None or not 0 < found.step <= len(result.steps):
        return None
    step = result.steps[found.step - 1]
    pairs: list[tuple[object, object]] = []
    if isinstance(step.call, TakeEvents) and step.expected is not None and step.observed:
        pairs.append((step.expected.value, step.observed.value))
    pairs += [
        (s.log, t.log)
        for s, t in zip(step.spec_state, step.target_state, strict=False)
        if t is not None
    ]
    for a, b in pairs:
        if not isinstance(a, (tuple, list)) or not isinstance(b, (tuple, list)) or a == b:
            continue
        same = common_start(a, b)
        return tuple(a[same:]), tuple(b[same:])
    return None


def acceptance(target: Target, level: str, allow: Iterable[str]) -> Acceptance:
    """What ``--allow NAME`` accepts. NAME: an erratum (``docs/errata.md``), a rule, or a
    signature as ``--all`` prints it. Any other NAME is a :class:`BadInput`."""
    allow = list(allow)
    if not allow:
        return Acceptance()
    errata = {f.name for f in FINDINGS}
    sigs: set[str] = set()
    rules: set[str] = set()
    known = errata_signatures(target, level) if errata & set(allow) else {}
    for name in allow:
        if name in RULES:
            rules.add(name)
        elif name in errata:
            sigs.update(known.get(name, ()))
        elif any(name.startswith((f"{r} at ", f"{r} (")) for r in RULES):
            sigs.add(name)
        else:
            raise BadInput(
                f"--allow {name!r}: not an erratum ({', '.join(sorted(errata))}), a rule "
                f"({', '.join(RULES)}) or a finding's signature (RULE at OP ...)"
            )
    return Acceptance(frozenset(sigs), frozenset(rules))


def conform(
    target: Target,
    level: str = "exact",
    examples: int = 200,
    seed: int | None = None,
    steps: int = 30,
    max_blocks: int = 16,
    check_every: int = 1,
    spec_coverage: bool = True,
    *,
    keep_going: bool = False,
    allow: Iterable[str] = (),
    patience: int = 1,
    max_findings: int = MAX_FINDINGS,
    valid_stage: bool = True,
    **overrides: Any,
) -> Report:
    """Search for a trace on which ``target`` parts from the spec at ``level``.

    ``spec_coverage``: measure the spec's branches taken during the search
    (:mod:`.specbranches`; off: not measured, and the report says so).

    ``robust`` searches in two stages, each with the whole budget and the same seed:
    the valid calls first (the search ``exact`` makes), then valid and invalid calls
    and faulty watchers, so that invalid calls do not crowd out the valid-use search
    and ``robust`` finds what ``exact`` finds. ``keep_going`` (``--all``): after each
    finding the search starts again on fresh examples (:func:`search_seed`), accepting
    every signature found so far. ``patience``: a stage ends when this many searches in
    a row (each on fresh examples) found nothing new (1: one search, unless it finds
    something; ``kvpool conform`` passes :data:`PATIENCE`); the run ends at
    ``max_findings`` distinct findings (:attr:`Report.capped`). Each finding is
    reported once, with its own minimal trace: a new signature that is an erratum
    already listed (``removed-while-held`` shows as INV-EVENTS and as the event log
    differing at several calls) is added to that finding's ``also``: not a finding, but
    something new to ``patience``.
    Each search after the first is steered away from the shapes of invalid call that
    have shown an accepted difference (:mod:`.steering`). ``allow`` (``--allow``):
    differences accepted from the start (see :func:`acceptance`). ``valid_stage``
    (``robust`` only): False skips the first stage, for a target known to part from the
    spec on invalid calls only (the catalogue's :attr:`~kvpool.mutants.Mutant.invalid_calls_only`);
    the one stage left is the one that would have found it, with the same examples.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    if patience < 1:
        raise ValueError(f"patience must be at least 1, got {patience}")
    if max_findings < 1:
        raise ValueError(f"max_findings must be at least 1, got {max_findings}")
    if not valid_stage and level != "robust":
        raise ValueError(f"only robust has a valid-call stage to skip, not {level!r}")
    allow = list(allow)
    config = lockstep_config(target, level, max_blocks, check_every, **overrides)
    two = level == "robust" and valid_stage
    stages = [replace(config, level="exact"), config] if two else [config]
    accept = acceptance(target, level, allow)
    coverage = Coverage()
    branches = SpecBranches(spec_coverage)  # one measurement over every stage and search
    found: list[Difference] = []
    steering = Steering()  # shared by every stage and search of the run
    names: dict[str, str] | None = None  # signature -> erratum, read at the first finding
    start = time.perf_counter()
    made = 0  # searches, every stage
    for stage in stages:
        k = idle = 0  # the stage's searches so far (the next one's seed), and in a row idle
        while len(found) < max_findings:
            new = _search(
                target,
                stage,
                level,
                examples,
                search_seed(seed, k),
                steps,
                accept,
                coverage,
                branches,
                steering,
            )
            k += 1
            made += 1
            if new is None:
                idle += 1
                if idle >= patience:
                    break
                continue
            difference, sigs = new
            if names is None:
                names = {
                    sig: name
                    for name, known in errata_signatures(target, level).items()
                    for sig in known
                }
            difference.erratum = _erratum(difference, names, target)
            same = next((d for d in found if _same_finding(d, difference)), None)
            if same is None:
                # Listed: accept what it is listed as. A signature the shrinker slipped
                # from (the search met it, the minimal trace shows another) is not
                # accepted, so that a later search meets it again and lists it.
                accept = accept.plus(difference.signature)
                found.append(difference)
                idle = 0
            else:
                accept = accept.plus(*sigs)  # listed already: go past all of it
                if difference.signature not in (same.signature, *same.also):
                    # another signature of a listed erratum: not a finding, but the
                    # search still met something new (and steers past it from now on)
                    same.also.append(difference.signature)
                    idle = 0
                else:
                    idle += 1
            if not keep_going or idle >= patience:
                break
        if found and not keep_going:
            break
    seconds = time.perf_counter() - start
    coverage.branches = branches.result()
    first = found[0] if found else None
    return Report(
        target.name,
        level,
        not found,
        first.rule if first else None,
        first.message if first else "",
        examples,
        seed,
        seconds,
        list(target.skipped),
        first.trace if first else None,
        first.crash if first else None,
        first.hint if first else None,
        coverage,
        found,
        allow,
        keep_going,
        made,
        max_findings if keep_going else None,
        keep_going and len(found) >= max_findings,
    )


def _erratum(d: Difference, names: dict[str, str], target: Target) -> str | None:
    """The erratum ``d`` is: by its signature, else by the event logs its trace leaves."""
    if d.signature in names:
        return names[d.signature]
    if d.trace is None:
        return None
    logs = log_difference(d.trace, target)
    return log_erratum(*logs) if logs is not None else None


def _same_finding(a: Difference, b: Difference) -> bool:
    """One finding to ``--all``: the same signature, or the same erratum."""
    return a.signature == b.signature or (a.erratum is not None and a.erratum == b.erratum)


def _search(
    target: Target,
    config: LockstepConfig,
    level: str,
    examples: int,
    seed: int | None,
    steps: int,
    accept: Acceptance,
    coverage: Coverage,
    branches: SpecBranches,
    steering: Steering | None = None,
) -> tuple[Difference, list[str]] | None:
    """One search, stopped at its first finding that ``accept`` does not accept.

    Returns the finding (shrunk, then its steps deleted) and the signatures it had in
    the search and on its minimal trace (the search accepts both from then on).
    ``steering``: what earlier searches learnt is steered by from this one on.
    """
    if steering is not None:
        steering.freeze()
    machine = oracle_machine(target, config, accept, coverage, steering)
    machine.spec_branches = branches
    if seed is not None:
        machine._hypothesis_internal_use_seed = seed
    rule, message = None, ""
    crash: str | None = None
    sigs: list[str] = []
    try:
        with branches:
            run_state_machine_as_test(machine, settings=run_settings(examples, steps, seed))
    except LockstepFailure as failure:
        rule, message = failure.rule, str(failure)
        crash = failure.traceback or None
        if isinstance(failure, SignedFailure):
            sigs.append(failure.signature)
    except Flaky as exc:
        rule, message = "flaky", f"the target does not behave the same on the same calls: {exc}"
    except TargetHung as exc:  # a state read past the per-call timeout
        rule, message = "target hung", str(exc)
    except TargetCrashed as exc:  # building a pool: the target's constructor raised
        rule, message, crash = "target crashed", str(exc), exc.traceback
    # Anything else is a bug in the oracle: it propagates (exit 3, with its traceback)
    # rather than being reported as the target's crash.
    if rule is None:
        return None
    saved = None
    sig = sigs[0] if sigs else rule
    if machine.last_trace is not None:
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
        saved = delete_steps(_past_accepted(saved, target, accept), target)
        rule, message = saved.violation["rule"], saved.violation["message"]  # type: ignore[index]
        found = replay(saved, target, level).divergence
        if found is not None and 0 < found.step <= len(saved.steps):
            call = saved.steps[found.step - 1].get("call")
            sig = signature(found.rule, found.detail, op_from_json(call) if call else None)
            sigs.append(sig)
    if not sigs:
        sigs.append(sig)
    hint = cross_pool_hint(saved) if saved is not None else None
    return Difference(sig, rule, message, saved, crash, hint), sigs


def _divergence_signature(saved: SavedTrace, target: Target) -> tuple[int, str, str] | None:
    """Where ``saved`` first fails on replay: the step, the rule and the signature."""
    found = replay(saved, target, saved.level).divergence
    if found is None or not 0 < found.step <= len(saved.steps):
        return None
    call = saved.steps[found.step - 1].get("call")
    return (
        found.step,
        found.rule,
        signature(found.rule, found.detail, op_from_json(call) if call else None),
    )


def _past_accepted(saved: SavedTrace, target: Target, accept: Acceptance) -> SavedTrace:
    """``saved`` without the calls at which it shows an accepted difference first.

    The search went past them (a wrong value that left the target in step with the
    spec); a replay stops at the first difference, so the trace keeps the calls only
    while the finding the search met is still what its replay shows.
    """
    out = saved
    for _ in range(len(saved.steps)):
        at = _divergence_signature(out, target)
        if at is None:
            return saved
        step, rule, sig = at
        if not accept.accepts(sig, rule):
            return out
        out = replace(out, steps=out.steps[: step - 1] + out.steps[step:])
    return saved


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
    "RULES",
    "Acceptance",
    "Difference",
    "Report",
    "TraceStep",
    "conform",
    "cross_pool_hint",
    "errata_signatures",
    "fails_at",
    "lockstep_config",
    "oracle_machine",
    "signature",
]
