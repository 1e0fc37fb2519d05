"""Unbounded inductive proofs: for every N, every operation preserves the invariants.

The state is the unbounded reading of :mod:`kvpool.proofs.model` (z3 arrays,
lambdas, quantifiers, a symbolic N and a symbolic ``get_new_blocks`` count n;
block lists have up to M symbolic entries). Obligations, per part P of the
strengthened invariant S (see :mod:`kvpool.proofs.props`) and per operation kind:

    S(s)  and  T_op(s, a, s')  ==>  P(s')

plus ``Init ==> S`` and the lemmas ``S ==> INV-X`` for the invariants stated
without counts. ``unsat`` of the negation is the proof; ``unknown`` is reported
as unknown, never as proved.
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]

from . import props
from .model import (
    OPK,
    OPS,
    Config,
    Goal,
    Unbounded,
    args_domain,
    fresh_args,
    fresh_state,
    initial,
    isolated_check,
    named,
    transition,
)


def _setup(
    bugs: frozenset[str], K: int, W: int, M: int
) -> tuple[Config, object, object, object, object]:
    caching, events = z3.Bool("caching"), z3.Bool("events")
    cfg = Config(Unbounded(), K=K, W=W, M=M, caching=caching, events=events, bugs=bugs)
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_args(cfg, "a")
    t, r = transition(cfg, s, a)
    return cfg, s, a, t, r


def _solve(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    timeout_ms: int,
    bound_n: z3.ArithRef | None,
    seed: int = 0,
) -> tuple[str, float, z3.ModelRef | None]:
    extra = [bound_n <= 8] if bound_n is not None else []
    # (the bound on refutations only keeps a counterexample small enough to decode)
    return isolated_check([*hyp, *extra], goal, timeout_ms, seed)


def step_goals(
    parts: tuple[str, ...] | None = None,
    ops: tuple[str, ...] = OPS,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    K: int = 2,
    W: int = 2,
    M: int = 2,
    refute: bool = False,
) -> list[Goal]:
    cfg, s, a, t, _r = _setup(bugs, K, W, M)
    N = cfg.dom.N
    S = props.strong(cfg, s)  # type: ignore[arg-type]
    St = props.strong(cfg, t)  # type: ignore[arg-type]
    base = [N >= 1, args_domain(cfg, a), *S.values()]  # type: ignore[arg-type]
    out = []
    for p in parts or tuple(St):
        for op in ops:
            with named(f"S and T => {p} / {op}"):
                status, dt, m = _solve(
                    [*base, a.kind == OPK[op]],  # type: ignore[attr-defined]
                    St[p],
                    timeout_ms,
                    N if refute else None,
                )
            out.append(Goal(p, op, status, dt, m, (cfg, s, a), op))
            if refute and status == "refuted":
                return out
    return out


def init_goals(
    timeout_ms: int = 60000, K: int = 2, W: int = 2, bugs: frozenset[str] = frozenset()
) -> list[Goal]:
    cfg = Config(
        Unbounded(), K=K, W=W, caching=z3.Bool("caching"), events=z3.Bool("events"), bugs=bugs
    )
    s0 = initial(cfg)
    if "init-null-free" in bugs:  # mutant: the queue starts with the null block
        from dataclasses import replace

        d = cfg.dom
        s0 = replace(s0, q=d.mk(lambda i: i, "int"), pos=d.mk(lambda b: b, "int"), L=d.N)
    out = []
    for p, g in props.strong(cfg, s0).items():
        with named(f"init => {p}"):
            status, dt, m = _solve([cfg.dom.N >= 1], g, timeout_ms, None)
        out.append(Goal(p, "init", status, dt, m))
    return out


def lemma_goals(
    timeout_ms: int = 60000, K: int = 2, W: int = 2, weaken: bool = False, seed: int = 0
) -> list[Goal]:
    """S ==> each count-free INV-X, for a symbolic N (via :func:`props.stepping_stones`)."""
    cfg = Config(Unbounded(), K=K, W=W, caching=z3.Bool("caching"), events=z3.Bool("events"))
    s = fresh_state(cfg, "s", globals_=False)
    S = props.strong(cfg, s)
    if weaken:  # mutant: PERM without "pos inverts q" no longer gives "exactly once"
        d, N, L = cfg.dom, cfg.dom.N, s.L
        S["PERM"] = z3.And(
            L >= 0,
            L <= N - 1,
            d.forall(
                0,
                N - 1,
                lambda i: z3.And(
                    d.sel(s.q, i) >= 1,
                    d.sel(s.q, i) < N,
                    (d.sel(s.ref, d.sel(s.q, i)) == 0) == (i < L),
                ),
            ),
        )
    hyp = [cfg.dom.N >= 1, *S.values()]
    bound = cfg.dom.N if weaken else None
    stones = props.stepping_stones(cfg, s)
    out = []
    for name, g in props.literal_unbounded(cfg, s).items():
        if weaken and name != "INV-FREE":
            continue
        # S ==> stone, then S and stone ==> INV-X; with no stone (or one that does not
        # follow) INV-X is asked of S alone, so a refutation breaks INV-X itself
        steps = [([], stones[name]), ([stones[name]], g)] if name in stones else []
        status, dt, m = "proved", 0.0, None
        with named(f"S => {name}"):
            for extra, goal in steps:
                status, took, m = _solve([*hyp, *extra], goal, timeout_ms, bound, seed)
                dt += took
                if status != "proved":
                    break
            if status != "proved" or not steps:
                status, took, m = _solve(hyp, g, timeout_ms, bound, seed)
                dt += took
        out.append(Goal(name, "lemma", status, dt, m, (cfg, s, None)))
    return out
