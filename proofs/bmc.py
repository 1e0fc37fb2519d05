"""Bounded model checking of the spec: every sequence of at most k operations on N blocks.

The operations are fully symbolic: their kind and every argument (counts, up to
M block entries -- any block, the null block or an id that is not a block --,
``evict_first``, keys, watcher ids), and the pool's ``enable_caching`` and
``enable_kv_cache_events`` flags. Every INV-* (in the spec's own counting form)
is checked after every step, and every result/ordering property at every step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import Op

from . import props
from .model import (
    Args,
    Config,
    Finite,
    Result,
    State,
    args_domain,
    fresh_args,
    fresh_state,
    initial,
    int_sort,
    transition,
)
from .trace import ConcreteArgs, read_args, to_op


@dataclass
class Unrolling:
    cfg: Config
    k: int
    states: list[State]
    args: list[Args]
    results: list[Result]
    solver: z3.Solver
    caching: z3.BoolRef
    events: z3.BoolRef
    build_time: float = 0.0
    obligations: dict[str, list[z3.BoolRef]] = field(default_factory=dict)


def _pin(d: Finite, s: State, name: str, cfg: Config) -> tuple[State, list[z3.BoolRef]]:
    """Fresh variables for a state, equal to ``s`` (keeps the unrolled terms small)."""
    f = fresh_state(cfg, name)
    out: dict[str, Any] = {}
    eqs: list[z3.BoolRef] = []
    for name_, val in vars(s).items():
        fv = getattr(f, name_)
        if val is None:
            out[name_] = None
            continue
        if isinstance(val, list) and val and isinstance(val[0], list):
            for u, v in zip(fv, val, strict=True):
                eqs += [x == y for x, y in zip(u, v, strict=True)]
        elif isinstance(val, list):
            eqs += [x == y for x, y in zip(fv, val, strict=True)]
        else:
            eqs.append(fv == val)
        out[name_] = fv
    return State(**out), eqs


def unroll(
    n: int, k: int, K: int = 2, W: int = 2, M: int = 2, bugs: frozenset[str] = frozenset()
) -> Unrolling:
    with int_sort(None):
        return _unroll(n, k, K, W, M, bugs)


def _unroll(n: int, k: int, K: int, W: int, M: int, bugs: frozenset[str]) -> Unrolling:
    t0 = time.perf_counter()
    caching, events = z3.Bool("caching"), z3.Bool("events")
    cfg = Config(Finite(n), K=K, W=W, M=M, caching=caching, events=events, bugs=bugs)
    solver = z3.Solver()
    s, eqs = _pin(cfg.dom, initial(cfg), "s0", cfg)  # type: ignore[arg-type]
    solver.add(eqs)
    states, argl, results = [s], [], []
    obligations: dict[str, list[z3.BoolRef]] = {}
    for step in range(k):
        a = fresh_args(cfg, f"a{step}")
        solver.add(args_domain(cfg, a))
        t, r = transition(cfg, s, a)
        t, eqs = _pin(cfg.dom, t, f"s{step + 1}", cfg)  # type: ignore[arg-type]
        solver.add(eqs)
        for name, p in props.literal(cfg, t).items():
            obligations.setdefault(name, []).append(p)
        for name, p in props.ghost(cfg, t).items():
            obligations.setdefault(name, []).append(p)
        for name, p in props.step_props(cfg, s, a, r, t).items():
            obligations.setdefault(name, []).append(p)
        states.append(t)
        argl.append(a)
        results.append(r)
        s = t
    return Unrolling(
        cfg,
        k,
        states,
        argl,
        results,
        solver,
        caching,
        events,
        time.perf_counter() - t0,
        obligations,
    )


@dataclass
class Check:
    status: str  # "proved", "refuted", "unknown"
    seconds: float
    trace: list[Op] | None = None
    caching: bool | None = None
    events: bool | None = None
    step: int | None = None  # first step at which the property fails
    reason: str = ""


def check(u: Unrolling, name: str, timeout_ms: int) -> Check:
    """Is ``name`` violated after some step <= k? unsat: proved for every trace up to k."""
    s = u.solver
    s.push()
    s.set("timeout", timeout_ms)
    s.add(z3.Or([z3.Not(p) for p in u.obligations[name]]))
    t0 = time.perf_counter()
    res = s.check()
    dt = time.perf_counter() - t0
    try:
        if res == z3.unsat:
            return Check("proved", dt)
        if res == z3.unknown:
            return Check("unknown", dt, reason=s.reason_unknown())
        m = s.model()
        first = next(
            i
            for i, p in enumerate(u.obligations[name])
            if not z3.is_true(m.eval(p, model_completion=True))
        )
        ops = [to_op(read_args(m, a), u.cfg.dom.n) for a in u.args[: first + 1]]  # type: ignore[attr-defined]
        return Check(
            "refuted",
            dt,
            ops,
            z3.is_true(m.eval(u.caching, model_completion=True)),
            z3.is_true(m.eval(u.events, model_completion=True)),
            first,
        )
    finally:
        s.pop()


def concrete_args_of(m: z3.ModelRef, a: Args) -> ConcreteArgs:
    return read_args(m, a)


def with_bugs(u: Unrolling, bugs: frozenset[str]) -> Unrolling:
    return replace(u, cfg=replace(u.cfg, bugs=bugs))
