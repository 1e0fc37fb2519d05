"""Deterministic replay of a saved trace, on the spec alone or on a target beside it.

:func:`replay` runs a :class:`~.traceformat.SavedTrace` step by step and returns every
step's outcomes and states (what ``kvpool replay`` and ``kvpool show`` draw) and the
first :class:`Divergence`, compared as the lockstep search compares (:mod:`.conformance`).
Minimisation (:mod:`.minimize`) and the trace log (:mod:`.tracelog`) build on it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace

from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import GetNewBlocks, Op, Outcome
from kvpool.spec.state import PoolState, World

from .driver import Driver, WatcherAction
from .exits import TargetCrashed, TargetHung
from .machine import compare_outcomes, crash_detail, state_problem
from .target_base import EVICT_FIRST, MULTI_POOL, Target
from .traceformat import SavedTrace, op_from_json, outcome_from_json


@dataclass
class Divergence:
    """Where a replay parted from the spec (or from the saved expectations)."""

    step: int
    rule: str
    detail: str
    traceback: str = ""
    """The target's traceback, when the target crashed."""


@dataclass
class ReplayStep:
    call: Op | None
    note: str
    expected: Outcome | None
    observed: Outcome | None
    spec_state: list[PoolState]
    target_state: list[PoolState | None]
    nested: list[tuple[Op, Outcome, Outcome | None]] = field(default_factory=list)
    """Calls a watcher made back into the pool during this step: (call, spec, target)."""


@dataclass
class ReplayResult:
    steps: list[ReplayStep]
    divergence: Divergence | None


def relabel(ps: PoolState, a: int, b: int) -> None:
    """Swap the names of blocks ``a`` and ``b`` in a spec state (everything else kept)."""
    if a == b:
        return
    name = {a: b, b: a}

    def m(x: int) -> int:
        return name.get(x, x)

    ps.ref[a], ps.ref[b] = ps.ref[b], ps.ref[a]
    ps.key[a], ps.key[b] = ps.key[b], ps.key[a]
    ps.tokens = {m(x): n for x, n in ps.tokens.items()}
    ps.entries = {m(x): ks for x, ks in ps.entries.items()}
    ps.free = OrderedDict.fromkeys(m(x) for x in ps.free)
    ps.index = {k: dict.fromkeys(m(x) for x in holders) for k, holders in ps.index.items()}
    ps.pending = {m(x): ws for x, ws in ps.pending.items()}


def follow_target_ids(ps: PoolState, expected: Outcome, observed: Outcome) -> bool:
    """At ``safety``, any eviction order is allowed: rename the spec's blocks after the
    ids the target handed out, so both sides agree on which blocks are free and in use.

    The search and :func:`replay` both do this, so a trace the search accepted replays
    the same. Returns whether the spec now holds the target's ids; ids that cannot be a
    renaming (repeated, not blocks, a different count) are left for the invariants to
    judge on the target's own state."""
    want, got = expected.value, observed.value
    if not (expected.ok and observed.ok) or want == got:
        return False
    if not isinstance(want, tuple) or not isinstance(got, tuple) or len(want) != len(got):
        return False
    if len(set(got)) != len(got) or not all(type(t) is int and 0 < t < ps.num_blocks for t in got):
        return False
    todo = list(want)
    for i, t in enumerate(got):
        s_id = todo[i]
        relabel(ps, s_id, t)
        todo = [t if x == s_id else s_id if x == t else x for x in todo]
    return True


def replay(
    saved: SavedTrace, target: Target | None = None, level: str | None = None, stop: bool = True
) -> ReplayResult:
    """Run a saved trace on the spec (and on ``target``, when given) step by step.

    Without a target, the spec's outcomes are compared to the trace's ``expected``
    ones (that is how golden vectors are checked). With one, the target's outcomes and
    states are compared to the spec's, as in the lockstep run.
    """
    level = level or saved.level
    world = World.of(*(PoolState.initial(n, c, e) for n, c, e in saved.pools))
    try:
        driver = Driver(target.factory, list(saved.pools)) if target else None
    except TargetHung as exc:  # the target cannot even build the trace's pools: step 0
        return ReplayResult([], Divergence(0, "target hung", f"building the pools: {exc}"))
    except TargetCrashed as exc:
        why = f"building the pools {list(saved.pools)}: {exc}"
        return ReplayResult([], Divergence(0, "target crashed", why, exc.traceback))
    out: list[ReplayStep] = []
    divergence: Divergence | None = None
    crash = ""

    unreadable: list[TargetCrashed | TargetHung] = []  # the last step's failed state reads

    def states() -> tuple[list[PoolState], list[PoolState | None]]:
        spec = [p.copy() for p in world.pools]
        tgt: list[PoolState | None] = []
        unreadable.clear()
        for i in range(len(saved.pools)):
            reader = target.state_check if target is not None else None
            ok = driver is not None and reader is not None and world.alive[i]
            try:
                tgt.append(reader(driver, i) if ok and reader and driver else None)
            except TargetHung as exc:  # past the per-call timeout, like a call
                unreadable.append(exc)
                tgt.append(None)
            except Exception as exc:  # the reader reads the target's objects: its crash
                unreadable.append(TargetCrashed(f"reading pool {i}'s state", exc))
                tgt.append(None)
        return spec, tgt

    def judge_states(
        s: list[PoolState], t: list[PoolState | None], after: Op | None, refused: bool
    ) -> tuple[str, str] | None:
        """The search's checks on the states read after ``after`` (None: as built), in
        :func:`~.machine.state_problem`'s order; ``refused``: the spec refused ``after``."""
        nonlocal crash
        where = f"{after!r}: then " if after is not None else "building the pools: "
        if unreadable:
            first = unreadable[0]
            if isinstance(first, TargetHung):
                return ("target hung", f"{where}reading its state: {first}")
            crash = first.traceback
            return ("target crashed", f"{where}{first}")
        for i, ps in enumerate(s):
            if not world.alive[i]:
                continue
            viol = check_pool(ps)
            if viol:
                return (viol[0].invariant, f"the spec broke it: {viol[0]}")
            tps = t[i]
            tv = [] if tps is None else check_pool(tps)
            # ... and the target's own checks, as the search does, with or without a
            # state reader (a pool without one is judged by them and its results).
            if target is not None and target.target_invariants is not None:
                tv.extend(target.target_invariants(driver, i))  # type: ignore[arg-type]
            problem = state_problem(i, ps, tps, tv, level, after if refused else None)
            if problem is not None:
                return problem
        return None

    # Step 0: the pools as built, before any call. The search checks them too, so a pool
    # that starts in a state the spec's does not (a missing null block, say) is a finding
    # of a trace with no calls, and its replay must diverge there as well.
    if driver is not None:
        problem0 = judge_states(*states(), None, False)
        if problem0 is not None:
            div0 = Divergence(0, *problem0, crash if problem0[0] == "target crashed" else "")
            return ReplayResult([], div0)

    for n, step in enumerate(saved.steps, 1):
        if "script" in step:
            sc = step["script"]
            if driver is not None and sc.get("watcher", -1) >= 0:
                call = op_from_json(sc["call"]) if sc.get("call") else None
                driver.set_action(sc["watcher"], WatcherAction(bool(sc.get("raise")), call))
            s, t = states()
            out.append(ReplayStep(None, step.get("note", ""), None, None, s, t))
            continue
        op = op_from_json(step["call"])
        expected = world.apply(op)
        problem: tuple[str, str] | None = None
        if driver is None:
            observed = outcome_from_json(step.get("expected"))
            nested_obs = [outcome_from_json(x.get("expected")) for x in step.get("nested", ())]
            nested_ops = [op_from_json(x["call"]) for x in step.get("nested", ())]
        else:
            try:
                observed = driver.execute(op)
            except TargetHung as exc:
                observed = None
                problem = ("target hung", f"{op!r}: {exc}")
            except TargetCrashed as exc:  # (any other exception is the oracle's own bug)
                observed = None
                problem = ("target crashed", crash_detail(op, expected, exc))
                crash = exc.traceback
            nested_ops = [o for o, _ in driver.nested]
            nested_obs = [o for _, o in driver.nested]
        nested_exp = [world.apply(o) for o in nested_ops]
        if (
            level == "safety"
            and isinstance(op, GetNewBlocks)
            and observed is not None
            and follow_target_ids(world.pools[op.pool], expected, observed)
        ):
            expected = replace(expected, value=observed.value)
        if problem is None and observed is not None:
            problem = compare_outcomes(op, expected, observed, level)
            for o, e, b in zip(nested_ops, nested_exp, nested_obs, strict=True):
                if problem is None and b is not None:
                    problem = compare_outcomes(o, e, b, level, " (run by a watcher)")
        s, t = states()
        nested = list(zip(nested_ops, nested_exp, nested_obs, strict=True))
        out.append(ReplayStep(op, "", expected, observed, s, t, nested))
        if problem is None:
            problem = judge_states(s, t, op, expected.error is not None)
        if problem is not None and divergence is None:
            divergence = Divergence(n, *problem, crash if problem[0] == "target crashed" else "")
            if stop:
                break
    return ReplayResult(out, divergence)


__all__ = ["Divergence", "ReplayResult", "ReplayStep", "replay"]


def needs(saved: SavedTrace) -> set[str]:
    """The capabilities a vector's calls use (nested calls too), as target capabilities."""
    out: set[str] = set()
    calls = [s.get("call") for s in saved.steps]
    calls += [n.get("call") for s in saved.steps for n in s.get("nested", ())]
    for call in calls:
        if not isinstance(call, dict):
            continue
        out.add(str(call.get("op")))
        if call.get("op") == "FreeBlocks" and call.get("evict_first", False) is not False:
            out.add(EVICT_FIRST)
    if len(saved.pools) > 1:
        out.add(MULTI_POOL)
    if any(events for _, _, events in saved.pools):
        out.add("TakeEvents")  # a pool built with events on: its log is compared
    return out
