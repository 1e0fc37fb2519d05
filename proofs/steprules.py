"""The step rules of ``spec/rules.py`` for every N: one transition, on the unbounded reading.

Each rule is stated over the queue as a sequence ``q[0..L)`` (the unbounded reading's
own queue, see :mod:`kvpool.proofs.model`), with a symbolic N and symbolic arguments,
and proved for every state satisfying the strengthened invariant S of
:mod:`kvpool.proofs.props` (itself proved inductive for every N):

    S(s)  and  T_op(s, a, s', r)  ==>  RULE(s, a, r, s')

* ``ORD-HANDOUT``: get_new_blocks(n) returns ``q[0..n)`` in order, each now keyless with
  ref_cnt 1, and the new queue is ``q[n..L)``;
* ``ORD-RELEASE``: free_blocks' new queue is FRONT ++ ``q[0..L)`` ++ BACK, FRONT and BACK
  the entries reaching ref_cnt 0 (at their last listing), each in list order;
* ``ORD-UNPIN``: unpin_blocks' new queue is ``q[0..L)`` ++ the entries reaching ref_cnt 0,
  in list order;
* ``WATCH-FIRE``: a watcher fires on a block exactly when it was pending there and is no
  longer, and only when the block is among the blocks returned or the cache is reset
  (the "in registration order" of the rule's text is not stated here, nor at fixed N);
* ``ERR-ATOMIC``: a refused call (any kind) leaves every field of the state as it was;
* ``RES-RESET``: reset_prefix_cache succeeds iff no non-null block has ref_cnt > 0;
* ``RES-NUMFREE``: get_num_free_blocks is the number of non-null blocks with ref_cnt 0,
  that number a ghost sum defined by its recurrence (see :mod:`kvpool.proofs.counting`),
  with the counting invariant INV-CONSERVE as a hypothesis and the identity
  ``free(i) + in_use(i) == i - 1`` proved by induction over i (its base and step are
  two z3 queries of their own).

``RES-CACHED`` is not stated here: "the oldest holder of the key" is a minimum over the
blocks, which the unbounded reading's ``get_cached_block`` does not compute (a
placeholder). :mod:`kvpool.proofs.symsorts` proves it for every N on its own, the
lookup's scan over the blocks a ghost array defined by its recurrence.

Keys and watcher ids are K=2, W=2 and block lists at most M=2 entries, as in the rest of
the every-N induction. Each obligation's hypothesis has a model (:func:`witness_goals`).
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]

from . import counting, props
from .model import (
    OPK,
    OPS,
    Args,
    Config,
    Goal,
    State,
    Unbounded,
    args_domain,
    fresh_args,
    fresh_state,
    hypothesis_model,
    isolated_check,
    iv,
    named,
    state_eq,
    transition,
)

RULES: dict[str, tuple[str, ...]] = {
    # rule -> the call kinds it speaks of
    "ORD-HANDOUT": ("GetNewBlocks",),
    "ORD-RELEASE": ("FreeBlocks",),
    "ORD-UNPIN": ("UnpinBlocks",),
    "WATCH-FIRE": OPS,
    "ERR-ATOMIC": OPS,
    "RES-RESET": ("ResetPrefixCache",),
    "RES-NUMFREE": ("GetNumFreeBlocks",),
}
FIXED_N_ONLY: dict[str, str] = {}
"""Rules with no every-N statement (a row each says why): none. RES-CACHED's is
:mod:`kvpool.proofs.symsorts`'s, not this module's (:data:`ELSEWHERE`)."""
ELSEWHERE: dict[str, str] = {"RES-CACHED": "kvpool.proofs.symsorts.cached_goals"}


def _count(xs: list[Any]) -> Any:
    return z3.Sum([z3.If(x, iv(1), iv(0)) for x in xs] + [iv(0)])


def reaching(cfg: Config, s: State, a: Args, live: list[Any]) -> list[Any]:
    """Per entry j: it is live, and it is the block's last live listing and takes its
    ref_cnt to 0 (the entries ORD-RELEASE and ORD-UNPIN put in the queue)."""
    d, M = cfg.dom, cfg.M
    out = []
    for j in range(M):
        x = a.e[j]
        later = z3.Or([z3.And(live[k], a.e[k] == x) for k in range(j + 1, M)] + [z3.BoolVal(False)])
        cnt = _count([z3.And(live[k], a.e[k] == x) for k in range(M)])
        out.append(z3.And(live[j], z3.Not(later), d.sel(s.ref, x) == cnt))
    return out


def release_order(cfg: Config, s: State, a: Args, t: State) -> z3.BoolRef:
    """ORD-RELEASE's queue, for every N: ``t``'s queue is FRONT ++ ``s``'s ``q[0..L)`` ++
    BACK, FRONT and BACK the entries of ``a`` reaching ref_cnt 0 (at their last listing),
    each in list order (a free_blocks accepted, from ``s`` to ``t``)."""
    d, L, M = cfg.dom, s.L, cfg.M
    i = z3.Int("h_i")
    zero = reaching(cfg, s, a, [z3.And(j < a.m, a.e[j] != 0) for j in range(M)])
    to_front = [z3.Or(d.sel(s.key, a.e[j]) == 0, z3.Not(cfg.caching), a.ef) for j in range(M)]
    F = [z3.And(zero[j], to_front[j]) for j in range(M)]
    B = [z3.And(zero[j], z3.Not(to_front[j])) for j in range(M)]
    f, b = _count(F), _count(B)
    c = [
        L + f + b == t.L,
        z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < L), d.sel(t.q, f + i) == d.sel(s.q, i))),
    ]
    for j in range(M):
        c.append(z3.Implies(F[j], d.sel(t.q, _count(F[:j])) == a.e[j]))
        c.append(z3.Implies(B[j], d.sel(t.q, f + L + _count(B[:j])) == a.e[j]))
    return z3.And(c)


def obligations(
    bugs: frozenset[str] = frozenset(), kwm: tuple[int, int, int] = (2, 2, 2)
) -> list[tuple[str, str, list[z3.BoolRef], z3.BoolRef, Any]]:
    """Every obligation as (rule, case, hypotheses, goal, (cfg, s, a, r))."""
    cfg = Config(
        Unbounded(),
        K=kwm[0],
        W=kwm[1],
        M=kwm[2],
        caching=z3.Bool("caching"),
        events=z3.Bool("events"),
        bugs=bugs,
    )
    d = cfg.dom
    N = d.N
    s = fresh_state(cfg, "s", globals_=False)
    a = fresh_args(cfg, "a")
    t, r = transition(cfg, s, a)
    S = props.strong(cfg, s)
    base = [N >= 1, args_domain(cfg, a), *S.values()]
    ok = r.err == 0
    L, n, M = s.L, a.n, cfg.M
    goals: dict[str, z3.BoolRef] = {}

    # ORD-HANDOUT
    i = z3.Int("h_i")
    goals["ORD-HANDOUT"] = z3.Implies(
        z3.And(a.kind == OPK["GetNewBlocks"], ok),
        z3.And(
            L - n == t.L,
            z3.ForAll(
                [i],
                z3.Implies(
                    z3.And(i >= 0, i < n),
                    z3.And(
                        d.sel(r.ret, i) == d.sel(s.q, i),
                        d.sel(t.ref, d.sel(s.q, i)) == 1,
                        d.sel(t.key, d.sel(s.q, i)) == 0,
                    ),
                ),
            ),
            z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < t.L), d.sel(t.q, i) == d.sel(s.q, i + n))),
        ),
    )

    # ORD-RELEASE and ORD-UNPIN: which entries reach ref_cnt 0 (at their last listing)
    goals["ORD-RELEASE"] = z3.Implies(
        z3.And(a.kind == OPK["FreeBlocks"], ok), release_order(cfg, s, a, t)
    )

    U = reaching(cfg, s, a, [j < a.m for j in range(M)])
    c = [
        L + _count(U) == t.L,
        z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < L), d.sel(t.q, i) == d.sel(s.q, i))),
    ]
    for j in range(M):
        c.append(z3.Implies(U[j], d.sel(t.q, L + _count(U[:j])) == a.e[j]))
    goals["ORD-UNPIN"] = z3.Implies(z3.And(a.kind == OPK["UnpinBlocks"], ok), z3.And(c))

    # WATCH-FIRE: "handed out" is read off the result, not off the queue
    def fire_ok(blk: Any) -> z3.BoolRef:
        k = z3.Int("w_k")
        handed = z3.And(
            a.kind == OPK["GetNewBlocks"],
            ok,
            z3.Exists([k], z3.And(k >= 0, k < n, d.sel(r.ret, k) == blk)),
        )
        reset = z3.And(a.kind == OPK["ResetPrefixCache"], r.value == 1)
        cs = []
        for w in range(cfg.W):
            before, after = d.sel(s.pend[w], blk), d.sel(t.pend[w], blk)
            fired = d.sel(r.fire[w], blk)
            cs.append(fired == z3.And(before, z3.Not(after)))
            cs.append(z3.Implies(fired, z3.Or(handed, reset)))
            cs.append(z3.Implies(z3.And(before, z3.Or(handed, reset)), fired))
        return z3.And(cs)

    goals["WATCH-FIRE"] = d.forall(1, N, fire_ok)
    goals["ERR-ATOMIC"] = z3.Implies(z3.Not(ok), state_eq(d, s, t))
    goals["RES-RESET"] = z3.Implies(
        a.kind == OPK["ResetPrefixCache"],
        (r.value == 1) == d.forall(1, N, lambda blk: d.sel(s.ref, blk) == 0),
    )

    # RES-NUMFREE: Fr the ghost sum of the free indicator; C the in-use one (INV-CONSERVE)
    arr = z3.ArraySort(z3.IntSort(), z3.IntSort())
    Fr, C = z3.Const("Fr", arr), z3.Const("C", arr)

    def isfree(blk: Any) -> Any:
        return z3.If(d.sel(s.ref, blk) == 0, iv(1), iv(0))

    use = counting.in_use(d, s)
    sums = [counting.rec(d, Fr, isfree, 1, N), counting.rec(d, C, use, 1, N)]
    conserve = L + z3.Select(C, N) + 1 == N
    ident = z3.Select(Fr, N) + z3.Select(C, N) == N - 1  # by the induction over i below
    goals["RES-NUMFREE"] = z3.Implies(
        a.kind == OPK["GetNumFreeBlocks"], r.value == z3.Select(Fr, N)
    )
    # RES-RESET goes through two stepping stones (each proved from S first, below): with
    # the queue short of N-1, the block at position L is in use; a block is free iff its
    # position is below L (asked directly, z3 did not find those instances of PERM within
    # 30 s, and with the first stone alone it went unknown at 60 s in one process)
    ql = d.sel(s.q, L)
    stones = [
        z3.Implies(L < N - 1, z3.And(ql >= 1, ql < N, d.sel(s.ref, ql) > 0)),
        d.forall(1, N, lambda blk: (d.sel(s.ref, blk) == 0) == (d.sel(s.pos, blk) < L)),
    ]
    ctx = (cfg, s, a, r)
    out: list[tuple[str, str, list[z3.BoolRef], z3.BoolRef, Any]] = []
    for rule, ops in RULES.items():
        for op in ops:
            hyp = [*base, a.kind == OPK[op]]
            if rule == "RES-NUMFREE":
                hyp += [*sums, conserve, ident]
            if rule == "RES-RESET":
                for k, stone in enumerate(stones):
                    out.append((rule, f"stepping stone {k + 1}", hyp, stone, ctx))
                hyp = [*hyp, *stones]
                # one query per direction of the "iff"
                (lhs, rhs) = goals[rule].arg(1).children()
                out.append((rule, f"{op} (if)", hyp, z3.Implies(lhs, rhs), ctx))
                out.append((rule, f"{op} (only if)", hyp, z3.Implies(rhs, lhs), ctx))
                continue
            out.append((rule, op, hyp, goals[rule], ctx))
    # the identity free(i) + in_use(i) == i - 1 on 1..N, by induction over i
    ii = z3.Int("s_i")
    at = z3.Select(Fr, ii) + z3.Select(C, ii) == ii - 1
    nxt = z3.Select(Fr, ii + 1) + z3.Select(C, ii + 1) == ii
    out.append(
        (
            "RES-NUMFREE",
            "sum identity base",
            [*base, *sums],
            z3.Select(Fr, 1) + z3.Select(C, 1) == 0,
            ctx,
        )
    )
    out.append(("RES-NUMFREE", "sum identity step", [*base, *sums, ii >= 1, ii < N, at], nxt, ctx))
    if "hyp-false" in bugs:  # a test's seeded vacuity
        out = [(p, c_, [*h, z3.BoolVal(False)], g, x) for p, c_, h, g, x in out]
    return out


def goals(
    rules: tuple[str, ...] | None = None,
    cases: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 60000,
    refute: bool = False,
    seed: int = 0,
    kwm: tuple[int, int, int] = (2, 2, 2),
) -> list[Goal]:
    """Each obligation proved (with ``refute``: stop at the first refutation; N <= 6 then,
    to keep a counterexample small enough to decode)."""
    out: list[Goal] = []
    for rule, case, hyp, goal, ctx in obligations(bugs, kwm):
        if (rules is not None and rule not in rules) or (cases is not None and case not in cases):
            continue
        extra = [ctx[0].dom.N <= 6] if refute else []
        with named(f"every-N rule: {rule} / {case}"):
            status, dt, m = isolated_check([*hyp, *extra], goal, timeout_ms, seed)
        out.append(Goal(rule, case, status, dt, m, ctx))
        if refute and status == "refuted":
            break
    return out


def witness_goals(
    timeout_ms: int = 20000, n: int = 3, bugs: frozenset[str] = frozenset()
) -> list[Goal]:
    """Each obligation's hypothesis has a model at N = n (an accepted call preferred;
    seeds 0..3 tried)."""
    out: list[Goal] = []
    seen: set[tuple[str, str]] = set()
    for rule, case, hyp, _goal, ctx in obligations(bugs):
        # the hypotheses differ by call kind only, but for RES-NUMFREE's
        key = (rule if rule == "RES-NUMFREE" else "", case)
        if key in seen:
            continue
        seen.add(key)
        cfg, _s, _a, r = ctx
        size = cfg.dom.N
        st, dt, m = hypothesis_model([*hyp, size == n], [[r.err == 0], []], timeout_ms)
        out.append(Goal(rule, case, st, dt, m, ctx))
    return out
