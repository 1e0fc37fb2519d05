"""Make a failing trace shorter after Hypothesis has shrunk it, by deleting steps.

Hypothesis shrinks the *choices* that generated a run; a step whose deletion would
shift the choices after it can survive that (a leading ``GetNewBlocks(n=0)``, an
``EvictBlocks(block_ids=())``). This pass works on the trace itself: it tries
deleting each step (a call or a watcher script), replays the rest on the target, and
keeps a deletion when the replay still fails the same way (rule, detail and the call
that fails). It repeats until no
single deletion keeps the failure, so every step left is needed. Deterministic: the
same trace and target give the same result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .target_base import Target
from .traceformat import SavedTrace, block_refs, op_from_json, op_to_json, outcome_to_json
from .tracereplay import replay

Failure = tuple[str, str, Any]
"""What a failure is, for minimisation: its rule, its detail and the call that failed."""


def failure_of(saved: SavedTrace, target: Target) -> Failure | None:
    """The failure ``saved`` shows on replay on ``target`` (None: it does not fail)."""
    found = replay(saved, target, saved.level).divergence
    if found is None:
        return None
    call = saved.steps[found.step - 1].get("call") if 0 < found.step <= len(saved.steps) else None
    return found.rule, found.detail, call


def still_fails(saved: SavedTrace, target: Target, failure: Failure) -> bool:
    """Does ``saved`` still fail on ``target`` in the same way (rule, detail and call)?

    A bug of the oracle's own is not caught here: it propagates, and the run ends with
    an oracle error rather than a trace that shows something else."""
    return failure_of(saved, target) == failure


def delete_steps(saved: SavedTrace, target: Target, budget: int = 400) -> SavedTrace:
    """The trace with every step removed whose removal keeps its failure.

    The failure is what the replay of ``saved`` shows: its rule, its detail, and the
    call that fails. A deletion is kept only when all three are the same. The trace
    returned records that failure as its ``violation``, so the headline the report
    prints is the minimal trace's own. ``budget`` caps the replays (each costs one run
    of the trace), so a long trace on a slow target cannot stall a report; what is
    left still fails. A trace that does not fail on replay is returned as it is.
    """
    failure = failure_of(saved, target)
    if failure is None:
        return saved
    steps = list(saved.steps)
    replays = 0
    changed = True
    while changed and replays < budget:
        changed = False
        i = len(steps) - 1
        while i >= 0 and replays < budget:
            candidate = replace(saved, steps=steps[:i] + steps[i + 1 :])
            replays += 1
            if still_fails(candidate, target, failure):
                steps = candidate.steps
                changed = True
            i -= 1
    # Pools no step needs any more: drop them from the end (a step that names a
    # dropped pool makes the replay fail differently, so the deletion is refused).
    pools = list(saved.pools)
    named = _pools_named(steps)
    while len(pools) > 1 and len(pools) - 1 not in named and replays < budget:
        candidate = replace(saved, pools=pools[:-1], steps=steps)
        replays += 1
        if not still_fails(candidate, target, failure):
            break
        pools = candidate.pools
    return rerecord(replace(saved, pools=pools, steps=steps), target)


def _pools_named(steps: list[dict[str, Any]]) -> set[int]:
    """Every pool a step's call names: the pool it runs on, and the pool of each block."""
    named: set[int] = set()
    for step in steps:
        call = step.get("call") or step.get("script", {}).get("call")
        if not call:
            continue
        op = op_from_json(call)
        named.add(op.pool)
        named.update(ref.pool for ref in block_refs(op))
    return named


def rerecord(saved: SavedTrace, target: Target) -> SavedTrace:
    """``saved`` with every step's recorded outcomes (and watcher calls) replayed afresh.

    A deleted step changes what later steps return, so a shortened trace must not
    keep the outcomes recorded for the longer one: ``kvpool show`` and the spec-only
    replay read them. Its ``violation`` becomes the failure this replay shows.
    """
    result = replay(saved, target, saved.level, stop=False)
    found = result.divergence
    if found is not None:
        rule = found.rule
        saved = replace(saved, violation={"rule": rule, "message": f"{rule}: {found.detail}"})
    steps: list[dict[str, Any]] = []
    for old, new in zip(saved.steps, result.steps, strict=False):
        if new.call is None:
            steps.append(old)
            continue
        steps.append(
            {
                "call": op_to_json(new.call),
                "expected": outcome_to_json(new.expected),
                "observed": outcome_to_json(new.observed),
                "nested": [
                    {
                        "call": op_to_json(o),
                        "expected": outcome_to_json(e),
                        "observed": outcome_to_json(t),
                    }
                    for o, e, t in new.nested
                ],
            }
        )
    return replace(saved, steps=steps)
