"""Lists of symbolic length: every list-taking call as a loop, proved with a loop invariant.

The every-N induction (:mod:`kvpool.proofs.induction`, :mod:`~kvpool.proofs.counting`)
takes a call's block list as at most M = 2 symbolic entries, unrolled. Here the list is
an array ``E`` (and, for ``cache_blocks``, the keys ``KS``) with a symbolic length ``m``,
and each list-taking call -- ``free_blocks``, ``touch``, ``unpin_blocks``,
``cache_blocks``, ``evict_blocks`` -- is the spec's loop over it: one *body* per entry,
on the unbounded reading of :mod:`kvpool.proofs.model` (its ``State``, its queue moves,
its ``drop_key``). The call is refused, and changes nothing, iff some entry's *guard*
fails on the state the loop has reached there (an id that is no block, the null block
where it is refused, a decrement below 0, a block not in use or already keyed); the
refusal's kind is not stated. That is the spec's check: "listed more often than its
ref_cnt" is "some decrement, in list order, finds ref_cnt 0", and a repeated entry of
``cache_blocks`` is an entry whose block the loop has already keyed
(:func:`agreement_goals` asks z3 that the loop and ``model.py``'s unrolled calls agree
on every list of at most 3 entries).

Each property P is proved for every N and every m with a loop invariant ``I(j, s_j)``
(``s_j``: the state after the first j entries; ``I`` is S of :mod:`~kvpool.proofs.props`
with the loop's own facts, and for the counts :func:`counting.invariant` with ghost sums):

* **loop init**: ``S(s)`` gives ``I(0, s)``;
* **loop step**: ``I(j, s_j)``, ``0 <= j < m`` and entry j's guard give
  ``I(j + 1, body(s_j, E[j]))`` -- one query, for every j and m;
* **loop exit**: ``I(m, s_m)`` gives P of the call's post-state (``s_m``, and for
  ``cache_blocks`` its one BlockStored counted).

The other call kinds take no list: their steps are :mod:`~kvpool.proofs.induction`'s
and :mod:`~kvpool.proofs.counting`'s own (for every N; ``get_new_blocks(n)`` with n
symbolic). ORD-UNPIN and ORD-RELEASE are proved the same way (:func:`rule_goals`), "the
entries reaching ref_cnt 0" counted by ghost arrays defined by their recurrences over
the list, and WATCH-FIRE (:func:`watch_goals`: these calls fire nothing, so no watcher
may stop pending). ERR-ATOMIC (:func:`atomic_goals`): the loop carries whether every
entry so far was accepted and what a refusal leaves (:func:`refusal_left`: the
pre-state, since the spec checks every entry before it changes anything); its loop
invariant is that a refusal so far leaves the pre-state, and at the exit a refused
call's post-state is the pre-state, every field. Its mutant ``free-refusal-keeps-prefix``
(a refusal at the third entry or later keeps what the entries before did) shows only
with lists of >= 3 entries. Keys and watcher ids stay K=2 and W=2 here (the state's
per-key and per-watcher arrays); :mod:`kvpool.proofs.symsorts` states some obligations
with them as uninterpreted sorts.

Mutants are refuted twice: the loop step's query fails (z3 gives an entry and a loop
state), and the loop unrolled to at most :data:`UNROLL` entries from a state satisfying
S gives a counterexample that is decoded and replayed on the buggy spec.
``free-third-unqueued`` only shows at list length >= 3: the every-N induction's lists
(<= 2 entries) cannot hold it, and this module's loop step proved with ``m <= 2`` is
not refuted by it either (:func:`goals` with ``max_m=2``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from . import counting, props
from .model import (
    OPK,
    Config,
    Goal,
    State,
    Unbounded,
    _pending_any,
    all_proved,
    any_refuted,
    blank_mutant_row,
    drop_key,
    fresh_args,
    fresh_state,
    goal_row,
    goals_ladder,
    guarded,
    hypothesis_model,
    isolated_check,
    iv,
    judged_row,
    merge,
    name_rows,
    named,
    not_proved_op,
    q_append,
    q_remove,
    replay_ladder,
    robust_check,
    state_eq,
    transition,
)

I = z3.IntSort()  # noqa: E741
B = z3.BoolSort()

LIST_OPS: tuple[str, ...] = ("FreeBlocks", "Touch", "UnpinBlocks", "CacheBlocks", "EvictBlocks")
"""The call kinds that take a block list (the rest take none: see the module docstring)."""

S_PARTS: tuple[str, ...] = tuple(props.STRONG_PARTS)
SUPPORT: dict[str, tuple[str, ...]] = {
    "INV-REF": ("INV-REF",),
    "PERM": ("PERM", "INV-REF"),
    "INV-NULL": ("INV-NULL",),
    "WATCH-PER-BLOCK": ("WATCH-PER-BLOCK", "INV-NULL"),
    "INV-CACHE": ("INV-CACHE", "INV-NULL"),
    "INV-EVENTS": ("INV-EVENTS", "INV-CACHE", "INV-NULL"),
    "INV-CONSERVE": ("PERM", "INV-REF"),
    "INV-WATCH": ("WATCH-PER-BLOCK", "INV-NULL"),
}
"""The parts of S each part's loop step is proved from (all of S implies them, so a proof
from them is a proof from S). With all of S as the hypothesis, PERM's step was proved or
unknown at 60 s depending on z3's seed (unpin_blocks: unknown at seed 1; touch: at 3 of
4 seeds); from PERM and INV-REF it was proved at every one of 6 seeds in under 0.5 s.
A witness is a model of all of S (:func:`witness_goals`)."""
COUNT_PARTS: tuple[str, ...] = counting.PARTS
PARTS: tuple[str, ...] = (*S_PARTS, *COUNT_PARTS)

UNROLL = 3
"""Entries the loop is unrolled to for a mutant's decodable counterexample."""

LIST_MUTANTS: dict[str, tuple[str, str]] = {
    # mutant -> (the part it breaks, the call kind it changes)
    "no-underflow-check": ("INV-REF", "FreeBlocks"),
    "touch-no-remove": ("PERM", "Touch"),
    "touch-null": ("INV-NULL", "Touch"),
    "unpin-append-always": ("PERM", "UnpinBlocks"),
    "unpin-dup-watcher": ("WATCH-PER-BLOCK", "UnpinBlocks"),
    "cache-when-off": ("INV-CACHE", "CacheBlocks"),
    "stored-event-missing": ("INV-EVENTS", "CacheBlocks"),
    "evict-keeps-index": ("INV-CACHE", "EvictBlocks"),
    "removed-per-block": ("INV-EVENTS", "EvictBlocks"),
    "free-third-unqueued": ("PERM", "FreeBlocks"),
}
"""The every-N induction's mutants of a list-taking call, and one that only a list of at
least 3 entries shows (``free-third-unqueued``: free_blocks does not queue its third
entry when it reaches ref_cnt 0)."""

LONG_LIST_MUTANT = "free-third-unqueued"

COUNT_MUTANTS: dict[str, tuple[str, str]] = {
    "touch-no-remove": ("INV-CONSERVE", "Touch"),
    "unpin-append-always": ("INV-CONSERVE", "UnpinBlocks"),
}
"""The counting proof's mutants of a list-taking call (its third, watcher-kept, is
get_new_blocks'): each must fail the count's loop step too. Their unrolled
counterexample is PERM's (no ghost sums there), replayed against INV-CONSERVE."""


@dataclass
class LArgs:
    """A list-taking call: its kind, the list ``E[0..m)`` (and keys ``KS[0..km)``),
    evict_first, the watcher id."""

    kind: Any
    m: Any
    E: Any
    KS: Any
    km: Any
    ef: Any
    w: Any


def fresh_largs(name: str) -> LArgs:
    arr = z3.ArraySort(I, I)
    return LArgs(
        z3.Int(f"{name}.kind"),
        z3.Int(f"{name}.m"),
        z3.Const(f"{name}.E", arr),
        z3.Const(f"{name}.KS", arr),
        z3.Int(f"{name}.km"),
        z3.Bool(f"{name}.ef"),
        z3.Int(f"{name}.w"),
    )


@dataclass
class Loop:
    """The loop's state after some entries: the pool ``s``, how many entries went to the
    front so far (free_blocks: FRONT keeps list order), the queue's length at entry."""

    s: State
    f: Any
    L0: Any


def _cfg(bugs: frozenset[str], K: int = 2, W: int = 2) -> Config:
    return Config(
        Unbounded(), K=K, W=W, M=1, caching=z3.Bool("caching"), events=z3.Bool("events"), bugs=bugs
    )


def q_insert(d: Any, s: State, x: Any, f: Any) -> State:
    """Block ``x`` (in use) joins the queue at position ``f`` (``0 <= f <= L``); the blocks
    from f on move back one (``f = 0``: model.q_prepend; ``f = L``: q_append)."""
    L = s.L
    p = d.sel(s.pos, x)
    y = d.sel(s.q, L)
    q = d.mk(
        lambda i: z3.If(
            i == f,
            x,
            z3.If(z3.And(f < i, i <= L), d.sel(s.q, i - 1), z3.If(i == p, y, d.sel(s.q, i))),
        ),
        I,
    )

    def npos(b: Any) -> Any:
        pb = d.sel(s.pos, b)
        return z3.If(b == x, f, z3.If(z3.And(pb >= f, pb < L), pb + 1, z3.If(b == y, p, pb)))

    return replace(s, q=q, pos=d.mk(npos, I), L=L + 1)


# -- the calls' loops ---------------------------------------------------------------------


def closed_checks(cfg: Config, op: str, a: LArgs) -> Any:
    """The call's checks that read no entry (they hold, or the call is refused)."""
    if op == "CacheBlocks":
        c = [a.m == a.km]
        if "cache-when-off" not in cfg.bugs:
            c.append(cfg.caching)
        return z3.And(c)
    return z3.BoolVal(True)


def guard(cfg: Config, op: str, lp: Loop, x: Any) -> Any:
    """Entry ``x`` is accepted on the loop's state (else the whole call is refused)."""
    d, s = cfg.dom, lp.s
    ok = [x >= 0, x < d.N]
    if op in ("UnpinBlocks", "CacheBlocks", "EvictBlocks"):
        ok.append(x != 0)
    if op == "FreeBlocks" and "no-underflow-check" not in cfg.bugs:
        ok.append(z3.Or(x == 0, d.sel(s.ref, x) >= 1))
    if op == "UnpinBlocks":
        ok.append(d.sel(s.ref, x) >= 1)
    if op == "CacheBlocks":
        ok += [d.sel(s.ref, x) >= 1, d.sel(s.key, x) == 0]
    return z3.And(ok)


def body(cfg: Config, op: str, lp: Loop, a: LArgs, j: Any) -> Loop:
    """One entry of the call's loop: entry ``j`` (block ``E[j]``, key ``KS[j]``)."""
    d, t = cfg.dom, lp.s
    x = z3.Select(a.E, j)
    bugs = cfg.bugs
    if op == "FreeBlocks":
        live = x != 0
        r = d.sel(t.ref, x) - 1
        t = replace(t, ref=d.ite(live, d.store(t.ref, x, r, I), t.ref))
        zero = z3.And(live, r == 0)
        if "free-third-unqueued" in bugs:
            zero = z3.And(zero, j != 2)
        ef = z3.BoolVal(False) if "evict-first-ignored" in bugs else a.ef
        to_front = z3.Or(d.sel(t.key, x) == 0, z3.Not(cfg.caching), ef)
        at = iv(0) if "front-reversed" in bugs else lp.f
        t = guarded(d, z3.And(zero, to_front), lambda u: q_insert(d, u, x, at), t)
        t = guarded(d, z3.And(zero, z3.Not(to_front)), lambda u: q_append(d, u, x), t)
        return Loop(t, lp.f + z3.If(z3.And(zero, to_front), iv(1), iv(0)), lp.L0)
    if op == "Touch":
        live = z3.BoolVal(True) if "touch-null" in bugs else x != 0
        r = d.sel(t.ref, x)
        if "touch-no-remove" not in bugs:
            t = guarded(d, z3.And(live, r == 0, x != 0), lambda u: q_remove(d, u, x), t)
        t = replace(t, ref=d.ite(live, d.store(t.ref, x, r + 1, I), t.ref))
        return Loop(t, lp.f, lp.L0)
    if op == "UnpinBlocks":
        r = d.sel(t.ref, x) - 1
        t = replace(t, ref=d.store(t.ref, x, r, I))
        already = z3.Or([z3.And(a.w == w, d.sel(t.pend[w], x)) for w in range(cfg.W)])
        if "unpin-dup-watcher" in bugs:
            already = z3.BoolVal(False)
        new = z3.Not(already)
        first = z3.Not(_pending_any(cfg, t, x))
        pend = [
            d.ite(z3.And(new, a.w == w), d.store(t.pend[w], x, z3.BoolVal(True), B), t.pend[w])
            for w in range(cfg.W)
        ]
        if "unpin-replaces-watcher" in bugs:  # the new watcher replaces the ones pending
            pend = [
                d.ite(z3.And(new, a.w != w), d.store(p, x, z3.BoolVal(False), B), p)
                for w, p in enumerate(pend)
            ]
        wst = [
            d.ite(
                z3.And(new, a.w == w, z3.Not(d.sel(t.pend[w], x))),
                d.store(t.wst[w], x, t.clock, I),
                t.wst[w],
            )
            for w in range(cfg.W)
        ]
        bst = d.ite(first, d.store(t.bst, x, t.clock, I), t.bst)
        reg = d.ite(new, d.store(t.reg, x, d.sel(t.reg, x) + 1, I), t.reg)
        t = replace(t, pend=pend, wst=wst, bst=bst, reg=reg, clock=t.clock + 1)
        released = z3.BoolVal(True) if "unpin-append-always" in bugs else r == 0
        if "unpin-reversed" in bugs:  # each released block ahead of the ones before it
            t = guarded(d, released, lambda u: q_insert(d, u, x, lp.L0), t)
        else:
            t = guarded(d, released, lambda u: q_append(d, u, x), t)
        return Loop(t, lp.f, lp.L0)
    if op == "CacheBlocks":
        k = z3.Select(a.KS, j)
        idx = t.idx
        if "cache-skips-index" not in bugs:
            idx = [
                d.ite(k == kk, d.store(t.idx[kk - 1], x, z3.BoolVal(True), B), t.idx[kk - 1])
                for kk in range(1, cfg.K + 1)
            ]
        view = list(t.view)
        if "stored-event-missing" not in bugs:
            view = [z3.Or(v, z3.And(cfg.events, k == kk)) for kk, v in enumerate(view, 1)]
        t = replace(
            t,
            key=d.store(t.key, x, k, I),
            kst=d.store(t.kst, x, t.clock, I),
            idx=idx,
            view=view,
            clock=t.clock + 1,
        )
        return Loop(t, lp.f, lp.L0)
    if op == "EvictBlocks":
        return Loop(drop_key(cfg, t, x, True), lp.f, lp.L0)
    raise ValueError(f"not a list-taking call: {op}")


def finish(cfg: Config, op: str, lp: Loop, a: LArgs) -> State:
    """The call's post-state from the loop's last state (cache_blocks logs one
    BlockStored for the whole call)."""
    t = lp.s
    if op == "CacheBlocks" and "stored-event-missing" not in cfg.bugs:
        t = replace(t, nev=t.nev + z3.If(z3.And(cfg.events, a.m > 0), iv(1), iv(0)))
    return t


def loop_facts(cfg: Config, op: str, lp: Loop) -> list[Any]:
    """What the loop invariant says besides S: FRONT's count fits in the queue; the queue
    only grows in free_blocks and unpin_blocks (from its length at entry ``L0``)."""
    if op == "FreeBlocks":
        return [lp.f >= 0, lp.f <= lp.s.L]
    if op == "UnpinBlocks":
        return [lp.L0 >= 0, lp.L0 <= lp.s.L]
    return []


def refusal_left(cfg: Config, op: str, s: State, u: State, j: Any) -> State:
    """What a refusal at entry ``j`` leaves, ``u`` the state the loop has reached there:
    the pre-state ``s`` (the spec checks every entry before it changes anything). The
    mutant :data:`ATOMIC_MUTANT` keeps, in free_blocks refused at its third entry or
    later, what the entries before it did."""
    if ATOMIC_MUTANT in cfg.bugs and op == "FreeBlocks":
        return merge(cfg.dom, j >= 2, u, s)
    return s


def unrolled(cfg: Config, op: str, s: State, a: LArgs, n: int) -> tuple[State, Any]:
    """The call on a list of at most ``n`` entries, its loop unrolled: the post-state and
    whether the call is accepted (a refused call leaves what :func:`refusal_left` says
    at its first failing entry)."""
    lp = Loop(s, iv(0), s.L)
    ok = [closed_checks(cfg, op, a)]
    left = s  # what the call leaves if refused (the closed checks: the pre-state)
    for j in range(n):
        live = iv(j) < a.m
        g = guard(cfg, op, lp, z3.Select(a.E, j))
        here = z3.And(live, z3.And(ok), z3.Not(g))  # the first failing entry
        left = merge(cfg.dom, here, refusal_left(cfg, op, s, lp.s, iv(j)), left)
        ok.append(z3.Implies(live, g))
        nxt = body(cfg, op, lp, a, iv(j))
        lp = Loop(
            guarded(cfg.dom, live, lambda _u, nxt=nxt: nxt.s, lp.s),  # type: ignore[misc]
            z3.If(live, nxt.f, lp.f),
            lp.L0,
        )
    accepted = z3.And(ok)
    t = finish(cfg, op, lp, a)
    return merge(cfg.dom, accepted, t, left), accepted


def domain(cfg: Config, a: LArgs, j: Any) -> Any:
    """Entry ``j``'s range (id N stands for an id that is no block), and the call's."""
    N = cfg.dom.N
    x, k = z3.Select(a.E, j), z3.Select(a.KS, j)
    return z3.And(x >= 0, x <= N, k >= 1, k <= cfg.K, a.w >= 0, a.w < cfg.W, a.m >= 0, a.km >= 0)


# -- the obligations ----------------------------------------------------------------------


def _corrected(A: Any, f: Any, f2: Any, x: Any, lo: Any) -> Any:
    """Ghost prefix sums ``A`` of ``f``, corrected for ``f`` becoming ``f2`` at block x."""
    i = z3.Int("ci")
    return z3.Lambda([i], z3.Select(A, i) + z3.If(z3.And(lo <= x, x < i), f2(x) - f(x), iv(0)))


def obligations(
    op: str, bugs: frozenset[str] = frozenset(), max_m: int | None = None, full: bool = False
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """Every loop obligation of ``op`` as (part, case, hypotheses, goal, ctx); ``max_m``
    bounds the list's length (None: every length). A loop step's hypothesis holds the
    parts of S its part needs (:data:`SUPPORT`), or all of S with ``full``."""
    cfg = _cfg(bugs)
    d = cfg.dom
    N = d.N
    a = fresh_largs("a")
    base = [N >= 1, a.kind == OPK[op], closed_checks(cfg, op, a), a.m >= 0, a.km >= 0]
    base += [a.w >= 0, a.w < cfg.W]
    if max_m is not None:
        base.append(a.m <= max_m)
    out: list[tuple[str, str, list[Any], Any, Any]] = []

    # loop init: the pre-state s, no entry done yet
    s = fresh_state(cfg, "s", globals_=False)
    S0 = props.strong(cfg, s)
    lp0 = Loop(s, iv(0), s.L)
    g0 = counting.fresh_ghost("g")
    C0 = counting.invariant(cfg, s, g0)
    init_hyp = [*base, *S0.values()]
    for p in S_PARTS:
        out.append(
            (p, "loop init", init_hyp, z3.And(S0[p], *loop_facts(cfg, op, lp0)), (cfg, s, a))
        )
    for p in COUNT_PARTS:
        out.append((p, "loop init", [*init_hyp, *C0.values()], C0[p], (cfg, s, a, g0)))

    # loop step: entry j on the state s_j the loop has reached
    sj = fresh_state(cfg, "sj", globals_=False)
    lp = Loop(sj, z3.Int("f"), z3.Int("L0"))
    j = z3.Int("j")
    x = z3.Select(a.E, j)
    Sj = props.strong(cfg, sj)
    step_hyp = [
        *base,
        j >= 0,
        j < a.m,
        domain(cfg, a, j),
        *loop_facts(cfg, op, lp),
        guard(cfg, op, lp, x),
    ]

    def support(p: str) -> list[Any]:
        return list(Sj.values()) if full else [Sj[q] for q in SUPPORT[p]]

    nxt = body(cfg, op, lp, a, j)
    St = props.strong(cfg, nxt.s)
    ctx = (cfg, sj, a, j)
    for p in S_PARTS:
        goal = z3.And(St[p], *loop_facts(cfg, op, nxt))
        out.append((p, "loop step", [*step_hyp, *support(p)], goal, ctx))
    gj = counting.fresh_ghost("gj")
    t = nxt.s
    new_reg: Any = iv(0)
    if op == "UnpinBlocks":
        already = z3.Or([z3.And(a.w == w, d.sel(sj.pend[w], x)) for w in range(cfg.W)])
        if "unpin-dup-watcher" in bugs:
            already = z3.BoolVal(False)
        new_reg = z3.If(already, iv(0), iv(1))
    g2 = counting.Ghost(
        _corrected(gj.C, counting.in_use(d, sj), counting.in_use(d, t), x, iv(1)),
        _corrected(gj.P, counting.pending(d, sj), counting.pending(d, t), x, iv(0)),
        gj.registered + new_reg,
        gj.fired,
    )
    Cj = counting.invariant(cfg, sj, gj)
    Ct = counting.invariant(cfg, t, g2)
    for p in COUNT_PARTS:
        out.append((p, "loop step", [*step_hyp, *support(p), *Cj.values()], Ct[p], (*ctx, lp, gj)))

    # loop exit: the state after the m-th entry is the call's post-state
    sm = fresh_state(cfg, "sm", globals_=False)
    lpm = Loop(sm, z3.Int("fm"), z3.Int("L0m"))
    Sm = props.strong(cfg, sm)
    post = finish(cfg, op, lpm, a)
    Sp = props.strong(cfg, post)
    gm = counting.fresh_ghost("gm")
    Cm = counting.invariant(cfg, sm, gm)
    Cp = counting.invariant(cfg, post, gm)
    exit_hyp = [*base, *Sm.values(), *loop_facts(cfg, op, lpm)]
    for p in S_PARTS:
        out.append((p, "loop exit", exit_hyp, Sp[p], (cfg, sm, a)))
    for p in COUNT_PARTS:
        out.append((p, "loop exit", [*exit_hyp, *Cm.values()], Cp[p], (cfg, sm, a, None, gm)))
    if "hyp-false" in bugs:  # a test's seeded vacuity
        out = [(p, c, [*h, z3.BoolVal(False)], g, x_) for p, c, h, g, x_ in out]
    return out


REFUTE_NS = (1, 2, 3, 4, 5, 6)
"""The pool sizes a refutation is looked for at, one after the other: z3 finds a model of
the quantified hypotheses far sooner at a fixed N than with N only bounded (measured:
free-third-unqueued's unrolled query, unknown at 30 s with N <= 6, refuted in 1-5 s at
each N = 3..5)."""


SEEDS = 3
"""A proof still unknown is asked again at the next z3 seed, up to this many seeds (an
unsat at any seed is a proof; a quantified query's unknown may change with the seed)."""


def _prove(
    hyp: list[Any], goal: Any, timeout_ms: int, seed: int
) -> tuple[str, float, z3.ModelRef | None]:
    """``hyp => goal`` up :func:`model.robust_check`'s ladder from seed ``seed``
    (:data:`SEEDS` rungs, the time doubling from a fourteenth of ``timeout_ms``: all of
    them take at most half of it, as before; proofs take well under 1 s)."""
    first = max(timeout_ms // (2 * ((1 << SEEDS) - 1)), 1000)
    return robust_check(hyp, goal, first, SEEDS, first_seed=seed)


def _ask(
    hyp: list[Any], goal: Any, N: Any, timeout_ms: int, refute: bool, seed: int
) -> tuple[str, float, z3.ModelRef | None]:
    """A proof (``refute`` False), or a refutation at the first N of :data:`REFUTE_NS`
    that has one (each asked with ``timeout_ms``): then "refuted", else "unknown" if any
    N was unknown, else "proved" (at those N only: a proof is asked without ``refute``)."""
    if not refute:
        return _prove(hyp, goal, timeout_ms, seed)
    total, seen = 0.0, set()
    for n in REFUTE_NS:
        status, dt, m = isolated_check([*hyp, n == N], goal, timeout_ms, seed)
        total += dt
        seen.add(status)
        if status == "refuted":
            return status, total, m
    return ("unknown" if "unknown" in seen else "proved"), total, None


def goals(
    parts: tuple[str, ...] = PARTS,
    ops: tuple[str, ...] = LIST_OPS,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    max_m: int | None = None,
    seed: int = 0,
) -> list[Goal]:
    """Each loop obligation proved (with ``refute``: looked for at each N of
    :data:`REFUTE_NS`, stopping at the first refutation)."""
    out: list[Goal] = []
    for op in ops:
        for p, case, hyp, goal, ctx in obligations(op, bugs, max_m):
            if p not in parts or (cases is not None and case not in cases):
                continue
            with named(f"symlists: {p} / {op} / {case}"):
                status, dt, m = _ask(hyp, goal, ctx[0].dom.N, timeout_ms, refute, seed)
            out.append(Goal(p, case, status, dt, m, ctx, op=op))
            if refute and status == "refuted":
                return out
    return out


def unrolled_goal(
    part: str,
    op: str,
    bugs: frozenset[str],
    timeout_ms: int = 30000,
    n: int = UNROLL,
    seed: int = 0,
) -> Goal:
    """``S(s)`` and the call on at most ``n`` entries (the loop unrolled) ==> ``part`` of
    the post-state: a refutation is a concrete pre-state and call, for the replay."""
    cfg = _cfg(bugs)
    N = cfg.dom.N
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_largs("a")
    t, _ok = unrolled(cfg, op, s, a, n)
    hyp = [a.kind == OPK[op], a.m >= 0, a.m <= n, *props.strong(cfg, s).values()]
    hyp += [domain(cfg, a, iv(j)) for j in range(n)]
    with named(f"symlists: {part} / {op} / unrolled <= {n}"):
        status, dt, m = _ask(hyp, props.strong(cfg, t)[part], N, timeout_ms, True, seed)
    return Goal(part, f"unrolled <= {n}", status, dt, m, (cfg, s, a), op=op)


def agreement_goals(
    ops: tuple[str, ...] = LIST_OPS,
    n: int = UNROLL,
    timeout_ms: int = 60000,
    bugs: frozenset[str] = frozenset(),
) -> list[Goal]:
    """The loop (unrolled to ``n``) and ``model.py``'s call on lists of at most ``n``
    entries (``Config(M=n)``) agree from every state satisfying S: the same calls are
    refused, and an accepted call leaves the same ref_cnts, keys, index, pending
    watchers, ghost counters, event view and count, and the same queue ``q[0..L)``.
    This ties the loop's guards (the checks as the loop meets them) to the bounded
    encoding's checks (as the spec states them: counts, duplicates). ``bugs`` go into
    the loop only (a test's way to show the check can fail)."""
    out: list[Goal] = []
    for op in ops:
        cfg = _cfg(bugs)
        cfgm = replace(cfg, M=n, bugs=frozenset())
        d = cfg.dom
        s = fresh_state(cfg, "s", globals_=False)
        a = fresh_largs("a")
        am = fresh_args(cfgm, "am")
        t, ok = unrolled(cfg, op, s, a, n)
        tm, rm = transition(cfgm, s, am)
        same = [am.kind == a.kind, am.m == a.m, am.km == a.km, am.ef == a.ef, am.w == a.w]
        same += [am.e[j] == z3.Select(a.E, j) for j in range(n)]
        same += [am.ks[j] == z3.Select(a.KS, j) for j in range(n)]
        hyp = [d.N >= 1, a.kind == OPK[op], a.m >= 0, a.m <= n, a.km >= 0, a.km <= n, *same]
        hyp += [domain(cfg, a, iv(j)) for j in range(n)]
        hyp += props.strong(cfg, s).values()
        fields_ = same_state(d, t, tm)
        goal = z3.And(ok == (rm.err == 0), z3.Implies(ok, z3.And(fields_)))
        with named(f"symlists: loop == model.py / {op} / lists <= {n}"):
            status, dt, m = isolated_check(hyp, goal, timeout_ms)
        out.append(Goal("agreement", f"lists <= {n}", status, dt, m, (cfg, s, a), op=op))
    return out


def same_state(d: Any, t: Any, tm: Any) -> list[z3.BoolRef]:
    """Field by field, the loop's post-state ``t`` equals model.py's ``tm`` (over the
    domain ``d``): ref counts, keys, registrations, free links, the queue (its length and
    each position below it), the event count, the index, pending watchers and the view."""
    i = z3.Int("qi")
    return [
        d.eq(t.ref, tm.ref),
        d.eq(t.key, tm.key),
        d.eq(t.reg, tm.reg),
        d.eq(t.fb, tm.fb),
        t.L == tm.L,
        t.nev == tm.nev,
        *[d.eq(x, y) for x, y in zip(t.idx, tm.idx, strict=True)],
        *[d.eq(x, y) for x, y in zip(t.pend, tm.pend, strict=True)],
        *[x == y for x, y in zip(t.view, tm.view, strict=True)],
        z3.ForAll(
            [i], z3.Implies(z3.And(i >= 0, i < t.L), z3.Select(t.q, i) == z3.Select(tm.q, i))
        ),
    ]


def witness_goals(timeout_ms: int = 20000, n: int = 3) -> list[Goal]:
    """Each distinct hypothesis has a model at N = n: the loop step's with a list of at
    least 3 entries and j = 2 preferred (seeds 0..3 tried)."""
    out: list[Goal] = []
    for op in LIST_OPS:
        seen: set[tuple[str, bool]] = set()
        for p, case, hyp, _goal, ctx in obligations(op, full=True):
            key = (case, p in COUNT_PARTS)
            if key in seen:
                continue
            seen.add(key)
            cfg, a = ctx[0], ctx[2]
            prefer: list[Any] = [a.m >= 3]
            if case == "loop step":
                prefer.append(ctx[3] == 2)
            st, dt, m = hypothesis_model([*hyp, n == cfg.dom.N], [prefer, []], timeout_ms)
            out.append(Goal(p, case, st, dt, m, ctx, op=op))
    for rule, op in RULE_OPS.items():
        for r, case, hyp, _goal, ctx in rule_obligations(rule, full=True):
            cfg, a, g = ctx[0], ctx[2], ctx[4]
            # the ghosts pinned to their closed form on a list of 3 entries (z3 finds no
            # model of their recurrences alone in minutes): still a model of ``hyp``
            closed = _ghosts(cfg, op, ctx[-1] if len(ctx) > 6 else ctx[1], a, upto=UNROLL)
            pins = [a.m == UNROLL, g.Cnt == closed.Cnt]
            pins += [g.pre[c] == closed.pre[c] for c in g.pre]
            prefer = [*pins, *([ctx[3] == 2] if case == "loop step" else [])]
            st, dt, m = hypothesis_model([*hyp, n == cfg.dom.N], [prefer, pins], timeout_ms)
            out.append(Goal(r, case, st, dt, m, ctx, op=op))
    for op in LIST_OPS:
        for r, case, hyp, _goal, ctx in watch_obligations(op, full=True):
            cfg, a = ctx[0], ctx[2]
            prefer = [a.m >= 3, *([ctx[3] == 2] if case == "loop step" else [])]
            st, dt, m = hypothesis_model([*hyp, n == cfg.dom.N], [prefer, []], timeout_ms)
            out.append(Goal(r, case, st, dt, m, ctx, op=op))
    return out + atomic_witness_goals(timeout_ms, n)


def atomic_witness_goals(timeout_ms: int = 20000, n: int = 3) -> list[Goal]:
    """ERR-ATOMIC's loop hypotheses (with all of S) each have a model at N = n: a list of
    at least 3 entries and j = 2 preferred."""
    out: list[Goal] = []
    for op in LIST_OPS:
        for r, case, hyp, _goal, ctx in atomic_obligations(op, full=True):
            cfg, a = ctx[0], ctx[2]
            prefer = [a.m >= 3, *([ctx[3] == 2] if case == "loop step" else [])]
            st, dt, m = hypothesis_model([*hyp, n == cfg.dom.N], [prefer, []], timeout_ms)
            out.append(Goal(r, case, st, dt, m, ctx, op=op))
    return out


# -- the ordering rules, for every list length --------------------------------------------

RULE_OPS: dict[str, str] = {"ORD-UNPIN": "UnpinBlocks", "ORD-RELEASE": "FreeBlocks"}
"""The rules of ``spec/rules.py`` about a list-taking call's order, and their call."""

RULE_MUTANTS: dict[str, str] = {
    "unpin-reversed": "ORD-UNPIN",
    "front-reversed": "ORD-RELEASE",
    "evict-first-ignored": "ORD-RELEASE",
}


@dataclass
class Ghosts:
    """The counts a rule speaks of, each defined by its recurrence over the list:
    ``cnt(x, j)`` listings of block x among the first j entries, and per class of entries
    (``U``: reaching ref_cnt 0; ``F``/``B``: reaching it to the front/back) the prefix
    count ``pre[c](j)`` of the first j entries in that class."""

    Cnt: Any
    pre: dict[str, Any]
    classes: dict[str, Any]
    recs: list[Any]

    def cnt(self, x: Any, j: Any) -> Any:
        return z3.Select(self.Cnt, x, j)

    def at(self, c: str, j: Any) -> Any:
        return z3.Select(self.pre[c], j)


def keyless(d: Any, s: Any, b: Any) -> Any:
    """Block ``b`` holds no key: ``key[b] == 0``, or on :mod:`~kvpool.proofs.symsorts`'
    state (keys of a sort) ``keyed[b]`` false. The rules' ghosts read it, so that the
    sorted loops reuse them."""
    keyed = getattr(s, "keyed", None)
    return z3.Not(d.sel(keyed, b)) if keyed is not None else d.sel(s.key, b) == 0


def _ghosts(
    cfg: Config, op: str, s: State, a: LArgs, upto: int | None = None, tag: str = ""
) -> Ghosts:
    """The rule's ghosts, defined by their recurrences; with ``upto`` (a list of at most
    that many entries) as closed-form sums instead, for a counterexample's search. ``tag``
    ends their names (:mod:`kvpool.proofs.twolists`: one set of ghosts per pool)."""
    d = cfg.dom
    Cnt = z3.Array(f"Cnt{tag}", I, I, I)
    x, j = z3.Ints("g_x g_j")
    if upto is not None:
        Cnt = z3.Lambda(
            [x, j],
            z3.Sum(
                [
                    z3.If(z3.And(k < j, k < a.m, z3.Select(a.E, k) == x), iv(1), iv(0))
                    for k in range(upto)
                ]
            ),
        )

    def E(k: Any) -> Any:
        return z3.Select(a.E, k)

    def in_range(k: Any) -> Any:
        return z3.And(k >= 0, k < a.m)

    recs = [
        z3.ForAll([x], z3.Select(Cnt, x, 0) == 0),
        z3.ForAll(
            [x, j],
            z3.Implies(
                in_range(j),
                z3.Select(Cnt, x, j + 1) == z3.Select(Cnt, x, j) + z3.If(E(j) == x, iv(1), iv(0)),
            ),
        ),
    ]

    def zero(k: Any) -> Any:
        """Entry k brings its block's ref_cnt to 0: the spec's "the entries reaching
        ref_cnt 0" (null entries are skipped by free_blocks)."""
        b = E(k)
        return z3.And(b != 0, d.sel(s.ref, b) == z3.Select(Cnt, b, k + 1))

    if op == "UnpinBlocks":
        classes = {"U": zero}
    else:

        def front(k: Any) -> Any:
            return z3.Or(keyless(d, s, E(k)), z3.Not(cfg.caching), a.ef)

        classes = {
            "F": lambda k: z3.And(zero(k), front(k)),
            "B": lambda k: z3.And(zero(k), z3.Not(front(k))),
        }
    if upto is not None:
        pre = {
            c: z3.Lambda(
                [j],
                z3.Sum(
                    [z3.If(z3.And(k < j, k < a.m, f(iv(k))), iv(1), iv(0)) for k in range(upto)]
                ),
            )
            for c, f in classes.items()
        }
        return Ghosts(Cnt, pre, classes, [])
    pre = {c: z3.Array(f"pre{c}{tag}", I, I) for c in classes}
    for c, f in classes.items():
        recs.append(z3.Select(pre[c], 0) == 0)
        recs.append(
            z3.ForAll(
                [j],
                z3.Implies(
                    in_range(j),
                    z3.Select(pre[c], j + 1) == z3.Select(pre[c], j) + z3.If(f(j), iv(1), iv(0)),
                ),
            )
        )
    return Ghosts(Cnt, pre, classes, recs)


def _shape(cfg: Config, op: str, s: State, a: LArgs, g: Ghosts, u: Loop, j: Any) -> list[Any]:
    """The rule, for the first ``j`` entries, on the loop's state ``u``: ORD-UNPIN's new
    queue is ``q[0..L)`` then the entries reaching ref_cnt 0 in list order; ORD-RELEASE's
    is FRONT, then ``q[0..L)``, then BACK, each in list order."""
    d, L = cfg.dom, s.L
    i, k = z3.Ints("r_i r_k")

    def E(k: Any) -> Any:
        return z3.Select(a.E, k)

    def q(i: Any) -> Any:
        return d.sel(u.s.q, i)

    if op == "UnpinBlocks":
        U = g.classes["U"]
        return [
            L + g.at("U", j) == u.s.L,
            z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < L), q(i) == d.sel(s.q, i))),
            z3.ForAll(
                [k],
                z3.Implies(z3.And(k >= 0, k < j, U(k)), q(L + g.at("U", k)) == E(k)),
            ),
        ]
    F, B = g.classes["F"], g.classes["B"]
    f = g.at("F", j)
    return [
        L + f + g.at("B", j) == u.s.L,
        z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < L), q(f + i) == d.sel(s.q, i))),
        z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < j, F(k)), q(g.at("F", k)) == E(k))),
        z3.ForAll([k], z3.Implies(z3.And(k >= 0, k < j, B(k)), q(f + L + g.at("B", k)) == E(k))),
    ]


def _tracks(cfg: Config, op: str, s: State, g: Ghosts, u: Loop, j: Any) -> list[Any]:
    """The loop's own facts for a rule: each block's ref_cnt is its count less its
    listings so far, keys are unchanged, FRONT's count is ``f``."""
    d = cfg.dom
    b = z3.Int("r_b")
    out = [
        z3.ForAll(
            [b],
            z3.Implies(z3.And(b >= 1, b < d.N), d.sel(u.s.ref, b) == d.sel(s.ref, b) - g.cnt(b, j)),
        ),
        u.s.key == s.key,
        *([getattr(u.s, "keyed") == s.keyed] if hasattr(s, "keyed") else []),  # noqa: B009
    ]
    if op == "FreeBlocks":
        out.append(u.f == g.at("F", j))
    k = z3.Int("r_m")
    for c, f in g.classes.items():  # each prefix count grows with its class, from 0
        out.append(g.at(c, j) >= 0)
        out.append(
            z3.ForAll(
                [k],
                z3.Implies(
                    z3.And(k >= 0, k < j),
                    z3.And(g.at(c, k) >= 0, g.at(c, k) + z3.If(f(k), iv(1), iv(0)) <= g.at(c, j)),
                ),
            )
        )
    return out


def rule_obligations(
    rule: str, bugs: frozenset[str] = frozenset(), max_m: int | None = None, full: bool = False
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """The rule's loop init, step and exit as (rule, case, hypotheses, goal, ctx). The
    loop step assumes PERM and INV-REF of the loop's state (proved preserved by the
    invariants' loop steps above; all of S with ``full``)."""
    op = RULE_OPS[rule]
    cfg = _cfg(bugs)
    d = cfg.dom
    N = d.N
    a = fresh_largs("a")
    s = fresh_state(cfg, "s", globals_=False)
    g = _ghosts(cfg, op, s, a)
    base = [N >= 1, a.kind == OPK[op], a.m >= 0, a.km >= 0, a.w >= 0, a.w < cfg.W, *g.recs]
    if max_m is not None:
        base.append(a.m <= max_m)
    S = props.strong(cfg, s)
    pre = list(S.values()) if full else [S["PERM"], S["INV-REF"]]
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    lp0 = Loop(s, iv(0), s.L)
    init = z3.And(*_shape(cfg, op, s, a, g, lp0, iv(0)), *_tracks(cfg, op, s, g, lp0, iv(0)))
    out.append((rule, "loop init", [*base, *pre], init, (cfg, s, a, None, g, op)))

    sj = fresh_state(cfg, "sj", globals_=False)
    lp = Loop(sj, z3.Int("f"), s.L)
    j = z3.Int("j")
    Sj = props.strong(cfg, sj)
    hyp = [
        *base,
        *pre,
        j >= 0,
        j < a.m,
        domain(cfg, a, j),
        *loop_facts(cfg, op, lp),
        guard(cfg, op, lp, z3.Select(a.E, j)),
        *(Sj.values() if full else [Sj["PERM"], Sj["INV-REF"]]),
        *_shape(cfg, op, s, a, g, lp, j),
        *_tracks(cfg, op, s, g, lp, j),
    ]
    nxt = body(cfg, op, lp, a, j)
    step = z3.And(*_shape(cfg, op, s, a, g, nxt, j + 1), *_tracks(cfg, op, s, g, nxt, j + 1))
    out.append((rule, "loop step", hyp, step, (cfg, sj, a, j, g, op, s)))

    sm = fresh_state(cfg, "sm", globals_=False)
    lpm = Loop(sm, z3.Int("fm"), s.L)
    at_m = [*_shape(cfg, op, s, a, g, lpm, a.m), *_tracks(cfg, op, s, g, lpm, a.m)]
    post = finish(cfg, op, lpm, a)
    rule_post = z3.And(_shape(cfg, op, s, a, g, Loop(post, lpm.f, lpm.L0), a.m))
    # (its hypothesis speaks of S for the pre-state only: the state decoded is that one)
    out.append((rule, "loop exit", [*base, *pre, *at_m], rule_post, (cfg, s, a, None, g, op, s)))
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], gl, x) for r, c, h, gl, x in out]
    return out


def rule_goals(
    rules: tuple[str, ...] = tuple(RULE_OPS),
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    max_m: int | None = None,
    seed: int = 0,
) -> list[Goal]:
    """Each rule's loop obligations proved (``refute``: as :func:`goals`)."""
    out: list[Goal] = []
    for rule in rules:
        for r, case, hyp, goal, ctx in rule_obligations(rule, bugs, max_m):
            if cases is not None and case not in cases:
                continue
            with named(f"symlists: {r} / {case}"):
                status, dt, m = _ask(hyp, goal, ctx[0].dom.N, timeout_ms, refute, seed)
            out.append(Goal(r, case, status, dt, m, ctx, op=RULE_OPS[rule]))
            if refute and status == "refuted":
                return out
    return out


def unrolled_rule_goal(
    rule: str, bugs: frozenset[str], timeout_ms: int = 30000, n: int = UNROLL, seed: int = 0
) -> Goal:
    """The rule of an accepted call on at most ``n`` entries, the loop unrolled, from a
    state satisfying S: a refutation is a concrete pre-state and call, for the replay."""
    op = RULE_OPS[rule]
    cfg = _cfg(bugs)
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_largs("a")
    t, ok = unrolled(cfg, op, s, a, n)
    g = _ghosts(cfg, op, s, a, upto=n)
    hyp = [a.kind == OPK[op], a.m >= 0, a.m <= n, ok, *props.strong(cfg, s).values()]
    hyp += [domain(cfg, a, iv(j)) for j in range(n)]
    goal = z3.And(_shape(cfg, op, s, a, g, Loop(t, iv(0), s.L), a.m))
    with named(f"symlists: {rule} / unrolled <= {n}"):
        status, dt, m = _ask(hyp, goal, cfg.dom.N, timeout_ms, True, seed)
    return Goal(rule, f"unrolled <= {n}", status, dt, m, (cfg, s, a), op=op)


def replay_rule(bug: str, op: str, g: Goal) -> tuple[list[str], str]:
    """An unrolled counterexample's call on the buggy spec and on the spec: "confirmed" if
    the free queues they leave differ."""
    from kvpool.spec import check_pool

    assert g.model is not None
    cfg, s, a = g.ctx
    ps, call, N = _decode(g.model, cfg, s, a, op)
    trace = [f"state: N={N} {ps.describe()}", repr(call)]
    if check_pool(ps):
        return trace, f"decoded state already violates: {check_pool(ps)[0]}"
    return trace, queue_verdict(bug, ps, call)


def queue_verdict(bug: str, ps: Any, call: Any) -> str:
    """``call`` from the pool state ``ps`` on ``bug``'s spec and on the spec: "confirmed"
    if the free queues they leave differ."""
    from kvpool.spec import World

    from .mutants import world_class

    good, bad = World([ps.copy()], [True]), world_class(bug).from_state(bug, ps)
    good.apply(call)
    bad.apply(call)
    mine, spec = list(bad.pools[0].free), list(good.pools[0].free)
    if mine != spec:
        return f"confirmed: the free queue is {mine}, the semantics' {spec}"
    return "NOT confirmed by replay"


# -- WATCH-FIRE for the list-taking calls, every list length --------------------------------

WATCH_MUTANT = "unpin-replaces-watcher"
"""unpin_blocks' new watcher replaces the ones pending on the block (they never fire)."""


def _kept(cfg: Config, s: State, u: State, lo: int) -> Any:
    """Every watcher pending on a block (from ``lo``) before the call still is."""
    d = cfg.dom
    return z3.And(
        [
            d.forall(lo, d.N, lambda b, w=w: z3.Implies(d.sel(s.pend[w], b), d.sel(u.pend[w], b)))  # type: ignore[misc]
            for w in range(cfg.W)
        ]
    )


def watch_obligations(
    op: str, bugs: frozenset[str] = frozenset(), full: bool = False
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """WATCH-FIRE for a list-taking call: the call fires no watcher (none of these calls
    hands out a block or resets the cache: their encoding has no firing), so the rule
    says that no watcher stops pending. Loop invariant: every watcher pending before the
    call still is; exit: the rule on the blocks 1..N-1."""
    cfg = _cfg(bugs)
    d = cfg.dom
    a = fresh_largs("a")
    s = fresh_state(cfg, "s", globals_=False)
    base = [d.N >= 1, a.kind == OPK[op], closed_checks(cfg, op, a), a.m >= 0, a.km >= 0]
    base += [a.w >= 0, a.w < cfg.W]
    S = props.strong(cfg, s)
    pre = list(S.values()) if full else []
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    out.append(("WATCH-FIRE", "loop init", [*base, *pre], _kept(cfg, s, s, 0), (cfg, s, a)))
    sj = fresh_state(cfg, "sj", globals_=False)
    lp = Loop(sj, z3.Int("f"), z3.Int("L0"))
    j = z3.Int("j")
    Sj = props.strong(cfg, sj)
    hyp = [*base, *pre, j >= 0, j < a.m, domain(cfg, a, j), *loop_facts(cfg, op, lp)]
    hyp += [guard(cfg, op, lp, z3.Select(a.E, j)), *(Sj.values() if full else [])]
    hyp.append(_kept(cfg, s, sj, 0))
    nxt = body(cfg, op, lp, a, j)
    out.append(("WATCH-FIRE", "loop step", hyp, _kept(cfg, s, nxt.s, 0), (cfg, sj, a, j)))
    sm = fresh_state(cfg, "sm", globals_=False)
    post = finish(cfg, op, Loop(sm, z3.Int("fm"), z3.Int("L0m")), a)
    out.append(
        (
            "WATCH-FIRE",
            "loop exit",
            [*base, *pre, _kept(cfg, s, sm, 0)],
            _kept(cfg, s, post, 1),
            (cfg, s, a),
        )
    )
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], gl, x) for r, c, h, gl, x in out]
    return out


def watch_goals(
    ops: tuple[str, ...] = LIST_OPS,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    seed: int = 0,
) -> list[Goal]:
    """WATCH-FIRE's loop obligations for each list-taking call (``refute``: as :func:`goals`)."""
    out: list[Goal] = []
    for op in ops:
        for r, case, hyp, goal, ctx in watch_obligations(op, bugs):
            if cases is not None and case not in cases:
                continue
            with named(f"symlists: {r} / {op} / {case}"):
                status, dt, m = _ask(hyp, goal, ctx[0].dom.N, timeout_ms, refute, seed)
            out.append(Goal(r, case, status, dt, m, ctx, op=op))
            if refute and status == "refuted":
                return out
    return out


def unrolled_watch_goal(bugs: frozenset[str], timeout_ms: int = 30000, seed: int = 0) -> Goal:
    """WATCH-FIRE of an accepted unpin_blocks on at most :data:`UNROLL` entries, the loop
    unrolled, from a state satisfying S (a refutation decodes and replays)."""
    op = "UnpinBlocks"
    cfg = _cfg(bugs)
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_largs("a")
    t, ok = unrolled(cfg, op, s, a, UNROLL)
    hyp = [a.kind == OPK[op], a.m >= 0, a.m <= UNROLL, ok, *props.strong(cfg, s).values()]
    hyp += [domain(cfg, a, iv(j)) for j in range(UNROLL)]
    with named(f"symlists: WATCH-FIRE / unrolled <= {UNROLL}"):
        status, dt, m = _ask(hyp, _kept(cfg, s, t, 1), cfg.dom.N, timeout_ms, True, seed)
    return Goal("WATCH-FIRE", f"unrolled <= {UNROLL}", status, dt, m, (cfg, s, a), op=op)


def watch_mutant_row(timeout_ms: int = 30000) -> dict[str, Any]:
    """The WATCH-FIRE mutant: its loop step refuted, and its unrolled counterexample's
    call, on the buggy spec, leaves a watcher no longer pending that did not fire."""
    bugs = frozenset([WATCH_MUTANT])
    row = blank_mutant_row(
        f"S and T => WATCH-FIRE, list loop [{WATCH_MUTANT}]", ("WATCH-FIRE",), BOUNDS
    )
    step = refuted_step(
        row,
        lambda limit, seed: watch_goals(("UnpinBlocks",), ("loop step",), bugs, limit, True, seed),
        timeout_ms,
        3,
    )
    if step is None:
        return row
    hit, _last, dt = replay_ladder(
        lambda limit, seed: unrolled_watch_goal(bugs, limit, seed), _replay_watch, timeout_ms, 3
    )
    row["seconds"] += dt
    judged_row(row, hit, "loop step refuted; unrolled: ")
    return row


def _replay_watch(g: Goal) -> tuple[list[str], str]:
    """WATCH-FIRE's unrolled counterexample decoded, its call replayed on the buggy spec:
    "confirmed" if a watcher pending before it is no longer pending and did not fire."""
    from kvpool.spec import check_pool

    from .mutants import world_class

    cfg, s, a = g.ctx
    ps, call, N = _decode(g.model, cfg, s, a, "UnpinBlocks")
    trace = [f"state: N={N} {ps.describe()}", repr(call)]
    if check_pool(ps):
        return trace, "decoded state breaks the invariants"
    w = world_class(WATCH_MUTANT).from_state(WATCH_MUTANT, ps)
    out = w.apply(call)
    gone = [
        (b, x) for b, ws in ps.pending.items() for x in ws if x not in w.pools[0].pending.get(b, [])
    ]
    if gone and not out.fired:
        return trace, (
            f"confirmed: watcher {gone[0][1]} on block {gone[0][0]} is no longer pending "
            "and did not fire"
        )
    return trace, "NOT confirmed by replay"


# -- ERR-ATOMIC for the list-taking calls, every list length -------------------------------

ATOMIC_MUTANT = "free-refusal-keeps-prefix"
"""free_blocks refused at its third entry or later keeps what the entries before it did
(their decrements, and the blocks they queued): only a list of >= 3 entries shows it."""


@dataclass
class Refusal:
    """The loop's refusal bookkeeping after some entries: ``ok`` every entry so far (and
    the call's closed checks) accepted; ``left`` what the call leaves if it is refused."""

    ok: Any
    left: State


def _atomic(cfg: Config, s: State, rf: Refusal) -> Any:
    """The loop invariant (and, at the exit, the rule): a refusal leaves the pre-state."""
    return z3.Implies(z3.Not(rf.ok), state_eq(cfg.dom, rf.left, s))


def atomic_step(cfg: Config, op: str, s: State, u: Loop, rf: Refusal, a: LArgs, j: Any) -> Refusal:
    """Entry ``j`` on the loop's state ``u``: a failing guard, the first one, refuses the
    call, which leaves :func:`refusal_left` of it."""
    g = guard(cfg, op, u, z3.Select(a.E, j))
    here = z3.And(rf.ok, z3.Not(g))
    return Refusal(
        z3.And(rf.ok, g), merge(cfg.dom, here, refusal_left(cfg, op, s, u.s, j), rf.left)
    )


def atomic_obligations(
    op: str, bugs: frozenset[str] = frozenset(), max_m: int | None = None, full: bool = False
) -> list[tuple[str, str, list[Any], Any, Any]]:
    """ERR-ATOMIC for a list-taking call as (rule, case, hypotheses, goal, ctx): the loop
    carries, besides its state, whether every entry so far was accepted and what a
    refusal leaves. Loop invariant: if refused so far, what it leaves is the pre-state;
    exit: a refused call's post-state is the pre-state (every field, ghosts too). The
    hypotheses hold no part of S (none is needed; with ``full`` all of S, for the
    witnesses). The refusal's error kind is not stated."""
    cfg = _cfg(bugs)
    d = cfg.dom
    a = fresh_largs("a")
    s = fresh_state(cfg, "s", globals_=False)
    base = [d.N >= 1, a.kind == OPK[op], a.m >= 0, a.km >= 0, a.w >= 0, a.w < cfg.W]
    if max_m is not None:
        base.append(a.m <= max_m)
    pre = list(props.strong(cfg, s).values()) if full else []
    out: list[tuple[str, str, list[Any], Any, Any]] = []
    rf0 = Refusal(closed_checks(cfg, op, a), s)
    out.append(("ERR-ATOMIC", "loop init", [*base, *pre], _atomic(cfg, s, rf0), (cfg, s, a)))
    sj = fresh_state(cfg, "sj", globals_=False)
    lp = Loop(sj, z3.Int("f"), z3.Int("L0"))
    j = z3.Int("j")
    rfj = Refusal(z3.Bool("okj"), fresh_state(cfg, "vj", globals_=False))
    hyp = [*base, *pre, j >= 0, j < a.m, domain(cfg, a, j), *loop_facts(cfg, op, lp)]
    hyp += [*(props.strong(cfg, sj).values() if full else []), _atomic(cfg, s, rfj)]
    nxt = atomic_step(cfg, op, s, lp, rfj, a, j)
    out.append(("ERR-ATOMIC", "loop step", hyp, _atomic(cfg, s, nxt), (cfg, sj, a, j)))
    sm = fresh_state(cfg, "sm", globals_=False)
    rfm = Refusal(z3.Bool("okm"), fresh_state(cfg, "vm", globals_=False))
    post = merge(d, rfm.ok, finish(cfg, op, Loop(sm, z3.Int("fm"), z3.Int("L0m")), a), rfm.left)
    goal = z3.Implies(z3.Not(rfm.ok), state_eq(d, post, s))
    hyp = [*base, *pre, _atomic(cfg, s, rfm)]
    out.append(("ERR-ATOMIC", "loop exit", hyp, goal, (cfg, s, a)))
    if "hyp-false" in bugs:
        out = [(r, c, [*h, z3.BoolVal(False)], gl, x) for r, c, h, gl, x in out]
    return out


def atomic_goals(
    ops: tuple[str, ...] = LIST_OPS,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    max_m: int | None = None,
    seed: int = 0,
) -> list[Goal]:
    """ERR-ATOMIC's loop obligations for each list-taking call (``refute``: as :func:`goals`)."""
    out: list[Goal] = []
    for op in ops:
        for r, case, hyp, goal, ctx in atomic_obligations(op, bugs, max_m):
            if cases is not None and case not in cases:
                continue
            with named(f"symlists: {r} / {op} / {case}"):
                status, dt, m = _ask(hyp, goal, ctx[0].dom.N, timeout_ms, refute, seed)
            out.append(Goal(r, case, status, dt, m, ctx, op=op))
            if refute and status == "refuted":
                return out
    return out


def unrolled_atomic_goal(bugs: frozenset[str], timeout_ms: int = 30000, seed: int = 0) -> Goal:
    """ERR-ATOMIC of free_blocks on at most :data:`UNROLL` entries, the loop unrolled, from
    a state satisfying S (a refutation decodes and replays)."""
    op = "FreeBlocks"
    cfg = _cfg(bugs)
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_largs("a")
    t, ok = unrolled(cfg, op, s, a, UNROLL)
    hyp = [a.kind == OPK[op], a.m >= 0, a.m <= UNROLL, *props.strong(cfg, s).values()]
    hyp += [domain(cfg, a, iv(j)) for j in range(UNROLL)]
    # every entry a block: the refusal found is an over-free, not an id that is no block
    hyp += [z3.Select(a.E, j) < cfg.dom.N for j in range(UNROLL)]
    goal = z3.Implies(z3.Not(ok), state_eq(cfg.dom, t, s))
    with named(f"symlists: ERR-ATOMIC / unrolled <= {UNROLL}"):
        status, dt, m = _ask(hyp, goal, cfg.dom.N, timeout_ms, True, seed)
    return Goal("ERR-ATOMIC", f"unrolled <= {UNROLL}", status, dt, m, (cfg, s, a), op=op)


def atomic_mutant_row(timeout_ms: int = 30000) -> dict[str, Any]:
    """The ERR-ATOMIC mutant: its loop step refuted (at entry j >= 2), the step proved with
    lists of <= 2 (the bounded lists cannot see it), and its unrolled counterexample's
    call, on the buggy spec, refused with the pool's state changed."""
    bugs = frozenset([ATOMIC_MUTANT])
    row = blank_mutant_row(
        f"S and T => ERR-ATOMIC, list loop [{ATOMIC_MUTANT}]", ("ERR-ATOMIC",), BOUNDS
    )
    ops, cases = ("FreeBlocks",), ("loop step",)
    step = refuted_step(
        row,
        lambda limit, seed: atomic_goals(ops, cases, bugs, limit, True, seed=seed),
        timeout_ms,
        3,
    )
    if step is None:
        return row
    notes = [f"loop step refuted at entry j={_entry(step)}"]
    if not short_proved(
        row,
        lambda limit, seed: atomic_goals(ops, cases, bugs, limit, max_m=2, seed=seed),
        timeout_ms,
        3,
    ):
        return row
    notes.append("with lists <= 2 the step is proved (the bounded lists cannot see it)")
    hit, _last, dt = replay_ladder(
        lambda limit, seed: unrolled_atomic_goal(bugs, limit, seed), _replay_atomic, timeout_ms, 3
    )
    row["seconds"] += dt
    if not judged_row(row, hit, "; ".join([*notes, "unrolled: "])):
        row["replay"] = "; ".join([*notes, f"no counterexample with <= {UNROLL} entries"])
    return row


def _replay_atomic(g: Goal) -> tuple[list[str], str]:
    """ERR-ATOMIC's unrolled counterexample decoded, its call replayed on the buggy spec
    and on the spec: "confirmed" if both refuse it, the spec with the state unchanged and
    the buggy spec with it changed."""
    from kvpool.spec import World

    from .mutants import world_class

    cfg, s, a = g.ctx
    ps, call, N = _decode(g.model, cfg, s, a, "FreeBlocks")
    trace = [f"state: N={N} {ps.describe()}", repr(call)]
    good = World([ps.copy()], [True])
    bad = world_class(ATOMIC_MUTANT).from_state(ATOMIC_MUTANT, ps)
    before = ps.snapshot()
    out_good, out_bad = good.apply(call), bad.apply(call)
    if (
        out_good.error is not None
        and out_bad.error is not None
        and good.pools[0].snapshot() == before
        and bad.pools[0].snapshot() != before
    ):
        return trace, f"confirmed: refused ({out_bad.error}) with the state changed"
    return trace, "NOT confirmed by replay"


# -- rows for the runner ------------------------------------------------------------------

EVERY_LIST = "every N, every list length"
"""The label of a row proved here (the every-N induction's own rows: "every N, lists <= 2")."""

BOUNDS = f"{EVERY_LIST}; keys=2 watchers=2"

NO_LIST_RULES: tuple[str, ...] = ("ORD-HANDOUT",)
"""Rules about a call that takes no list (get_new_blocks(n), n symbolic): the every-N
proof's lists do not enter them."""


def _decode(mdl: z3.ModelRef, cfg: Config, s: State, a: LArgs, op: str) -> tuple[Any, Any, int]:
    """A model's pre-state and call, in the spec's terms."""
    from .trace import ConcreteArgs, decode_state, to_op

    def ev(x: Any) -> int:
        return int(mdl.eval(x, model_completion=True).as_long())

    N = ev(cfg.dom.N)
    caching = z3.is_true(mdl.eval(cfg.caching, model_completion=True))
    events = z3.is_true(mdl.eval(cfg.events, model_completion=True))
    ps = decode_state(mdl, s, N, cfg.K, cfg.W, caching, events, z3.Select, ranked=False)
    m = ev(a.m)
    e = tuple(ev(z3.Select(a.E, j)) for j in range(m))
    ks = tuple(ev(z3.Select(a.KS, j)) for j in range(m))
    ef = z3.is_true(mdl.eval(a.ef, model_completion=True))
    c = ConcreteArgs(OPK[op], 0, m, e, ef, ev(a.w), ev(a.km), ks, 1, 0)
    return ps, to_op(c, N), N


def replay(bug: str, part: str, op: str, g: Goal) -> tuple[list[str], str]:
    """An unrolled counterexample decoded, its call replayed on the buggy spec: "confirmed"
    if the call breaks one of the invariants ``part`` stands for."""
    from kvpool.spec import check_pool

    from .mutants import world_class

    assert g.model is not None
    cfg, s, a = g.ctx
    ps, call, N = _decode(g.model, cfg, s, a, op)
    trace = [f"state: N={N} {ps.describe()}", repr(call)]
    pre = check_pool(ps)
    if pre:
        return trace, f"decoded state already violates: {pre[0]}"
    w = world_class(bug).from_state(bug, ps)
    w.apply(call)
    invs = (part,) if part in COUNT_PARTS else props.STRONG_PARTS[part]
    bad = [v for v in check_pool(w.pools[0]) if v.invariant in invs]
    return trace, (f"confirmed: {bad[0]}" if bad else "NOT confirmed by replay")


def proof_rows(timeout_ms: int = 60000) -> list[dict[str, Any]]:
    """One row per part: its loop init, step and exit for each list-taking call."""
    per_call = f"{BOUNDS}; {len(LIST_OPS)} list calls x loop init/step/exit"
    out = name_rows(
        goals(timeout_ms=timeout_ms),
        PARTS,
        lambda p: (
            f"S and T => {p}, list calls as loops" + (" (ghost sums)" if p in COUNT_PARTS else "")
        ),
        lambda p, mine: per_call,
        lambda p: (p,) if p in COUNT_PARTS else props.STRONG_PARTS[p],
        not_proved_op,
    )
    out += name_rows(
        rule_goals(timeout_ms=timeout_ms),
        tuple(RULE_OPS),
        lambda rule: f"S and T => {rule}, its call as a loop",
        lambda rule, mine: f"{BOUNDS}; loop init/step/exit",
    )
    at = atomic_goals(timeout_ms=timeout_ms)
    out.append(
        goal_row(
            "S and T => ERR-ATOMIC, list calls as loops",
            at,
            per_call,
            ("ERR-ATOMIC",),
            not_proved_op,
        )
    )
    ws = watch_goals(timeout_ms=timeout_ms)
    out.append(
        goal_row(
            "S and T => WATCH-FIRE, list calls as loops",
            ws,
            per_call,
            ("WATCH-FIRE",),
            not_proved_op,
        )
    )
    return out


def agreement_row(timeout_ms: int = 60000, n: int = UNROLL) -> dict[str, Any]:
    gs = agreement_goals(n=n, timeout_ms=timeout_ms)
    bad = [g for g in gs if g.status != "proved"]
    return dict(
        obligation=f"list loops == model.py's calls (lists <= {n})",
        kind="differential",
        technique="z3 induction",
        invariants=(),
        bounds=f"every N, lists <= {n}: refusals and post-states agree, from every state with S",
        status="agree"
        if not bad
        else ("disagree" if any(g.status == "refuted" for g in bad) else "unknown"),
        seconds=sum(g.seconds for g in gs),
        replay="; ".join(f"{g.op}: {g.status}" for g in bad),
    )


def witness_row(timeout_ms: int = 20000, n: int = 3) -> dict[str, Any]:
    """Every distinct loop hypothesis has a model at N=n; its state (the pre-state, the
    loop's state at entry j, or the last one), decoded, passes the spec's invariants,
    and the counts' ghost sums are its counts."""
    from kvpool.spec import check_pool

    from .trace import decode_state

    ws = witness_goals(timeout_ms, n)
    problems: list[str] = []
    for w in ws:
        if w.status != "sat" or w.model is None:
            problems.append(f"{w.name} / {w.op} / {w.case}: hypothesis {w.status}")
            continue
        cfg, s = w.ctx[0], w.ctx[1]
        mdl = w.model
        caching = z3.is_true(mdl.eval(cfg.caching, model_completion=True))
        events = z3.is_true(mdl.eval(cfg.events, model_completion=True))
        ps = decode_state(mdl, s, n, cfg.K, cfg.W, caching, events, z3.Select, ranked=False)
        bad = check_pool(ps)
        if bad:
            problems.append(f"{w.name} / {w.op} / {w.case}: decoded state breaks {bad[0]}")
        elif w.name in COUNT_PARTS:
            g = w.ctx[-1]
            in_use = sum(1 for b in range(1, n) if ps.ref[b] > 0)
            pend = sum(len(v) for v in ps.pending.values())
            sums = [
                int(mdl.eval(z3.Select(x, n), model_completion=True).as_long()) for x in (g.C, g.P)
            ]
            if sums != [in_use, pend]:
                problems.append(
                    f"{w.name} / {w.op} / {w.case}: ghost sums {sums} are not the "
                    f"decoded counts {[in_use, pend]}"
                )
    return dict(
        obligation=f"H satisfiable (list loops, N={n})",
        kind="witness",
        technique="z3 induction",
        invariants=(),
        bounds=f"N={n}: one model per distinct loop hypothesis ({len(ws)}), state decoded and "
        "checked (ghost sums: its counts)",
        status="witnessed" if not problems else "NOT-witnessed",
        seconds=sum(w.seconds for w in ws),
        replay="; ".join(problems[:3]),
    )


def refuted_step(
    row: dict[str, Any],
    ask: Callable[[int, int], list[Goal]],
    timeout_ms: int,
    seeds: int,
) -> list[Goal] | None:
    """A mutant's loop step, ``ask(limit_ms, seed)``, at z3 seeds 0..seeds-1, each with
    ``timeout_ms``, until one of its goals is refuted: those goals. None when none was,
    ``row`` then "NOT-refuted" (every goal proved) or "unknown". The seconds go to
    ``row``."""
    step, dt = goals_ladder(ask, any_refuted, timeout_ms, seeds, cap_ms=timeout_ms)
    row["seconds"] += dt
    if any_refuted(step):
        return step
    row["status"] = "NOT-refuted" if all_proved(step) else "unknown"
    return None


def short_proved(
    row: dict[str, Any],
    ask: Callable[[int, int], list[Goal]],
    timeout_ms: int,
    seeds: int,
) -> bool:
    """A long-list mutant's loop step with lists of <= 2 entries, ``ask(limit_ms,
    seed)``, at z3 seeds 0..seeds-1, each with ``timeout_ms``, until every goal is
    proved (the bounded lists cannot see the bug): True. False when not, ``row`` then
    "NOT-confirmed". The seconds go to ``row``."""
    short, dt = goals_ladder(ask, all_proved, timeout_ms, seeds, cap_ms=timeout_ms)
    row["seconds"] += dt
    if all_proved(short):
        return True
    row["status"] = "NOT-confirmed"
    row["replay"] = "lists <= 2 should not show it, but the step is not proved there"
    return False


def _entry(step: list[Goal]) -> Any:
    """The entry j at which a refuted loop step (its last goal) was refuted."""
    mdl, j = step[-1].model, step[-1].ctx[3]
    return mdl.eval(j, model_completion=True) if mdl else "?"


def mutant_rows(
    timeout_ms: int = 30000, which: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Each mutant must fail its part's loop step (every list length) and give, with the
    loop unrolled to :data:`UNROLL` entries, a counterexample the buggy spec confirms;
    the long-list mutant must also leave the loop step proved with lists of <= 2."""
    plan = [(b, p, o) for b, (p, o) in LIST_MUTANTS.items()]
    plan += [(b, p, o) for b, (p, o) in COUNT_MUTANTS.items()]
    return [
        mutant_row(bug, part, op, timeout_ms)
        for bug, part, op in plan
        if which is None or bug in which
    ]


def mutant_row(bug: str, part: str, op: str, timeout_ms: int = 30000) -> dict[str, Any]:
    """One mutant of :func:`mutant_rows`: ``bug`` in ``op``'s loop, breaking ``part``."""
    bugs = frozenset([bug])
    row = blank_mutant_row(
        f"S and T => {part}, list loop"
        + (" (ghost sums)" if part in COUNT_PARTS else "")
        + f" [{bug}]",
        (part,) if part in COUNT_PARTS else props.STRONG_PARTS[part],
        BOUNDS,
        "",
    )
    where = ((part,), (op,), ("loop step",), bugs)
    # (4 seeds: a quick "unknown" on a quantified query may change with it)
    step = refuted_step(
        row, lambda limit, seed: goals(*where, limit, True, seed=seed), timeout_ms, 4
    )
    if step is None:
        return row
    notes = ["loop step refuted"]
    if bug == LONG_LIST_MUTANT:
        notes[-1] += f" at entry j={_entry(step)}"
        if not short_proved(
            row, lambda limit, seed: goals(*where, limit, max_m=2, seed=seed), timeout_ms, 4
        ):
            return row
        notes.append("with lists <= 2 the step is proved (the bounded lists cannot see it)")
    target = "PERM" if part in COUNT_PARTS else part
    hit, _last, dt = replay_ladder(
        lambda limit, seed: unrolled_goal(target, op, bugs, limit, UNROLL, seed),
        lambda g: replay(bug, part, op, g),
        timeout_ms,
        3,
    )
    row["seconds"] += dt
    if not judged_row(row, hit, "; ".join([*notes, ""])):
        row["status"] = "unknown"
        row["replay"] = "; ".join([*notes, f"no counterexample with <= {UNROLL} entries"])
    return row


def rule_mutant_rows(
    timeout_ms: int = 30000, which: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Each rule's mutant: the rule, with the loop unrolled to :data:`UNROLL` entries
    from a state satisfying S, refuted, and the call's queue on the buggy spec differing
    from the semantics'. (Its loop step is not asked: with the ghost counts' recurrences
    z3 found no model in 10 s at any N of 1..6, which would be reported unknown.)"""
    return [
        rule_mutant_row(bug, rule, timeout_ms)
        for bug, rule in RULE_MUTANTS.items()
        if which is None or bug in which
    ]


def rule_mutant_row(bug: str, rule: str, timeout_ms: int = 30000) -> dict[str, Any]:
    """One mutant of :func:`rule_mutant_rows`: ``bug``, breaking ``rule``."""
    return unrolled_rule_row(
        f"S and T => {rule}, its call as a loop [{bug}]",
        rule,
        BOUNDS,
        lambda limit, seed: unrolled_rule_goal(rule, frozenset([bug]), limit, UNROLL, seed),
        lambda g: replay_rule(bug, RULE_OPS[rule], g),
        timeout_ms,
    )


def unrolled_rule_row(
    obligation: str,
    rule: str,
    bounds: str,
    ask: Callable[[int, int], Goal],
    judge: Callable[[Goal], tuple[list[str], str]],
    timeout_ms: int,
) -> dict[str, Any]:
    """An ordering rule's mutant row: its unrolled goal (``ask(limit_ms, seed)``) at z3
    seeds 0..2, each with ``timeout_ms``, until a counterexample the replay (``judge``)
    confirms, or a proof (other seeds cannot refute it): "NOT-refuted", or the last
    counterexample judged (:func:`model.judged_row`), or "unknown"."""
    row = blank_mutant_row(
        obligation, (rule,), bounds, "unknown", f"no counterexample with <= {UNROLL} entries"
    )
    hit, last, dt = replay_ladder(ask, judge, timeout_ms, 3, stop_proved=True)
    row["seconds"] += dt
    if last.goal.status == "proved":
        row["status"], row["replay"] = "NOT-refuted", ""
    else:
        judged_row(row, hit, f"unrolled to {UNROLL} entries: ")
    return row


def rows(timeout_ms: int = 60000, witnesses: bool = True) -> list[dict[str, Any]]:
    """Every row of this module: the proofs, the agreement with model.py, the
    witnesses, the mutants."""
    out = proof_rows(timeout_ms)
    out.append(agreement_row(timeout_ms))
    if witnesses:
        out.append(witness_row())
    out += mutant_rows(timeout_ms // 2) + rule_mutant_rows(timeout_ms // 2)
    out.append(watch_mutant_row(timeout_ms // 2))
    out.append(atomic_mutant_row(timeout_ms // 2))
    return out
