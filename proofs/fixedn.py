"""1-induction at a fixed pool size N: every obligation of the BMC, for every number of calls.

The state is the finite reading of :mod:`kvpool.proofs.model` (a concrete N, everything
else symbolic: the state itself, the call's kind and every argument, ``enable_caching``
and ``enable_kv_cache_events``). The hypothesis ``H(s)`` is the conjunction of every
obligation the BMC checks on a state -- the literal INV-* (in the spec's counting form),
the helper lemma RANK-BOUNDS -- and one ghost conjunct of our own, LO-HI
(``lo <= hi + 1`` on the queue's order-key counters: without it an empty queue with
``lo > hi + 1`` is a counterexample to induction for INV-FREE, RANK-BOUNDS and
ORD-RELEASE). Obligations:

* ``init``: the pool as built satisfies H (at this N);
* ``step``: ``H(s) and T(s, a, s') ==> P`` for every state obligation P of H at ``s'``
  and every step rule P (ORD-*, WATCH-FIRE, ERR-ATOMIC, RES-*) over ``(s, a, r, s')``.

``unsat`` of the negation is a proof *for every k at this N* (every run of any length
on a pool of N blocks); it says nothing about other N. ``unknown`` is reported as
unknown, never as proved.

Each hypothesis also gets a **witness**: z3 is asked for a state satisfying H and a call,
the state is decoded into the spec's ``PoolState``, checked with the spec's own
``check_pool``, and the call is replayed on the spec, whose result must satisfy the
spec's invariants too. A hypothesis nothing satisfies would make every step vacuous.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from . import props
from .model import (
    OPK,
    OPS,
    Args,
    Config,
    Finite,
    Goal,
    Result,
    State,
    args_domain,
    fresh_args,
    fresh_state,
    initial,
    int_sort,
    isolated_check,
    isolated_checks,
    isolated_model,
    iv,
    transition,
)
from .rewrite import simplify

STATE_OBLIGATIONS = (
    "INV-REF",
    "INV-FREE",
    "INV-NULL",
    "INV-WATCH",
    "INV-CACHE",
    "INV-EVENTS",
    "INV-CONSERVE",
    "RANK-BOUNDS",
    "LO-HI",
    "WATCH-PER-BLOCK",
)
"""The hypothesis H, part by part: each part is also a goal (it must survive the step)."""

STEP_RULES = (
    "ORD-HANDOUT",
    "ORD-RELEASE",
    "ORD-UNPIN",
    "WATCH-FIRE",
    "ERR-ATOMIC",
    "RES-CACHED",
    "RES-RESET",
    "RES-NUMFREE",
)
"""The rules of ``spec/rules.py`` asked of one call from a state satisfying H."""

LEMMAS = {"INV-WATCH": "WATCH-PER-BLOCK"}
"""Goals shown from another part by a lemma on every state, not by their own step: the
global count of INV-WATCH (registered == fired + pending, a sum over N x W cells) was
unknown at N=8 after 300 s as a step of its own, while its per-block form, whose sum it
is, is a step in about a second at N=8; ``WATCH-PER-BLOCK ==> INV-WATCH`` is then one
query of linear arithmetic on a fresh state. The step row of INV-WATCH is that lemma
together with WATCH-PER-BLOCK's step."""


@dataclass
class Step:
    """One symbolic step at a fixed N, with the hypothesis on its pre-state."""

    cfg: Config
    s: State
    a: Args
    r: Result
    t: State
    hyp: dict[str, z3.BoolRef]
    goals: dict[str, z3.BoolRef]
    domain: z3.BoolRef
    build_time: float = 0.0


def lo_hi(s: State) -> z3.BoolRef:
    """The ghost conjunct: the queue's order keys ``lo..hi`` are an interval, maybe empty."""
    return s.lo <= s.hi + 1


def state_obligations(cfg: Config, s: State) -> dict[str, Any]:
    """Every obligation the BMC checks on a state, plus LO-HI and WATCH-PER-BLOCK; with
    ``cfg.seq_log``, INV-EVENTS over the log as a sequence, and EVENT-LOG."""
    out = {
        **props.literal(cfg, s),
        **props.ghost(cfg, s),
        "LO-HI": lo_hi(s),
        "WATCH-PER-BLOCK": props.watch_per_block_finite(cfg, s),
    }
    if cfg.seq_log:
        out.update(props.events_seq(cfg, s))
    return out


def fire_point(cfg: Config, r: Result) -> z3.BoolRef:
    """FIRE-POINT: where a call's watchers fire, the state is consistent (every part of H
    holds on ``r.at_fire``) and none of the watchers it fires is pending there any more.

    A watcher may call back into the pool: each firing is then a nested operation applied
    to the state it sees. The first sees ``r.at_fire``; since H holds there, the step
    (proved from any state satisfying H) keeps H through every nested call, so each later
    firing and the state the outer call leaves satisfy H too, at any depth of nesting;
    and a nested call cannot fire the outer call's watchers again (they are not pending).
    """
    assert r.at_fire is not None
    d = cfg.dom
    fires = [d.sel(f, b) for f in r.fire for b in range(d.n)]  # type: ignore[attr-defined]
    once = [
        z3.Implies(d.sel(f, b), z3.Not(d.sel(p, b)))
        for f, p in zip(r.fire, r.at_fire.pend, strict=True)
        for b in range(d.n)  # type: ignore[attr-defined]
    ]
    consistent = list(state_obligations(cfg, r.at_fire).values())
    return z3.Implies(z3.Or(fires), z3.And(consistent + once))


SEQ_GOALS = ("INV-EVENTS", "EVENT-LOG", "FIRE-POINT")
"""The goals of the step with the event log as a sequence (``build(..., seq=True)``)."""


def build(
    n: int,
    K: int = 2,
    W: int = 2,
    M: int = 2,
    bugs: frozenset[str] = frozenset(),
    seq: bool = False,
) -> Step:
    """One symbolic step at N=n. With ``seq`` the event log is a sequence and the goals
    are :data:`SEQ_GOALS` only (the other goals are the plain step's)."""
    with int_sort(None):
        t0 = time.perf_counter()
        caching, events = z3.Bool("caching"), z3.Bool("events")
        cfg = Config(
            Finite(n), K=K, W=W, M=M, caching=caching, events=events, bugs=bugs, seq_log=seq
        )
        s = fresh_state(cfg, "s")
        a = fresh_args(cfg, "a")
        t, r = transition(cfg, s, a)
        hyp = state_obligations(cfg, s)
        if seq:
            post = state_obligations(cfg, t)
            goals = {
                "INV-EVENTS": post["INV-EVENTS"],
                "EVENT-LOG": post["EVENT-LOG"],
                "FIRE-POINT": fire_point(cfg, r),
            }
        else:
            goals = {
                **state_obligations(cfg, t),
                **props.step_props(cfg, s, a, r, t),
            }
        return Step(cfg, s, a, r, t, hyp, goals, args_domain(cfg, a), time.perf_counter() - t0)


def init_goals(
    n: int, K: int = 2, W: int = 2, bugs: frozenset[str] = frozenset(), seq: bool = False
) -> list[Goal]:
    """The pool as built satisfies each part of H (with ``seq``: INV-EVENTS over the
    sequence, and EVENT-LOG, only)."""
    with int_sort(None):
        cfg = Config(
            Finite(n),
            K=K,
            W=W,
            caching=z3.Bool("caching"),
            events=z3.Bool("events"),
            bugs=bugs,
            seq_log=seq,
        )
        s0 = initial(cfg)
        out = []
        for name, g in state_obligations(cfg, s0).items():
            if seq and name not in SEQ_GOALS:
                continue
            status, dt, m = isolated_check([], g, 60000)
            out.append(Goal(name, "init", status, dt, m, query=[z3.Not(g)]))
        return out


def _case(st: Step, op: str, f: z3.BoolRef) -> z3.BoolRef:
    """``f`` with the call's kind fixed to ``op``, simplified: one operation's branch only."""
    return simplify(z3.substitute(f, (st.a.kind, iv(OPK[op]))))


def conjuncts(f: z3.BoolRef) -> list[z3.BoolRef]:
    """``f`` as a list of formulas whose conjunction is equivalent to it.

    ``And(a, b)`` gives the conjuncts of a and of b; ``Implies(p, q)`` gives
    ``Implies(p, c)`` for each conjunct c of q; an ``Or`` with an ``And`` among its
    disjuncts (how ``simplify`` writes an implication) distributes over it:
    ``Or(r, And(a, b)) == And(Or(r, a), Or(r, b))``. Anything else is one conjunct.
    """
    if z3.is_and(f):
        return [g for c in f.children() for g in conjuncts(c)]
    if z3.is_implies(f):
        p, q = f.children()
        return [z3.Implies(p, g) for g in conjuncts(q)]
    if z3.is_or(f):
        ch = f.children()
        for i, c in enumerate(ch):
            if z3.is_and(c) or z3.is_implies(c):
                rest = ch[:i] + ch[i + 1 :]
                return [z3.Or(*rest, g) for g in conjuncts(c)]
    return [f]


def step_goals(
    st: Step,
    names: tuple[str, ...] | None = None,
    timeout_ms: int = 120000,
    ops: tuple[str, ...] = OPS,
    direct: bool = False,
    extra: tuple[z3.BoolRef, ...] = (),
    split: bool = True,
) -> list[Goal]:
    """Each step obligation, one case per call kind (a case split on ``a.kind``), and
    with ``split`` one query per conjunct of the case's goal (:func:`conjuncts`).

    The split on the kind keeps each query to one operation's branch of the transition;
    the kinds range over all of OPS, so together they cover every call (``args_domain``
    allows no other kind). A case is proved iff every conjunct is (asked in order, in one
    context of the case's own, :func:`model.isolated_checks`; the first one not proved
    ends it, with its answer and model); the obligation iff every case is. Split, ORD-HANDOUT's
    GetNewBlocks case at N=8 (unknown at 120 s as one query) is 152 queries, about 6 s in
    all. A goal in LEMMAS is shown by its lemma unless ``direct`` (the mutants' search,
    which wants the step itself); ``extra`` narrows the search (a mutant's search excludes
    calls it has tried).
    """
    out = []
    hyp = list(st.hyp.values())
    for name in names or tuple(st.goals):
        if name in LEMMAS and not direct:
            out.append(lemma_goal(st, name))
            continue
        for op in ops:
            # (the kind is also stated, so that a model names the call it is about)
            base = [_case(st, op, st.domain), st.a.kind == OPK[op], *hyp, *extra]
            goal = _case(st, op, st.goals[name])
            parts = conjuncts(goal) if split else [goal]
            g = Goal(name, "step", "proved", 0.0, op=op)
            answers = isolated_checks(base, parts, timeout_ms)
            for part, (status, dt, m) in zip(parts, answers, strict=False):
                g.seconds += dt
                g.queries.append([*base, z3.Not(part)])
                if status != "proved":
                    g.status, g.model = status, m
            g.query = g.queries[-1] if g.status == "refuted" else g.queries[0]
            out.append(g)
    return out


def lemma_goal(st: Step, name: str, timeout_ms: int = 120000) -> Goal:
    """``LEMMAS[name] ==> name`` on a fresh state of the same N (so also on the post-state)."""
    with int_sort(None):
        u = fresh_state(st.cfg, "u")
        obl = state_obligations(st.cfg, u)
        hyp, goal = obl[LEMMAS[name]], obl[name]
    status, dt, m = isolated_check([hyp], goal, timeout_ms)
    return Goal(name, "lemma", status, dt, m, op=f"from {LEMMAS[name]}", query=[hyp, z3.Not(goal)])


def witness(st: Step, timeout_ms: int = 60000) -> Goal:
    """A state satisfying the hypothesis, and a call: the step goals are not vacuous."""
    status, dt, m = isolated_model([st.domain, *st.hyp.values()], timeout_ms)
    return Goal("H", "witness", status, dt, m)


def witnesses(st: Step, timeout_ms: int = 60000) -> list[Goal]:
    """One witness per call kind: ``H(s) and domain and kind == op`` is satisfiable."""
    out = []
    for op in OPS:
        hs = [_case(st, op, st.domain), st.a.kind == OPK[op], *st.hyp.values()]
        status, dt, m = isolated_model(hs, timeout_ms)
        out.append(Goal("H", "witness", status, dt, m, op=op))
    return out


def lemma_witness(st: Step, name: str, timeout_ms: int = 60000) -> tuple[Goal, Any]:
    """A state satisfying the hypothesis of ``name``'s lemma (``LEMMAS[name]`` on a fresh
    state, as :func:`lemma_goal` asks it), decoded into the spec's ``PoolState``."""
    from .trace import decode_state

    with int_sort(None):
        u = fresh_state(st.cfg, "u")
        hyp = state_obligations(st.cfg, u)[LEMMAS[name]]
    status, dt, m = isolated_model([hyp], timeout_ms)
    if m is None:
        return Goal(name, "witness", status, dt), None
    n = st.cfg.dom.n  # type: ignore[attr-defined]
    caching = z3.is_true(m.eval(st.cfg.caching, model_completion=True))
    events = z3.is_true(m.eval(st.cfg.events, model_completion=True))
    ps = decode_state(m, u, n, st.cfg.K, st.cfg.W, caching, events, lambda a, i: a[i])
    return Goal(name, "witness", "sat", dt, m, op=f"lemma from {LEMMAS[name]}"), ps


def decode(st: Step, m: z3.ModelRef) -> tuple[Any, Any]:
    """The spec state and operation a model of a step stands for."""
    from .trace import decode_state, read_args, to_op

    n = st.cfg.dom.n  # type: ignore[attr-defined]
    caching = z3.is_true(m.eval(st.cfg.caching, model_completion=True))
    events = z3.is_true(m.eval(st.cfg.events, model_completion=True))
    ps = decode_state(m, st.s, n, st.cfg.K, st.cfg.W, caching, events, lambda a, i: a[i])
    return ps, to_op(read_args(m, st.a), n)
