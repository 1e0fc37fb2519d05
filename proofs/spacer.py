"""A second engine with no hand lemma: z3's Spacer (IC3/PDR over Horn clauses).

The finite reading's transition at a fixed N, unchanged, becomes three Horn clauses over
an unknown relation ``Reach`` of states (``enable_caching`` and ``enable_kv_cache_events``
are part of the state: they never change):

* ``Reach(init)``;
* ``Reach(s) and domain(a) ==> Reach(T(s, a))``;
* ``Reach(s) and not P(s) ==> false``, asked as a query.

Spacer answers ``unsat`` when it finds an inductive invariant that implies P on its own
(no LO-HI, no WATCH-PER-BLOCK: nothing from :mod:`kvpool.proofs.fixedn`), which proves P
for every k at that N; ``sat`` is a run that breaks P.
"""

from __future__ import annotations

import time
from dataclasses import fields

import z3  # type: ignore[import-untyped]

from . import props
from .model import (
    Config,
    Finite,
    State,
    args_domain,
    fresh_args,
    fresh_state,
    initial,
    int_sort,
    transition,
)


def _flat(s: State, flags: tuple[z3.BoolRef, z3.BoolRef]) -> list[z3.ExprRef]:
    out: list[z3.ExprRef] = []
    for f in fields(s):
        v = getattr(s, f.name)
        if v is None:
            continue
        if isinstance(v, list) and v and isinstance(v[0], list):
            for row in v:
                out += row
        elif isinstance(v, list):
            out += v
        else:
            out.append(v)
    return [*out, *flags]


def check(
    n: int,
    names: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 150000,
    together: bool = False,
) -> dict[str, tuple[str, float]]:
    """Spacer's verdict on each literal invariant (and RANK-BOUNDS) at N=n; with
    ``together``, one query on their conjunction (key ``"all"``)."""
    out: dict[str, tuple[str, float]] = {}
    with int_sort(None):
        caching, events = z3.Bool("caching"), z3.Bool("events")
        cfg = Config(Finite(n), caching=caching, events=events, bugs=bugs)
        s = fresh_state(cfg, "s")
        a = fresh_args(cfg, "a")
        t, _ = transition(cfg, s, a)
        vs = _flat(s, (caching, events))
        sorts = [v.sort() for v in vs]
        goals = {**props.literal(cfg, s), **props.ghost(cfg, s)}
        if names:
            goals = {k: goals[k] for k in names}
        if together:
            goals = {"all": z3.And(list(goals.values()))}
        for name in goals:
            fp = z3.Fixedpoint()
            fp.set(engine="spacer")
            fp.set("timeout", timeout_ms)
            reach = z3.Function("Reach", *sorts, z3.BoolSort())
            fp.register_relation(reach)
            avars = _args_vars(a)
            fp.declare_var(*vs, *avars)
            fp.rule(reach(*_flat(initial(cfg), (caching, events))))
            fp.rule(reach(*_flat(t, (caching, events))), [reach(*vs), args_domain(cfg, a)])
            t0 = time.perf_counter()
            r = fp.query(z3.And(reach(*vs), z3.Not(goals[name])))
            dt = time.perf_counter() - t0
            status = "proved" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"
            out[name] = (status, dt)
    return out


def _args_vars(a: object) -> list[z3.ExprRef]:
    out: list[z3.ExprRef] = []
    for f in fields(a):  # type: ignore[arg-type]
        v = getattr(a, f.name)
        out += v if isinstance(v, list) else [v]
    return out
