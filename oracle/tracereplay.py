"""Deterministic replay of a saved trace, on the spec alone or on a target beside it.

:func:`replay` runs a :class:`~.traceformat.SavedTrace` step by step and returns every
step's outcomes and states (what ``kvpool replay`` and ``kvpool show`` draw) and the
first :class:`Divergence`, compared as the lockstep search compares (:mod:`.conformance`).
Minimisation (:mod:`.minimize`) and the trace log (:mod:`.tracelog`) build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import Op, Outcome
from kvpool.spec.state import PoolState, World

from .driver import Driver, WatcherAction
from .exits import TargetHung
from .machine import state_diff
from .target_base import Target
from .traceformat import SavedTrace, op_from_json, outcome_from_json


@dataclass
class Divergence:
    """Where a replay parted from the spec (or from the saved expectations)."""

    step: int
    rule: str
    detail: str


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


def _compare(op: Op, exp: Outcome, obs: Outcome, level: str) -> tuple[str, str] | None:
    if exp.error != obs.error:
        return "error kind differs", f"{op!r}: spec {exp.error}, target {obs.error}"
    if level == "safety":
        return None
    if exp.value != obs.value:
        return "result differs", f"{op!r}: spec {exp.value!r}, target {obs.value!r}"
    if exp.fired != obs.fired:
        return "fired differs", f"{op!r}: spec {exp.fired}, target {obs.fired}"
    return None


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
    except Exception as exc:  # the target cannot even build the trace's pools: step 0
        why = f"building the pools {list(saved.pools)}: {type(exc).__name__}: {exc}"
        return ReplayResult([], Divergence(0, "target crashed", why))
    out: list[ReplayStep] = []
    divergence: Divergence | None = None

    def states() -> tuple[list[PoolState], list[PoolState | None]]:
        spec = [p.copy() for p in world.pools]
        tgt: list[PoolState | None] = []
        for i in range(len(saved.pools)):
            reader = target.state_check if target is not None else None
            ok = driver is not None and reader is not None and world.alive[i]
            try:
                tgt.append(reader(driver, i) if ok and reader and driver else None)
            except Exception:  # a target that crashed has no state to draw; the step says why
                tgt.append(None)
        return spec, tgt

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
            except Exception as exc:
                observed = None
                problem = ("target crashed", f"{op!r}: {type(exc).__name__}: {exc}")
            nested_ops = [o for o, _ in driver.nested]
            nested_obs = [o for _, o in driver.nested]
        nested_exp = [world.apply(o) for o in nested_ops]
        if problem is None and observed is not None:
            problem = _compare(op, expected, observed, level)
            for o, e, b in zip(nested_ops, nested_exp, nested_obs, strict=True):
                if problem is None and b is not None:
                    problem = _compare(o, e, b, level)
        s, t = states()
        nested = list(zip(nested_ops, nested_exp, nested_obs, strict=True))
        out.append(ReplayStep(op, "", expected, observed, s, t, nested))
        if problem is None:
            for i, ps in enumerate(s):
                if not world.alive[i]:
                    continue
                viol = check_pool(ps)
                if viol:
                    problem = (viol[0].invariant, f"the spec broke it: {viol[0]}")
                    break
                tps = t[i]
                if tps is not None:
                    tv = (
                        target.target_invariants(driver, i)  # type: ignore[arg-type]
                        if target and target.target_invariants
                        else check_pool(tps)
                    )
                    if tv:
                        problem = (tv[0].invariant, f"target pool {i}: {tv[0]}")
                        break
                    if level != "safety" and tps.snapshot() != ps.snapshot():
                        problem = ("state differs", f"pool {i}: {state_diff(ps, tps)}")
                        break
        if problem is not None and divergence is None:
            divergence = Divergence(n, *problem)
            if stop:
                break
    return ReplayResult(out, divergence)


__all__ = ["Divergence", "ReplayResult", "ReplayStep", "replay"]
