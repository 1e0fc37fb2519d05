"""INV-CONSERVE and INV-WATCH for every N: their counts, carried as ghost prefix sums.

Both invariants count blocks, and a sum over a symbolic range ``lo..hi`` is not a z3
term. Here a sum is what its definition says it is: an array ``A`` with

    Rec(A, f, lo, hi):   A[lo] == 0  and  for all i in [lo, hi): A[i+1] == A[i] + f(i)

(which has exactly one solution on ``lo..hi``, so ``A[hi]`` *is* ``sum(f(b) for b in
range(lo, hi))``). The two invariants, in the spec's words, with their sums so defined:

* ``INV-CONSERVE``: ``Rec(C, in_use, 1, N)`` and ``L + C[N] + 1 == N`` (free blocks plus
  blocks in use plus the null block is N);
* ``INV-WATCH``: ``Rec(P, pending, 0, N)`` and ``registered == fired + P[N]``, where
  ``registered`` and ``fired`` are the spec's two counters, moved by the spec's own rules
  (an unpin adds one per entry whose watcher was not yet pending on that block;
  get_new_blocks adds the watchers pending on each block it hands out, in hand-out
  order; a successful reset adds every pending watcher), and ``pending`` is the encoding's.

Each is proved by induction over runs, with the strengthened invariant S of
:mod:`kvpool.proofs.props` (proved inductive by :mod:`kvpool.proofs.induction`) as a
hypothesis and the ghosts ``C``, ``P``, ``registered``, ``fired`` carried by the step:

* **init**: the pool as built satisfies both, for every N;
* **step**, for every call kind but a successful ``get_new_blocks``: the call changes
  ``ref`` and the pending sets only at its listed entries (at most M of them), so the new
  sums are the old ones plus a closed-form correction at those entries
  (``A'[i] = A[i] + sum over listed x < i of (f'(x) - f(x))``); z3 proves the corrected
  arrays satisfy ``Rec`` for the new state, and the counts add up. A successful reset
  clears every pending set: ``P' = 0`` and ``fired' = fired + P[N]``;
* **hand-out loop**, for a successful ``get_new_blocks(n)`` (n symbolic): the blocks at
  queue positions ``0..n`` are handed out one at a time, as the spec's loop does, and a
  loop invariant ``I(j)`` (both invariants hold with the first j blocks handed out) is
  proved at ``j = 0``, from ``j`` to ``j + 1`` (``C`` and ``P`` corrected at ``q[j]``,
  ``fired`` plus the watchers pending there) and at ``j = n``, where the loop's state is
  compared with the encoding's post-state: both invariants then hold after the call.

No count is argued on paper; what is assumed is only the definition of a finite sum by
its recurrence, and S (proved elsewhere, for every N). Keys and watcher ids are K=2,
W=2, block lists at most M=2 entries, as in the rest of the every-N induction.

Each obligation's hypothesis is checked satisfiable (:func:`witness_goals`): z3 finds a
model of it at a small concrete N, so no obligation is proved by a contradiction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from . import props
from .model import (
    OPK,
    OPS,
    Config,
    Goal,
    State,
    Unbounded,
    args_domain,
    fresh_args,
    fresh_state,
    hypothesis_model,
    initial,
    isolated_check,
    iv,
    named,
    transition,
)

PARTS: tuple[str, ...] = ("INV-CONSERVE", "INV-WATCH")

Fn = Callable[[Any], Any]


@dataclass
class Ghost:
    C: Any  # prefix counts of the blocks in use, over 1..N
    P: Any  # prefix sums of the pending watchers, over 0..N
    registered: Any
    fired: Any


def rec(d: Any, A: Any, f: Fn, lo: Any, hi: Any) -> z3.BoolRef:
    """``A[i]`` is the sum of ``f(b)`` for ``b`` in ``lo..i``, for every i in ``lo..hi``."""
    return z3.And(
        z3.Select(A, lo) == 0,
        d.forall(lo, hi, lambda i: z3.Select(A, i + 1) == z3.Select(A, i) + f(i)),
    )


def in_use(d: Any, s: State) -> Fn:
    return lambda b: z3.If(d.sel(s.ref, b) > 0, iv(1), iv(0))


def pending(d: Any, s: State) -> Fn:
    return lambda b: z3.Sum([z3.If(d.sel(p, b), iv(1), iv(0)) for p in s.pend])


def invariant(
    cfg: Config, s: State, g: Ghost, use: Fn | None = None, pc: Fn | None = None, L: Any = None
) -> dict[str, z3.BoolRef]:
    """Both invariants, their sums defined by :func:`rec` (``use``/``pc``/``L`` default to
    ``s``'s own; the hand-out loop passes its intermediate ones)."""
    d = cfg.dom
    N = d.N
    use = use or in_use(d, s)
    pc = pc or pending(d, s)
    L = s.L if L is None else L
    return {
        "INV-CONSERVE": z3.And(rec(d, g.C, use, 1, N), L + z3.Select(g.C, N) + 1 == N),
        "INV-WATCH": z3.And(rec(d, g.P, pc, 0, N), g.registered == g.fired + z3.Select(g.P, N)),
    }


def fresh_ghost(name: str) -> Ghost:
    arr = z3.ArraySort(z3.IntSort(), z3.IntSort())
    return Ghost(
        z3.Const(f"{name}.C", arr),
        z3.Const(f"{name}.P", arr),
        z3.Int(f"{name}.registered"),
        z3.Int(f"{name}.fired"),
    )


def _setup(
    bugs: frozenset[str], K: int = 2, W: int = 2, M: int = 2
) -> tuple[Config, State, Any, State, Any]:
    cfg = Config(
        Unbounded(),
        K=K,
        W=W,
        M=M,
        caching=z3.Bool("caching"),
        events=z3.Bool("events"),
        bugs=bugs,
    )
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_args(cfg, "a")
    t, r = transition(cfg, s, a)
    return cfg, s, a, t, r


def _corrected(cfg: Config, a: Any, A: Any, f: Fn, f2: Fn, lo: Any) -> Any:
    """``A`` corrected for ``f`` becoming ``f2`` at the listed entries (each counted once)."""
    i = z3.Int("ci")
    delta: Any = iv(0)
    for j in range(cfg.M):
        x = a.e[j]
        first = z3.And([a.e[k] != x for k in range(j)] + [z3.BoolVal(True)])
        delta = delta + z3.If(z3.And(first, lo <= x, x < i), f2(x) - f(x), iv(0))
    return z3.Lambda([i], z3.Select(A, i) + delta)


def _registrations(cfg: Config, s: State, a: Any) -> Any:
    """How many registrations the spec counts for an unpin: one per live entry whose
    watcher is not yet pending on its block (earlier entries of the same call included)."""
    d = cfg.dom
    total: Any = iv(0)
    for j in range(cfg.M):
        x = a.e[j]
        before = z3.Or([z3.And(a.w == w, d.sel(s.pend[w], x)) for w in range(cfg.W)])
        earlier = z3.Or([z3.And(k < a.m, a.e[k] == x) for k in range(j)] + [z3.BoolVal(False)])
        total = total + z3.If(z3.And(j < a.m, z3.Not(before), z3.Not(earlier)), iv(1), iv(0))
    return total


def _solve(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int, refute: bool, N: Any, seed: int
) -> tuple[str, float, z3.ModelRef | None]:
    # (the bound on refutations only keeps a counterexample small enough to decode)
    return isolated_check([*hyp, *([N <= 6] if refute else [])], goal, timeout_ms, seed)


def stepped_ghost(
    cfg: Config, s: State, a: Any, t: State, g: Ghost, reset_ok: Any, unpin_ok: Any
) -> Ghost:
    """The ghosts after a call ``a`` from ``s`` to ``t`` that is not a successful
    get_new_blocks: the sums corrected at the listed entries (a successful reset,
    ``reset_ok``, clears ``P`` and fires every pending watcher; a successful unpin,
    ``unpin_ok``, counts its registrations)."""
    d = cfg.dom
    i1 = z3.Int("i1")
    return Ghost(
        _corrected(cfg, a, g.C, in_use(d, s), in_use(d, t), iv(1)),
        z3.If(
            reset_ok,
            z3.Lambda([i1], iv(0)),
            _corrected(cfg, a, g.P, pending(d, s), pending(d, t), iv(0)),
        ),
        g.registered + z3.If(unpin_ok, _registrations(cfg, s, a), iv(0)),
        g.fired + z3.If(reset_ok, z3.Select(g.P, d.N), iv(0)),
    )


def handout_loop(
    cfg: Config, s: State, a: Any, t: State, g: Ghost, gnb: list[z3.BoolRef], tag: str = ""
) -> list[tuple[str, str, list[z3.BoolRef], z3.BoolRef]]:
    """The hand-out loop of a successful get_new_blocks(n) from ``s`` to ``t`` (``gnb``:
    the hypotheses that say it is one): (part, case, hypotheses, goal) for its loop init,
    step and exit. ``tag`` names the loop's own variables apart (one loop per pool)."""
    d = cfg.dom
    N = d.N
    n, j = a.n, z3.Int(f"j{tag}")
    gj = fresh_ghost(f"gj{tag}")

    def handed(k: Any) -> Fn:
        return lambda b: z3.And(b >= 1, b < N, d.sel(s.pos, b) >= 0, d.sel(s.pos, b) < k)

    def use_k(k: Any) -> Fn:
        return lambda b: z3.If(handed(k)(b), iv(1), in_use(d, s)(b))

    def pc_k(k: Any) -> Fn:
        return lambda b: z3.If(handed(k)(b), iv(0), pending(d, s)(b))

    def inv_k(k: Any, gk: Ghost) -> dict[str, z3.BoolRef]:
        return invariant(cfg, s, gk, use_k(k), pc_k(k), s.L - k)

    init_k = inv_k(iv(0), g)
    x = d.sel(s.q, j)
    i2 = z3.Int(f"i2{tag}")
    g_next = Ghost(
        z3.Lambda([i2], z3.Select(gj.C, i2) + z3.If(z3.And(x >= 1, x < i2), iv(1), iv(0))),
        z3.Lambda(
            [i2], z3.Select(gj.P, i2) - z3.If(z3.And(x >= 0, x < i2), pending(d, s)(x), iv(0))
        ),
        gj.registered,
        gj.fired + pending(d, s)(x),
    )
    at_j = inv_k(j, gj)
    step_k = inv_k(j + 1, g_next)
    gn = fresh_ghost(f"gn{tag}")
    gn = Ghost(gn.C, gn.P, g.registered, gn.fired)
    at_n = inv_k(n, gn)
    exit_ = invariant(cfg, t, gn)
    out: list[tuple[str, str, list[z3.BoolRef], z3.BoolRef]] = []
    for p in PARTS:
        out.append((p, "loop init", gnb, init_k[p]))
        out.append(
            (
                p,
                "loop step",
                [*gnb, j >= 0, j < n, gj.registered == g.registered, at_j[p]],
                step_k[p],
            )
        )
        out.append((p, "loop exit", [*gnb, at_n[p]], exit_[p]))
    return out


def obligations(
    bugs: frozenset[str] = frozenset(), kwm: tuple[int, int, int] = (2, 2, 2)
) -> list[tuple[str, str, list[z3.BoolRef], z3.BoolRef, Any]]:
    """Every obligation as (part, case, hypotheses, goal, (cfg, s, a)) -- the init case
    has no pre-state (``s`` is None)."""
    out: list[tuple[str, str, list[z3.BoolRef], z3.BoolRef, Any]] = []
    # init
    cfg0 = Config(
        Unbounded(),
        K=kwm[0],
        W=kwm[1],
        caching=z3.Bool("caching"),
        events=z3.Bool("events"),
        bugs=bugs,
    )
    s0 = initial(cfg0)
    i0 = z3.Int("i0")
    zero = z3.Lambda([i0], iv(0))
    inv0 = invariant(cfg0, s0, Ghost(zero, zero, iv(0), iv(0)))
    for p in PARTS:
        out.append((p, "init", [cfg0.dom.N >= 1], inv0[p], None))

    cfg, s, a, t, r = _setup(bugs, *kwm)
    d = cfg.dom
    N = d.N
    S = props.strong(cfg, s)
    g = fresh_ghost("g")
    base = [N >= 1, args_domain(cfg, a), *S.values(), *invariant(cfg, s, g).values()]
    ok = r.err == 0
    ctx = (cfg, s, a, g, r)

    # step, every call kind (get_new_blocks: its refusals; its successes are the loop)
    reset_ok = z3.And(a.kind == OPK["ResetPrefixCache"], r.value == 1)
    unpin_ok = z3.And(a.kind == OPK["UnpinBlocks"], ok)
    g2 = stepped_ghost(cfg, s, a, t, g, reset_ok, unpin_ok)
    post = invariant(cfg, t, g2)
    for op in OPS:
        hyp = [*base, a.kind == OPK[op]]
        if op == "GetNewBlocks":
            hyp.append(z3.Not(ok))
        for p in PARTS:
            out.append((p, op, hyp, post[p], ctx))

    # the hand-out loop of a successful get_new_blocks(n)
    gnb = [*base, a.kind == OPK["GetNewBlocks"], ok]
    for p, case, hyp, goal in handout_loop(cfg, s, a, t, g, gnb):
        out.append((p, case, hyp, goal, ctx))
    if "hyp-false" in bugs:  # a test's seeded vacuity: every step hypothesis contradicts itself
        out = [
            (p, c, [*h, z3.BoolVal(False)] if x is not None else h, gl, x) for p, c, h, gl, x in out
        ]
    return out


def goals(
    parts: tuple[str, ...] = PARTS,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    seed: int = 0,
    kwm: tuple[int, int, int] = (2, 2, 2),
) -> list[Goal]:
    """Each obligation proved (or, with ``refute``, the first refutation, then stop)."""
    out: list[Goal] = []
    for p, case, hyp, goal, ctx in obligations(bugs, kwm):
        if p not in parts or (cases is not None and case not in cases):
            continue
        N = ctx[0].dom.N if ctx is not None else z3.Int("N")
        with named(f"counting: {p} / {case}"):
            status, dt, m = _solve(hyp, goal, timeout_ms, refute, N, seed)
        out.append(Goal(p, case, status, dt, m, ctx))
        if refute and status == "refuted":
            break
    return out


def witness_goals(
    timeout_ms: int = 20000, n: int = 3, bugs: frozenset[str] = frozenset()
) -> list[Goal]:
    """Each obligation's hypothesis (each distinct one) is satisfiable: z3 finds a model of
    it at N = n, with
    the call accepted and at least one block handed out where the case allows it (a model
    with any of those unmet is taken when none is found; seeds 0..3 are tried)."""
    out: list[Goal] = []
    seen: set[str] = set()
    for p, case, hyp, _goal, ctx in obligations(bugs):
        # the two parts share their hypotheses but in the loop's step and exit
        key = f"{p} {case}" if case in ("loop step", "loop exit") else case
        if key in seen:
            continue
        seen.add(key)
        if ctx is None:
            size = z3.Int("N")
            prefer: list[z3.BoolRef] = []
        else:
            cfg, _s, a, _g, r = ctx
            size = cfg.dom.N
            prefer = [a.n >= 1] if case.startswith("loop") else []
            if case != "GetNewBlocks" and not case.startswith("loop"):
                prefer.append(r.err == 0)
        st, dt, m = hypothesis_model([*hyp, size == n], [prefer, []], timeout_ms)
        out.append(Goal(p, case, st, dt, m, ctx))
    return out
