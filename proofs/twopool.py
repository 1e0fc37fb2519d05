"""Two pools: free_blocks's forwarding and DropPool, proved for every k at a fixed N per pool.

The spec's ``World`` holds several pools. Every call is made on one live pool (a call on a
gone pool is a malformed trace, ``TraceError``, which no pool ever sees), and most act on
that pool only; ``free_blocks`` is the exception (docs/semantics.md): entries naming
another *live* pool's blocks are forwarded to it, entries naming a *gone* pool's blocks are
dropped, and a block over-freed in any live pool refuses the whole call.

This module encodes a world of two pools (pool p of N_p blocks) from the one-pool pieces of
:mod:`kvpool.proofs.model`, unchanged: each pool is a ``model.State``; a call on pool c is
``model.transition`` on c's state with the call's entries *mapped* onto c (an entry naming
another pool's block becomes the null block, which every one-pool operation skips or
refuses as the two-pool rules need); a ``free_blocks`` changes every live pool p as
``model.transition`` of a free of the entries mapped onto p; ``DropPool`` clears p's
``alive`` flag. On top of the one-pool errors, the two-pool ones come first where the spec
checks them: an entry that is no block of its pool (``InvalidArgument``), the null block
(skipped, or ``NullBlockMisuse``), another pool's block (``ForeignBlock``, except in
``free_blocks``).

Obligations, by 1-induction at fixed (N_0, N_1) as :mod:`kvpool.proofs.fixedn` does:

* each pool's every INV-* (and fixedn's helper parts: RANK-BOUNDS, LO-HI,
  WATCH-PER-BLOCK), for every k; the hypothesis is fixedn's, for each pool. **No ghost
  conjunct is added for two pools**: a pool's state changes only by a one-pool step on
  arguments in that pool's own domain (its call, or a free of the entries mapped onto it),
  and fixedn's hypothesis is inductive for those;
* the rules of ``spec/rules.py``'s :data:`~kvpool.spec.rules.POOL_RULES`, stated apart
  from the encoding's construction (from the entries, by counting): FREE-FORWARD,
  DROP-GONE, POOL-FRAME.

:data:`BUGS` are seeded bugs of the two-pool encoding, each re-created in the spec
(:class:`BuggyWorld2`); bounded model checking (:func:`unroll`, :func:`bmc_check`) refutes
each and its trace is replayed on the buggy spec. :func:`witness_rows` gives each
hypothesis a model, decoded into a spec ``World`` and replayed; :func:`diff_run` steps
random reachable two-pool worlds by the encoding and by the spec.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import (
    BlockRef,
    CacheBlocks,
    DropPool,
    ErrorKind,
    EvictBlocks,
    Firing,
    FreeBlocks,
    IsBlockWritable,
    Op,
    Outcome,
    PoolState,
    Touch,
    UnpinBlocks,
    World,
    check_pool,
)
from kvpool.spec.state import NULL_BLOCK, _Refused

from . import differential, fixedn, props
from .model import (
    ERR,
    ERRORS,
    OPK,
    OPS,
    Args,
    Config,
    Finite,
    Goal,
    Result,
    State,
    _underflow,
    fresh_args,
    fresh_state,
    goals_status,
    initial,
    int_sort,
    isolated_check,
    isolated_checks,
    iv,
    merge,
    mkint,
    op_free_blocks,
    state_eq,
    to_int,
    transition,
)
from .rewrite import simplify
from .trace import ConcreteArgs, decode_state, read_args, to_op

OPS2: tuple[str, ...] = (*OPS, "DropPool")
"""The calls of the two-pool encoding: the one-pool ones (same indices), then DropPool."""
OPK2: dict[str, int] = {name: i for i, name in enumerate(OPS2)}
POOLS = 2
TECHNIQUE = "z3 induction (fixed N)"
"""The matrix column the proof rows fill (``runner.FIXEDN_TECHNIQUE``)."""

BUGS: dict[str, tuple[tuple[str, ...], str]] = {
    "forward-to-caller": (
        ("INV-REF", "FREE-FORWARD"),
        "free_blocks checks a forwarded entry against its own pool but releases the block "
        "of the same id in the calling pool",
    ),
    "drop-frees-dropped": (
        ("DROP-GONE",),
        "free_blocks forwards entries to a dropped pool as if it were live",
    ),
    "forward-unchecked": (
        ("INV-REF", "FREE-FORWARD"),
        "free_blocks checks multiplicity in the calling pool only: a forwarded over-free "
        "goes through",
    ),
}
"""Seeded bugs of the two-pool encoding: name -> (the obligations it must break, what it
does). Each is re-created in the spec by :class:`BuggyWorld2`."""

STATE_NAMES = fixedn.STATE_OBLIGATIONS
RULE_NAMES = ("FREE-FORWARD", "DROP-GONE", "POOL-FRAME")


# -- the encoding ----------------------------------------------------------------------------


@dataclass
class Config2:
    cfgs: list[Config]
    """Each pool's one-pool configuration (its N, its own caching and events flags)."""
    bugs: frozenset[str] = frozenset()

    @property
    def M(self) -> int:
        return self.cfgs[0].M

    def n(self, p: int) -> int:
        return self.cfgs[p].dom.n  # type: ignore[attr-defined, no-any-return]


@dataclass
class World2:
    s: list[State]
    alive: list[z3.BoolRef]


@dataclass
class Args2:
    a: Args
    """The call's arguments as one pool reads them (``a.kind`` indexes :data:`OPS2`)."""
    c: Any
    """The pool the call is made on."""
    ep: list[Any]
    """The pool of each block entry (the block id is ``a.e[j]``; N of that pool: no block)."""
    ibp: Any
    """The pool of IsBlockWritable's block."""


@dataclass
class Result2:
    err: Any
    res: list[Result]
    """Each pool's one-pool result for the call mapped onto it (the caller's is the call's)."""
    mapped: list[Args]


def config2(
    ns: tuple[int, int], K: int = 2, W: int = 2, M: int = 2, bugs: frozenset[str] = frozenset()
) -> Config2:
    unknown = bugs - set(BUGS)
    if unknown:
        raise ValueError(f"not a two-pool bug: {sorted(unknown)}")
    cfgs = [
        Config(
            Finite(n), K=K, W=W, M=M, caching=z3.Bool(f"caching{p}"), events=z3.Bool(f"events{p}")
        )
        for p, n in enumerate(ns)
    ]
    return Config2(cfgs, bugs)


def fresh_world(c2: Config2, name: str) -> World2:
    return World2(
        [fresh_state(cfg, f"{name}.p{p}") for p, cfg in enumerate(c2.cfgs)],
        [z3.Bool(f"{name}.alive{p}") for p in range(POOLS)],
    )


def initial_world(c2: Config2) -> World2:
    return World2([initial(cfg) for cfg in c2.cfgs], [z3.BoolVal(True)] * POOLS)


def fresh_args2(c2: Config2, name: str) -> Args2:
    return Args2(
        fresh_args(c2.cfgs[0], name),
        mkint(f"{name}.pool"),
        [mkint(f"{name}.ep{j}") for j in range(c2.M)],
        mkint(f"{name}.ibp"),
    )


def _of(p: Any, xs: list[Any]) -> Any:
    """``xs[p]`` for a symbolic pool index p (0 or 1)."""
    return z3.If(p == 0, xs[0], xs[1])


def args_domain2(c2: Config2, w: World2, a2: Args2) -> z3.BoolRef:
    """The calls the encoding ranges over: on a live pool; entry N of a pool stands for an
    id that is not a block of it; EvictBlocks names ids of its own pool."""
    a = a2.a
    Ns = [cfg.dom.N for cfg in c2.cfgs]
    c = [
        a.kind >= 0,
        a.kind < len(OPS2),
        z3.Or([z3.And(a2.c == p, w.alive[p]) for p in range(POOLS)]),
        a.n >= -1,
        a.n <= _of(a2.c, Ns),
        a.m >= 0,
        a.m <= c2.M,
        a.km >= 0,
        a.km <= c2.M,
        a.w >= 0,
        a.w < c2.cfgs[0].W,
        a.qk >= 1,
        a.qk <= c2.cfgs[0].K,
        a2.ibp >= 0,
        a2.ibp < POOLS,
        a.ib >= 0,
        a.ib <= _of(a2.ibp, Ns),
    ]
    for j in range(c2.M):
        c += [a2.ep[j] >= 0, a2.ep[j] < POOLS, a.e[j] >= 0, a.e[j] <= _of(a2.ep[j], Ns)]
        c += [a.ks[j] >= 1, a.ks[j] <= c2.cfgs[0].K]
        c.append(z3.Implies(a.kind == OPK["EvictBlocks"], a2.ep[j] == a2.c))
    return z3.And(c)


def mapped(c2: Config2, a2: Args2, p: int) -> Args:
    """The call as pool p reads it: entries naming another pool's blocks become the null
    block (EvictBlocks' ids are its own pool's already)."""
    a = a2.a
    e = [
        z3.If(z3.Or(a.kind == OPK["EvictBlocks"], a2.ep[j] == p), a.e[j], iv(0))
        for j in range(c2.M)
    ]
    return replace(a, e=e, ib=z3.If(a2.ibp == p, a.ib, iv(0)))


def _entry_errors(c2: Config2, a2: Args2) -> tuple[Any, Any, Any]:
    """The two-pool entry checks, in list order, first failure wins: (free_blocks's,
    touch's, unpin/cache_blocks's). Per entry: no block of its pool is InvalidArgument;
    the null block is skipped (free, touch) or NullBlockMisuse; another pool's block is
    forwarded (free) or ForeignBlock."""
    a = a2.a
    Ns = [cfg.dom.N for cfg in c2.cfgs]
    free: Any = iv(0)
    touch: Any = iv(0)
    refuse: Any = iv(0)
    IA, NB, FB = iv(ERR["InvalidArgument"]), iv(ERR["NullBlockMisuse"]), iv(ERR["ForeignBlock"])
    for j in reversed(range(c2.M)):
        e, ep = a.e[j], a2.ep[j]
        bad = e >= _of(ep, Ns)
        foreign = ep != a2.c
        live = j < a.m
        free = z3.If(z3.And(live, bad), IA, free)
        touch = z3.If(live, z3.If(bad, IA, z3.If(e == 0, touch, z3.If(foreign, FB, touch))), touch)
        refuse = z3.If(live, z3.If(bad, IA, z3.If(e == 0, NB, z3.If(foreign, FB, refuse))), refuse)
    return free, touch, refuse


def _all_onto_caller(c2: Config2, w: World2, a2: Args2, p: int) -> Args:
    """(bug forward-to-caller) every entry of a live pool as a block of pool p."""
    a = a2.a
    n = c2.cfgs[p].dom.N
    keep = [z3.And(a.e[j] < n, _of(a2.ep[j], w.alive)) for j in range(c2.M)]
    return replace(a, e=[z3.If(keep[j], a.e[j], iv(0)) for j in range(c2.M)])


def transition2(c2: Config2, w: World2, a2: Args2) -> tuple[World2, Result2]:
    """The world after the call ``a2``, and its result. A refused call changes no pool."""
    a = a2.a
    kind, c = a.kind, a2.c
    maps = [mapped(c2, a2, p) for p in range(POOLS)]
    steps = [transition(cfg, w.s[p], maps[p]) for p, cfg in enumerate(c2.cfgs)]
    nxt = [t for t, _ in steps]
    res = [r for _, r in steps]
    free_err, touch_err, refuse_err = _entry_errors(c2, a2)
    is_free = kind == OPK["FreeBlocks"]
    is_drop = kind == OPK2["DropPool"]

    # free_blocks: entry errors, then an over-free in any live pool (dead pools' entries
    # are dropped, so never checked)
    dead_too = "drop-frees-dropped" in c2.bugs
    over = []
    for p, cfg in enumerate(c2.cfgs):
        if "forward-unchecked" in c2.bugs:
            uf = z3.And(c == p, _underflow(cfg, w.s[p], maps[p]))
        else:
            uf = _underflow(cfg, w.s[p], maps[p])
        over.append(uf if dead_too else z3.And(w.alive[p], uf))
    err_free = z3.If(
        free_err != 0, free_err, z3.If(z3.Or(over), iv(ERR["RefCountUnderflow"]), iv(0))
    )

    # any other call: the caller's one-pool error, after the two-pool entry checks
    err_c = _of(c, [r.err for r in res])
    caching_c = _of(c, [cfg.caching for cfg in c2.cfgs])
    cache_pre = z3.If(
        a.m != a.km,
        iv(ERR["InvalidArgument"]),
        z3.If(z3.Not(caching_c), iv(ERR["CachingDisabled"]), iv(0)),
    )
    Ns = [cfg.dom.N for cfg in c2.cfgs]
    writable_err = z3.If(
        a.ib >= _of(a2.ibp, Ns),
        iv(ERR["InvalidArgument"]),
        z3.If(z3.And(a.ib != 0, a2.ibp != c), iv(ERR["ForeignBlock"]), iv(0)),
    )
    xerr = z3.If(
        kind == OPK["Touch"],
        touch_err,
        z3.If(
            z3.Or(kind == OPK["UnpinBlocks"], kind == OPK["CacheBlocks"]),
            refuse_err,
            z3.If(kind == OPK["IsBlockWritable"], writable_err, iv(0)),
        ),
    )
    pre = z3.If(kind == OPK["CacheBlocks"], cache_pre, iv(0))
    err_own = z3.If(pre != 0, pre, z3.If(xerr != 0, xerr, err_c))
    err = z3.If(is_free, err_free, z3.If(is_drop, iv(0), err_own))

    ok = err == 0
    states = []
    for p, cfg in enumerate(c2.cfgs):
        d = cfg.dom
        # (the release itself, unconditional: the call's error is decided above)
        fwd, _ = op_free_blocks(cfg, w.s[p], maps[p])
        if "forward-to-caller" in c2.bugs:
            # the bug: the entries of every pool are released in the caller, none elsewhere
            buggy, _ = op_free_blocks(cfg, w.s[p], _all_onto_caller(c2, w, a2, p))
            fwd = merge(d, c == p, buggy, w.s[p])
        live = z3.BoolVal(True) if dead_too else w.alive[p]
        own = z3.And(ok, z3.Not(is_free), z3.Not(is_drop), c == p)
        t = merge(d, own, nxt[p], w.s[p])
        t = merge(d, z3.And(ok, is_free, live), fwd, t)
        states.append(t)
    alive = [z3.And(w.alive[p], z3.Not(z3.And(is_drop, c == p))) for p in range(POOLS)]
    return World2(states, alive), Result2(err, res, maps)


# -- the obligations ---------------------------------------------------------------------------


def state_obligations2(c2: Config2, w: World2) -> dict[str, Any]:
    """Each part of fixedn's hypothesis, for both pools (a goal per name, both pools in it)."""
    per = [fixedn.state_obligations(cfg, w.s[p]) for p, cfg in enumerate(c2.cfgs)]
    return {name: z3.And([o[name] for o in per]) for name in per[0]}


def _count(c2: Config2, a2: Args2, p: int, b: int) -> Any:
    """How many entries of the call name block b of pool p."""
    a = a2.a
    return z3.Sum(
        [z3.If(z3.And(j < a.m, a2.ep[j] == p, a.e[j] == b), iv(1), iv(0)) for j in range(c2.M)]
    )


_UNCHANGED_BY_FREE = (
    "key",
    "kst",
    "idx",
    "pend",
    "wst",
    "bst",
    "reg",
    "fb",
    "clock",
    "view",
    "nev",
    "registered",
    "fired",
)


def world_violations(world: World, invariant: str | None = None) -> list[Any]:
    """What ``check_pool`` finds in each pool of ``world`` (only ``invariant``'s, if
    given), pool by pool."""
    return [
        v
        for p, ps in enumerate(world.pools)
        for v in check_pool(ps, p)
        if invariant is None or v.invariant == invariant
    ]


def world_trace(world: World, call: Any) -> list[str]:
    """A decoded two-pool counterexample as a row's trace: each pool (a gone one marked),
    then the call."""
    pools = " | ".join(
        f"{'' if world.alive[p] else '(gone) '}{ps.describe()}" for p, ps in enumerate(world.pools)
    )
    return [f"world: {pools}", repr(call)]


def _fields_eq(d: Any, s: State, t: State, names: tuple[str, ...]) -> Any:
    c = []
    for f in names:
        x, y = getattr(s, f), getattr(t, f)
        if x is None:
            continue
        if f in ("idx", "pend", "wst"):
            c += [d.eq(u, v) for u, v in zip(x, y, strict=True)]
        elif f == "view":
            c += [u == v for u, v in zip(x, y, strict=True)]
        elif isinstance(x, list):
            c.append(d.eq(x, y))
        else:
            c.append(x == y)
    return z3.And(c)


def rules2(c2: Config2, w: World2, a2: Args2, r: Result2, t: World2) -> dict[str, Any]:
    """The cross-pool rules (spec/rules.py's POOL_RULES), from the entries and the states,
    not from the encoding's construction."""
    a = a2.a
    kind, c, ok = a.kind, a2.c, r.err == 0
    is_free = kind == OPK["FreeBlocks"]
    Ns = [c2.n(p) for p in range(POOLS)]

    # FREE-FORWARD
    invalid = z3.Or(
        [z3.And(j < a.m, a.e[j] >= _of(a2.ep[j], [iv(n) for n in Ns])) for j in range(c2.M)]
    )
    over = z3.Or(
        [
            z3.And(w.alive[p], _count(c2, a2, p, b) > w.s[p].ref[b])
            for p in range(POOLS)
            for b in range(1, Ns[p])
        ]
    )
    ff = [ok == z3.And(z3.Not(invalid), z3.Not(over))]
    for p, cfg in enumerate(c2.cfgs):
        d = cfg.dom
        s, u = w.s[p], t.s[p]
        refs = [u.ref[b] == s.ref[b] - _count(c2, a2, p, b) for b in range(1, Ns[p])]
        # ORD-RELEASE on p's own entries (the call as a direct free of them on p)
        direct = replace(r.mapped[p], kind=iv(OPK["FreeBlocks"]))
        order = props.step_props(cfg, s, direct, replace(r.res[p], err=r.err), u)["ORD-RELEASE"]
        same = _fields_eq(d, s, u, _UNCHANGED_BY_FREE)
        ff.append(z3.Implies(z3.And(ok, w.alive[p]), z3.And([*refs, order, same])))
    rules = {"FREE-FORWARD": z3.Implies(is_free, z3.And(ff))}

    # DROP-GONE
    dg = []
    for p, cfg in enumerate(c2.cfgs):
        d = cfg.dom
        dg.append(z3.Implies(t.alive[p], w.alive[p]))
        dg.append(z3.Implies(z3.Not(w.alive[p]), state_eq(d, w.s[p], t.s[p])))
        dropped = z3.And(kind == OPK2["DropPool"], c == p)
        dg.append(
            z3.Implies(
                kind == OPK2["DropPool"],
                z3.And(
                    ok,
                    state_eq(d, w.s[p], t.s[p]),
                    t.alive[p] == z3.And(w.alive[p], z3.Not(dropped)),
                ),
            )
        )
    rules["DROP-GONE"] = z3.And(dg)

    # POOL-FRAME
    pf = []
    own_blocks = z3.And(
        [z3.Implies(j < a.m, z3.Or(a.e[j] == 0, a2.ep[j] == c)) for j in range(c2.M)]
    )
    for p, cfg in enumerate(c2.cfgs):
        d = cfg.dom
        pf.append(
            z3.Implies(
                z3.Or(z3.Not(ok), z3.And(z3.Not(is_free), c != p)),
                state_eq(d, w.s[p], t.s[p]),
            )
        )
        pf.append(z3.Implies(z3.Not(ok), t.alive[p] == w.alive[p]))
    names_blocks = z3.Or([kind == OPK[k] for k in ("Touch", "UnpinBlocks", "CacheBlocks")])
    pf.append(z3.Implies(z3.And(ok, names_blocks), own_blocks))
    pf.append(z3.Implies(z3.And(ok, kind == OPK["IsBlockWritable"]), z3.Or(a.ib == 0, a2.ibp == c)))
    rules["POOL-FRAME"] = z3.And(pf)
    return rules


# -- fixed-N 1-induction -----------------------------------------------------------------------


@dataclass
class Step2:
    c2: Config2
    w: World2
    a2: Args2
    r: Result2
    t: World2
    hyp: dict[str, Any]
    goals: dict[str, Any]
    domain: Any
    build_time: float = 0.0


def build(
    ns: tuple[int, int], bugs: frozenset[str] = frozenset(), K: int = 2, W: int = 2, M: int = 2
) -> Step2:
    """One symbolic step of the two-pool world at N = ``ns``, with H on its pre-state."""
    with int_sort(None):
        t0 = time.perf_counter()
        c2 = config2(ns, K, W, M, bugs)
        w = fresh_world(c2, "w")
        a2 = fresh_args2(c2, "a")
        t, r = transition2(c2, w, a2)
        hyp = state_obligations2(c2, w)
        goals = {**state_obligations2(c2, t), **rules2(c2, w, a2, r, t)}
        dom = args_domain2(c2, w, a2)
        return Step2(c2, w, a2, r, t, hyp, goals, dom, time.perf_counter() - t0)


def _case(st: Step2, op: str, caller: int, f: Any) -> Any:
    return simplify(z3.substitute(f, (st.a2.a.kind, iv(OPK2[op])), (st.a2.c, iv(caller))))


def _base(st: Step2, op: str, caller: int) -> list[Any]:
    return [
        _case(st, op, caller, st.domain),
        st.a2.a.kind == OPK2[op],
        st.a2.c == caller,
        *st.hyp.values(),
    ]


def step_goals(
    st: Step2,
    names: tuple[str, ...] | None = None,
    timeout_ms: int = 60000,
    ops: tuple[str, ...] = OPS2,
    callers: tuple[int, ...] = (0, 1),
) -> list[Goal]:
    """Each goal, one case per (call kind, calling pool), split into conjuncts (as fixedn).

    One context per case asks every goal's conjuncts in turn (the hypothesis, both pools'
    H, is translated once per case); the first one not proved ends the case, and the
    goals it did not reach are "unknown" there (never proved)."""
    names = names or tuple(st.goals)
    out = []
    for op in ops:
        for caller in callers:
            base = _base(st, op, caller)
            tagged = [
                (name, part)
                for name in names
                for part in fixedn.conjuncts(_case(st, op, caller, st.goals[name]))
            ]
            answers = isolated_checks(base, [p for _, p in tagged], timeout_ms)
            goals = {name: Goal(name, "step", "proved", 0.0, op=f"{op}@{caller}") for name in names}
            for i, (name, part) in enumerate(tagged):
                g = goals[name]
                g.queries.append([*base, z3.Not(part)])
                if i >= len(answers):
                    if g.status == "proved":  # (not reached: never counted as proved)
                        g.status = "unknown"
                    continue
                status, dt, m = answers[i]
                g.seconds += dt
                if status != "proved":
                    g.status, g.model = status, m
            for g in goals.values():
                g.query = g.queries[-1] if g.queries else []
                out.append(g)
    return out


def init_goals(ns: tuple[int, int]) -> list[Goal]:
    """The world as built (both pools live, each as built) satisfies H."""
    with int_sort(None):
        c2 = config2(ns)
        w0 = initial_world(c2)
        out = []
        for name, g in state_obligations2(c2, w0).items():
            (status, dt, m), *_ = isolated_checks([], [g], 60000)
            out.append(Goal(name, "init", status, dt, m, query=[z3.Not(g)]))
        return out


def bounds(ns: tuple[int, int]) -> str:
    return f"N={ns[0]}+{ns[1]} (two pools), every k, lists<=2 keys=2 watchers=2"


def label(ns: tuple[int, int]) -> str:
    return f"proved for every k at fixed N={ns[0]} and N={ns[1]} (two pools)"


def rows(sizes: tuple[tuple[int, int], ...], timeout_ms: int) -> list[dict[str, Any]]:
    """At each (N_0, N_1): init and step of every goal, and the hypotheses' witnesses
    (``runner.ObligationResult(**row)`` rows)."""
    out: list[dict[str, Any]] = []
    for ns in sizes:
        inits = {g.name: g for g in init_goals(ns)}
        st = build(ns)
        by: dict[str, list[Goal]] = {}
        for g in step_goals(st, timeout_ms=timeout_ms):
            by.setdefault(g.name, []).append(g)
        for name, gs in by.items():
            cases = len(gs)
            if name in inits:
                gs = [inits[name], *gs]
            status, bad = goals_status(gs)
            out.append(
                dict(
                    obligation=f"{name} (two pools)",
                    kind="fixed-N",
                    technique=TECHNIQUE,
                    invariants=(name,),
                    bounds=f"{bounds(ns)} ({cases} cases): "
                    + (label(ns) if status == "proved" else "not proved"),
                    status=status,
                    seconds=st.build_time * (name == "INV-REF") + sum(g.seconds for g in gs),
                    replay="; ".join(f"{g.case} {g.op} ({g.status})" for g in bad[:3]),
                )
            )
        out.append(witness_row(st, ns))
    return out


# -- every N (the strengthened invariant of each pool) ---------------------------------------


def build_every_n(bugs: frozenset[str] = frozenset(), K: int = 2, W: int = 2, M: int = 2) -> Step2:
    """One symbolic two-pool step on the unbounded reading: N_0 and N_1 symbolic, and the
    hypothesis the every-N induction's strengthened invariant ``props.strong`` for each
    pool (PERM and WATCH-PER-BLOCK are the forms of INV-FREE/INV-CONSERVE and INV-WATCH it
    carries; the lemmas ``S ==> INV-X`` are about one pool's state, proved in
    :mod:`.induction`). The goals: each part of it, on both pools after the step."""
    from .model import Unbounded

    with int_sort(None):
        t0 = time.perf_counter()
        cfgs = [
            Config(
                Unbounded(z3.Int(f"N{p}")),
                K=K,
                W=W,
                M=M,
                caching=z3.Bool(f"caching{p}"),
                events=z3.Bool(f"events{p}"),
            )
            for p in range(POOLS)
        ]
        c2 = Config2(cfgs, bugs)
        w = World2(
            [fresh_state(cfg, f"w.p{p}", globals_=False) for p, cfg in enumerate(cfgs)],
            [z3.Bool(f"w.alive{p}") for p in range(POOLS)],
        )
        a2 = fresh_args2(c2, "a")
        t, r = transition2(c2, w, a2)
        hyp: dict[str, Any] = {f"N{p} >= 1": cfg.dom.N >= 1 for p, cfg in enumerate(cfgs)}
        for p, cfg in enumerate(cfgs):
            hyp.update({f"{k}@{p}": v for k, v in props.strong(cfg, w.s[p]).items()})
        post = [props.strong(cfg, t.s[p]) for p, cfg in enumerate(cfgs)]
        goals = {name: z3.And([x[name] for x in post]) for name in post[0]}
        dom = args_domain2(c2, w, a2)
        return Step2(c2, w, a2, r, t, hyp, goals, dom, time.perf_counter() - t0)


def every_n_case(
    st: Step2,
    op: str,
    caller: int,
    p: int,
    names: tuple[str, ...],
    timeout_ms: int,
    extra: tuple[Any, ...] = (),
) -> list[Goal]:
    """The step case (``op`` on pool ``caller``) of each part ``names`` of pool p's
    strengthened invariant, from the call's domain and pool p's invariant only (and
    ``extra``: a mutant's search bounds N so that a counterexample is finite)."""
    cfg = st.c2.cfgs[p]
    hyp = [v for k, v in st.hyp.items() if k.endswith(f"@{p}") or k == f"N{p} >= 1"]
    base = [_case(st, op, caller, st.domain), st.a2.a.kind == OPK2[op], st.a2.c == caller, *hyp]
    post = props.strong(cfg, st.t.s[p])
    # (each part in a context of its own: asked after another in one context, PERM's
    # Touch case went unknown at 60 s; alone it is proved in about a second)
    out = []
    for name in names:
        status, dt, m = isolated_check(
            [*base, *extra], _case(st, op, caller, post[name]), timeout_ms
        )
        out.append(Goal(name, "step", status, dt, m, op=f"{op}@{caller} pool {p}"))
    return out


def every_n_rows(timeout_ms: int) -> list[dict[str, Any]]:
    """Each part of the strengthened invariant, for both pools, for every N_0 and N_1 and
    every k: init, and one case per (call kind, calling pool, pool the goal is about).

    A case's hypotheses are the call's domain and the strengthened invariant of the pool
    its goal speaks of only (a subset of H: the proof is of a stronger statement). With
    both pools' quantified invariants in one context z3 was lost: PERM's Touch and
    FreeBlocks cases were unknown at 30 s, and proved in 1.4 and 13 s with one pool's."""
    from .model import Unbounded

    st = build_every_n()
    parts = tuple(props.strong(st.c2.cfgs[0], st.t.s[0]))
    goals: dict[str, list[Goal]] = {name: [] for name in parts}
    with int_sort(None):
        for p, cfg in enumerate(st.c2.cfgs):  # init: each pool as built
            c = Config(Unbounded(cfg.dom.N), caching=cfg.caching, events=cfg.events)
            s0 = initial(c)
            for name, g in props.strong(c, s0).items():
                (status, dt, m), *_ = isolated_checks([cfg.dom.N >= 1], [g], timeout_ms)
                goals[name].append(Goal(name, "init", status, dt, m, op=f"init@{p}"))
    for op in OPS2:
        for caller in range(POOLS):
            for p in range(POOLS):
                for g in every_n_case(st, op, caller, p, parts, timeout_ms):
                    goals[g.name].append(g)
    out = []
    for name, gs in goals.items():
        status, bad = goals_status(gs)
        out.append(
            dict(
                obligation=f"S and T => {name} (two pools)",
                kind="inductive",
                technique="z3 induction",
                invariants=(name,),
                bounds=f"two pools, every N_0>=1 and N_1>=1, every k, lists<=2 keys=2 "
                f"watchers=2 ({len(gs)} cases)",
                status=status,
                seconds=sum(g.seconds for g in gs),
                replay="; ".join(f"{g.op} ({g.status})" for g in bad[:3]),
            )
        )
    return out


def every_n_witness_row(timeout_ms: int = 20000) -> dict[str, Any]:
    """Every every-N case's hypothesis (the call's domain, its kind and pool, pool p's
    strengthened invariant) has a model with N_0, N_1 <= 4 and finite arrays
    (``witnesses.finite_support``), and pool p's state in it, decoded, passes the spec's
    ``check_pool``."""
    from kvpool.spec import check_pool as check

    from .model import hypothesis_model
    from .witnesses import INDUCTION_BOUND, finite_support

    st = build_every_n()
    problems: list[str] = []
    seconds = 0.0
    cases = 0
    for op in OPS2:
        for caller in range(POOLS):
            for p, cfg in enumerate(st.c2.cfgs):
                cases += 1
                hyp = [v for k, v in st.hyp.items() if k.endswith(f"@{p}") or k == f"N{p} >= 1"]
                base = [
                    _case(st, op, caller, st.domain),
                    st.a2.a.kind == OPK2[op],
                    st.a2.c == caller,
                    *hyp,
                ]
                small = [c.dom.N <= INDUCTION_BOUND for c in st.c2.cfgs]
                fin = finite_support([*base, *small], -1, INDUCTION_BOUND + 1, (-1, 16))
                status, dt, m = hypothesis_model(base, [[*small, *fin]], timeout_ms, seeds=2)
                seconds += dt
                if status != "sat" or m is None:
                    problems.append(f"{op}@{caller} pool {p}: hypothesis {status}")
                    continue
                n = to_int(m.eval(cfg.dom.N, model_completion=True))
                caching = z3.is_true(m.eval(cfg.caching, model_completion=True))
                events = z3.is_true(m.eval(cfg.events, model_completion=True))
                ps = decode_state(
                    m, st.w.s[p], n, cfg.K, cfg.W, caching, events, z3.Select, ranked=False
                )
                if bad := check(ps):
                    problems.append(f"{op}@{caller} pool {p}: decoded state breaks {bad[0]}")
    return dict(
        obligation="S satisfiable, two pools, every N",
        kind="witness",
        technique="z3 induction",
        invariants=(),
        bounds=f"two pools, every N: {cases - len(problems)}/{cases} hypotheses (each call "
        "kind on each pool, each pool's S), a model at N<=4 decoded",
        status="witnessed" if not problems else "NOT-witnessed",
        seconds=seconds,
        replay="; ".join(problems[:3]),
    )


def every_n_mutant_row(timeout_ms: int, bug: str = "forward-unchecked") -> dict[str, Any]:
    """The every-N step refutes a seeded bug: with ``forward-unchecked`` a free on pool 0
    over-frees a block of pool 1, and INV-REF of pool 1 fails (not decoded: N is symbolic;
    the same bug's fixed-N and BMC counterexamples are decoded and replayed)."""
    st = build_every_n(frozenset([bug]))
    small = tuple(cfg.dom.N <= 4 for cfg in st.c2.cfgs)  # (a refutation needs a finite N)
    (g,) = every_n_case(st, "FreeBlocks", 0, 1, ("INV-REF",), timeout_ms, small)
    status, dt = g.status, g.seconds
    return dict(
        obligation=f"S and T => INV-REF (two pools) [{bug}]",
        kind="mutant",
        technique="z3 induction",
        invariants=("INV-REF",),
        bounds="two pools, every N, FreeBlocks on pool 0, pool 1's INV-REF",
        status="expected-refuted" if status == "refuted" else f"NOT-refuted ({status})",
        seconds=dt,
    )


# -- from z3 back to the spec ------------------------------------------------------------------


@dataclass(frozen=True)
class ConcreteArgs2:
    a: ConcreteArgs
    c: int
    ep: tuple[int, ...]
    ibp: int


def read_args2(m: Any, a2: Args2) -> ConcreteArgs2:
    def i(x: Any) -> int:
        return to_int(m.eval(x, model_completion=True))

    return ConcreteArgs2(read_args(m, a2.a), i(a2.c), tuple(i(x) for x in a2.ep), i(a2.ibp))


def to_op2(c: ConcreteArgs2) -> Op:
    """The spec operation a two-pool call stands for (made on pool ``c.c``)."""
    if OPS2[c.a.kind] == "DropPool":
        return DropPool(pool=c.c)
    op = to_op(c.a, 0)
    refs = tuple(BlockRef(p, x) for p, x in zip(c.ep[: c.a.m], c.a.e[: c.a.m], strict=True))
    if isinstance(op, EvictBlocks):
        return replace(op, pool=c.c)
    if isinstance(op, IsBlockWritable):
        return replace(op, block=BlockRef(c.ibp, c.a.ib), pool=c.c)
    if isinstance(op, (FreeBlocks, Touch, UnpinBlocks, CacheBlocks)):
        return replace(op, blocks=refs, pool=c.c)
    return replace(op, pool=c.c)


def decode_world(m: Any, c2: Config2, w: World2) -> World:
    """The spec world a model's two-pool state stands for."""
    pools = []
    for p, cfg in enumerate(c2.cfgs):
        caching = z3.is_true(m.eval(cfg.caching, model_completion=True))
        events = z3.is_true(m.eval(cfg.events, model_completion=True))
        pools.append(
            decode_state(m, w.s[p], c2.n(p), cfg.K, cfg.W, caching, events, lambda x, i: x[i])
        )
    alive = [z3.is_true(m.eval(x, model_completion=True)) for x in w.alive]
    return World(pools, alive)


def witness_row(st: Step2, ns: tuple[int, int]) -> dict[str, Any]:
    """Every case's hypothesis (H on both pools, the call's domain, its kind and caller) is
    satisfiable; its model, decoded, is a world the spec accepts (every live pool passes
    ``check_pool``), and the call replayed on the spec leaves one that passes it too."""
    problems: list[str] = []
    seconds = 0.0
    cases = 0
    for op in OPS2:
        for caller in range(POOLS):
            cases += 1
            (status, dt, m), *_ = isolated_checks(_base(st, op, caller), [z3.BoolVal(False)], 60000)
            seconds += dt
            if status != "refuted" or m is None:
                problems.append(
                    f"{op}@{caller}: hypothesis {'unsat' if status == 'proved' else status}"
                )
                continue
            world = decode_world(m, st.c2, st.w)
            call = to_op2(read_args2(m, st.a2))
            pre = [v for i, ps in enumerate(world.pools) for v in check_pool(ps, i)]
            if pre:
                problems.append(f"{op}@{caller}: decoded world breaks {pre[0]}")
                continue
            world.apply(call)
            post = [v for i, ps in enumerate(world.pools) for v in check_pool(ps, i)]
            if post:
                problems.append(f"{op}@{caller}: {call!r} on the spec breaks {post[0]}")
    return dict(
        obligation=f"H satisfiable, two pools N={ns[0]}+{ns[1]}",
        kind="witness",
        technique=TECHNIQUE,
        invariants=(),
        bounds=f"two pools N={ns[0]}+{ns[1]}: {cases - len(problems)}/{cases} hypotheses (a "
        "call of each kind on each pool), decoded, the calls replayed on the spec",
        status="witnessed" if not problems else "NOT-witnessed",
        seconds=seconds,
        replay="; ".join(problems[:3]),
    )


def induction_mutant_rows(ns: tuple[int, int], timeout_ms: int) -> list[dict[str, Any]]:
    """Each of :data:`BUGS` makes the induction step of each obligation it claims fail at
    ``ns``: the refuting pre-world (which satisfies H) and call are decoded and the call is
    replayed on the buggy spec, which must show the obligation broken."""
    out: list[dict[str, Any]] = []
    for bug, (claims, _) in BUGS.items():
        st = build(ns, frozenset([bug]))
        for ob in claims:
            gs: list[Goal] = []
            for op in ("FreeBlocks", *(o for o in OPS2 if o != "FreeBlocks")):
                gs += step_goals(st, (ob,), timeout_ms, (op,))
                if gs[-1].status == "refuted" or gs[-2].status == "refuted":
                    break
            hit = next((g for g in gs if g.status == "refuted" and g.model is not None), None)
            row: dict[str, Any] = dict(
                obligation=f"{ob} (two pools) [{bug}]",
                kind="mutant",
                technique=TECHNIQUE,
                invariants=(ob,),
                bounds=bounds(ns),
                status="NOT-refuted" if all(g.status == "proved" for g in gs) else "unknown",
                seconds=sum(g.seconds for g in gs),
            )
            if hit is not None:
                world = decode_world(hit.model, st.c2, st.w)
                call = to_op2(read_args2(hit.model, st.a2))
                row["trace"] = world_trace(world, call)
                row["replay"] = _replay(bug, world, ob, [call])
                row["status"] = (
                    "expected-refuted" if row["replay"].startswith("confirmed") else "NOT-confirmed"
                )
            out.append(row)
    return out


# -- the seeded bugs, in the spec ---------------------------------------------------------------


class BuggyWorld2(World):
    """The spec's world with one of :data:`BUGS`."""

    bug: str = ""

    @classmethod
    def of_bug(cls, bug: str, world: World) -> BuggyWorld2:
        w = cls([ps.copy() for ps in world.pools], list(world.alive))
        w.bug = bug
        return w

    def _op_free_blocks(self, op: FreeBlocks) -> Outcome:
        if self.bug not in BUGS:
            return super()._op_free_blocks(op)
        pi = op.pool
        self.pool(pi)
        groups: dict[int, list[int]] = {}
        for e in op.blocks:
            ref = self._entry(e)
            gone = not self.alive[ref.pool] and self.bug != "drop-frees-dropped"
            if ref.block == NULL_BLOCK or gone:
                continue
            groups.setdefault(ref.pool, []).append(ref.block)
        for p, ids in groups.items():
            if self.bug != "forward-unchecked" or p == pi:
                self._check_multiplicity(self.pools[p], ids, p)
        if self.bug == "forward-to-caller":
            n = self.pools[pi].num_blocks
            ids = [b for g in groups.values() for b in g if b < n]
            self._release(self.pools[pi], ids, bool(op.evict_first))
            return Outcome()
        for p, ids in groups.items():
            self._release(self.pools[p], ids, bool(op.evict_first))
        return Outcome()

    def apply(self, op: Op) -> Outcome:
        if isinstance(op, FreeBlocks):
            try:
                return self._op_free_blocks(op)
            except _Refused as refusal:
                return Outcome(error=refusal.kind, detail=refusal.detail)
        return super().apply(op)


def _replay(bug: str, world: World, obligation: str, trace: list[Op]) -> str:
    """``trace`` on the buggy spec beside the spec: the first step where ``obligation`` is
    seen broken (an invariant by ``check_pool``; a rule as the spec and the buggy spec
    parting ways on that call: its outcome, a pool's state or which pools are live)."""
    from kvpool.spec import INVARIANTS

    buggy = BuggyWorld2.of_bug(bug, world)
    good = world.copy()
    for i, op in enumerate(trace):
        before = [ps.snapshot() for ps in buggy.pools]
        was_alive = list(buggy.alive)
        out = buggy.apply(op)
        if obligation in INVARIANTS:
            bad = world_violations(buggy, obligation)
            if bad:
                return f"confirmed at step {i + 1}: {op!r} leaves {bad[0]}"
            good.apply(op)
            continue
        if obligation == "DROP-GONE":
            changed = [
                p
                for p in range(len(buggy.pools))
                if not was_alive[p] and buggy.pools[p].snapshot() != before[p]
            ]
            if changed:
                return f"confirmed at step {i + 1}: {op!r} changes gone pool {changed[0]}"
            good.apply(op)
            continue
        ref = good.apply(op)
        if (
            (ref.value, ref.error, ref.fired) != (out.value, out.error, out.fired)
            or [ps.snapshot() for ps in good.pools] != [ps.snapshot() for ps in buggy.pools]
            or good.alive != buggy.alive
        ):
            got, want = out.error or out.value, ref.error or ref.value
            result = (
                f"returns {got!r} as the spec does"
                if (got, out.fired) == (want, ref.fired)
                else f"returns {got!r}, the spec {want!r}"
            )
            return (
                f"confirmed at step {i + 1}: {op!r} {result}; after it, the buggy spec's pools "
                + " | ".join(ps.describe() for ps in buggy.pools)
                + ", the spec's "
                + " | ".join(ps.describe() for ps in good.pools)
            )
    return "NOT confirmed by replay"


# -- bounded model checking ----------------------------------------------------------------------


@dataclass
class Unrolling2:
    c2: Config2
    k: int
    worlds: list[World2]
    args: list[Args2]
    solver: z3.Solver
    obligations: dict[str, list[Any]] = field(default_factory=dict)
    build_time: float = 0.0


def unroll(ns: tuple[int, int], k: int, bugs: frozenset[str] = frozenset()) -> Unrolling2:
    """Every run of at most k calls from the world as built (both pools live)."""
    with int_sort(None):
        t0 = time.perf_counter()
        c2 = config2(ns, bugs=bugs)
        sol = z3.Solver()
        w = _pin(c2, initial_world(c2), "w0", sol)
        worlds, argl = [w], []
        obl: dict[str, list[Any]] = {}
        for i in range(k):
            a2 = fresh_args2(c2, f"a{i}")
            sol.add(args_domain2(c2, w, a2))
            t, r = transition2(c2, w, a2)
            t = _pin(c2, t, f"w{i + 1}", sol)
            for name, p in {**state_obligations2(c2, t), **rules2(c2, w, a2, r, t)}.items():
                obl.setdefault(name, []).append(p)
            worlds.append(t)
            argl.append(a2)
            w = t
        return Unrolling2(c2, k, worlds, argl, sol, obl, time.perf_counter() - t0)


def _pin(c2: Config2, w: World2, name: str, sol: z3.Solver) -> World2:
    """Fresh variables equal to ``w`` (keeps the unrolled terms small)."""
    f = fresh_world(c2, name)
    for p in range(POOLS):
        for fld, val in vars(w.s[p]).items():
            fv = getattr(f.s[p], fld)
            if val is None:
                continue
            if isinstance(val, list) and val and isinstance(val[0], list):
                for u, v in zip(fv, val, strict=True):
                    sol.add([x == y for x, y in zip(u, v, strict=True)])
            elif isinstance(val, list):
                sol.add([x == y for x, y in zip(fv, val, strict=True)])
            else:
                sol.add(fv == val)
        sol.add(f.alive[p] == w.alive[p])
    return f


def bmc_check(
    u: Unrolling2, name: str, timeout_ms: int
) -> tuple[str, float, list[Op], World | None]:
    """Is ``name`` broken after some step <= k? The trace up to the first broken step, and
    the initial world (each pool's flags as the model chose them)."""
    s = u.solver
    s.push()
    s.set("timeout", timeout_ms)
    s.add(z3.Or([z3.Not(p) for p in u.obligations[name]]))
    t0 = time.perf_counter()
    res = s.check()
    dt = time.perf_counter() - t0
    try:
        if res != z3.sat:
            return ("proved" if res == z3.unsat else "unknown"), dt, [], None
        m = s.model()
        first = next(
            i
            for i, p in enumerate(u.obligations[name])
            if not z3.is_true(m.eval(p, model_completion=True))
        )
        ops = [to_op2(read_args2(m, a)) for a in u.args[: first + 1]]
        return "refuted", dt, ops, decode_world(m, u.c2, u.worlds[0])
    finally:
        s.pop()


def mutant_rows(ns: tuple[int, int], k: int, timeout_ms: int) -> list[dict[str, Any]]:
    """Each of :data:`BUGS`, BMC on its claimed obligations; the trace replayed on the
    buggy spec must show the obligation broken."""
    out: list[dict[str, Any]] = []
    for bug, (claims, _) in BUGS.items():
        u = unroll(ns, k, frozenset([bug]))
        for ob in claims:
            status, dt, trace, w0 = bmc_check(u, ob, timeout_ms)
            row: dict[str, Any] = dict(
                obligation=f"{ob} [{bug}]",
                kind="mutant",
                technique="z3 BMC",
                invariants=(ob,),
                bounds=f"two pools N={ns[0]}+{ns[1]} k={k} lists<=2",
                status="NOT-refuted" if status == "proved" else status,
                seconds=dt + u.build_time / len(claims),
            )
            if status == "refuted" and w0 is not None:
                row["trace"] = [repr(op) for op in trace]
                row["replay"] = _replay(bug, w0, ob, trace)
                row["status"] = (
                    "expected-refuted" if row["replay"].startswith("confirmed") else "NOT-confirmed"
                )
            out.append(row)
    return out


def bmc_rows(ns: tuple[int, int], k: int, timeout_ms: int) -> list[dict[str, Any]]:
    """Every obligation of the two-pool world, at every step <= k (a cross-check)."""
    u = unroll(ns, k)
    out = []
    for name in u.obligations:
        status, dt, trace, _ = bmc_check(u, name, timeout_ms)
        out.append(
            dict(
                obligation=f"{name} (two pools)",
                kind="BMC",
                technique="z3 BMC",
                invariants=(name,),
                bounds=f"two pools N={ns[0]}+{ns[1]} k={k} lists<=2 keys=2 watchers=2",
                status=status,
                seconds=dt,
                trace=[repr(op) for op in trace],
            )
        )
    return out


# -- the differential: the encoding against the spec, on reachable two-pool worlds --------------


@dataclass
class _PoolView:
    """What ``differential.encode`` reads of a stepper: one pool's variables."""

    cfg: Config
    pre: State
    args: Args
    reading: str = "finite"
    outputs: Any = None


class Stepper2:
    """One symbolic two-pool step, evaluated on concrete worlds by substitution."""

    def __init__(self, ns: tuple[int, int], bugs: frozenset[str] = frozenset()) -> None:
        with int_sort(None):
            self.c2 = config2(ns, bugs=bugs)
            self.w = fresh_world(self.c2, "pre")
            self.a2 = fresh_args2(self.c2, "arg")
            self.t, self.r = transition2(self.c2, self.w, self.a2)
            self.dummy = fresh_args(self.c2.cfgs[0], "unused")
        self.ns = ns
        # every term the comparison reads, evaluated in one substitution per pair
        terms: list[Any] = [self.r.err, *self.t.alive]
        for p in range(POOLS):
            terms += _flat(vars(self.t.s[p])) + _flat(vars(self.w.s[p]))
            r = self.r.res[p]
            terms += _flat([r.err, r.value, r.ret, r.fire, r.fire_key])
        self.outputs = [(x, x) for x in terms]

    def encode(self, world: World, c: ConcreteArgs2) -> differential._Subst:
        pairs: list[tuple[Any, Any]] = []
        for p, cfg in enumerate(self.c2.cfgs):
            view = _PoolView(cfg, self.w.s[p], self.dummy)
            pairs += differential.encode(view, world.pools[p], c.a).pairs  # type: ignore[arg-type]
        # (differential.encode put the call's arguments on the unused Args: now the real ones)
        a = self.a2.a
        vals: list[tuple[Any, int | bool]] = [
            (a.kind, c.a.kind),
            (a.n, c.a.n),
            (a.m, c.a.m),
            (a.ef, c.a.ef),
            (a.w, c.a.w),
            (a.km, c.a.km),
            (a.qk, c.a.qk),
            (a.ib, c.a.ib),
            (self.a2.c, c.c),
            (self.a2.ibp, c.ibp),
        ]
        vals += [(a.e[j], c.a.e[j]) for j in range(self.c2.M)]
        vals += [(a.ks[j], c.a.ks[j]) for j in range(self.c2.M)]
        vals += [(self.a2.ep[j], c.ep[j]) for j in range(self.c2.M)]
        vals += [(self.w.alive[p], world.alive[p]) for p in range(POOLS)]
        for var, v in vals:
            pairs.append((var, z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)))
        return differential._Subst(pairs, self.outputs)

    def compare(self, world: World, c: ConcreteArgs2) -> str | None:
        """The encoding's step against the spec's on one (world, call): None if they agree."""
        op = to_op2(c)
        m = self.encode(world, c)
        err = to_int(m.eval(self.r.err))
        caller = self.r.res[c.c]
        if err:
            enc_out = Outcome(error=ErrorKind(ERRORS[err]))
        elif OPS2[c.a.kind] == "DropPool":
            enc_out = Outcome()
        else:
            view = _PoolView(self.c2.cfgs[c.c], self.w.s[c.c], self.a2.a)
            st = replace_stepper(view, caller)
            enc_out = differential.encoded_outcome(st, m, c.a, world.pools[c.c])
            enc_out = Outcome(
                value=enc_out.value,
                fired=tuple(Firing(f.watcher, c.c, f.block) for f in enc_out.fired),
            )
        after = []
        for p, cfg in enumerate(self.c2.cfgs):
            ps = world.pools[p]
            dec = decode_state(
                m,
                self.t.s[p],
                ps.num_blocks,
                cfg.K,
                cfg.W,
                ps.caching,
                ps.events_on,
                lambda x, i: x[i],
            )
            dec.log = [None] * to_int(m.eval(self.t.s[p].nev))  # type: ignore[list-item]
            after.append(differential.comparable(dec))
        alive = [z3.is_true(m.eval(x)) for x in self.t.alive]
        spec = world.copy()
        out = spec.apply(op)
        kind = OPS2[c.a.kind]
        spec_out = (
            Outcome(error=out.error, fired=out.fired)
            if out.error
            else differential.spec_comparable_outcome(out, kind)
            if kind in OPS
            else Outcome(value=out.value)
        )
        spec_view = (spec_out, [differential.comparable(ps) for ps in spec.pools], spec.alive)
        enc_view = (enc_out, after, alive)
        if spec_view != enc_view:
            where = f"{op!r} on " + " | ".join(
                f"{'' if world.alive[p] else '(gone) '}{ps.describe()}"
                for p, ps in enumerate(world.pools)
            )
            return f"{where}:\n  spec    {spec_view}\n  encoded {enc_view}"
        return None


def _flat(x: Any) -> list[Any]:
    """Every z3 term in ``x`` (a term, or lists/dicts of them; None skipped)."""
    if x is None:
        return []
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat(v)]
    if isinstance(x, list):
        return [t for v in x for t in _flat(v)]
    return [x]


def replace_stepper(view: _PoolView, res: Result) -> Any:
    """A stand-in for ``differential.Stepper`` (what ``encoded_outcome`` reads)."""

    @dataclass
    class _St:
        cfg: Config
        pre: State
        res: Result
        reading: str = "finite"

        def sel(self, a: Any, i: int) -> Any:
            return a[i]

    return _St(view.cfg, view.pre, res)


def random_call(
    rng: random.Random, world: World, M: int = 2, K: int = 2, W: int = 2
) -> ConcreteArgs2:
    """A call on a live pool; its entries often name the other pool's blocks (live or
    gone), in use there, so that forwarded frees and ForeignBlock refusals are reached."""
    live = [p for p in range(POOLS) if world.alive[p]]
    c = rng.choice(live)
    ps = world.pools[c]
    kind = rng.choices(range(len(OPS2)), weights=[_WEIGHT.get(o, 1) for o in OPS2])[0]
    base = differential.state_args(rng, ps, K, W, M, kind) if kind < len(OPS) else None
    if base is None:
        base = ConcreteArgs(kind, 0, 0, (0,) * M, False, 0, 0, (1,) * M, 1, 0)
    ep = [c] * M
    e = list(base.e)
    if OPS2[kind] in ("FreeBlocks", "Touch", "UnpinBlocks", "CacheBlocks") and rng.random() < 0.7:
        m = max(base.m, rng.randint(1, M))
        base = replace(base, m=m, km=m if base.km == base.m else base.km)
    if OPS2[kind] != "EvictBlocks":
        for j in range(M):
            if rng.random() < 0.45:
                gone = [q for q in range(POOLS) if not world.alive[q]]
                p = rng.choice(gone) if gone and rng.random() < 0.5 else rng.randrange(POOLS)
                other = world.pools[p]
                used = [b for b in range(1, other.num_blocks) if other.ref[b] > 0]
                choices = used * 8 + [0, other.num_blocks] + list(range(1, other.num_blocks))
                ep[j], e[j] = p, rng.choice(choices)
    held = [
        (p, b)
        for p in range(POOLS)
        for b in range(1, world.pools[p].num_blocks)
        if world.pools[p].ref[b] > 0
    ]
    if OPS2[kind] == "FreeBlocks" and held and rng.random() < 0.6:
        # blocks in use anywhere, live pools or gone: a free that forwards or drops them
        picked = rng.sample(held, min(M, len(held)))
        if rng.random() < 0.3:  # and one block of another pool that is not in use
            p = rng.randrange(POOLS)
            idle = [b for b in range(1, world.pools[p].num_blocks) if world.pools[p].ref[b] == 0]
            if idle:
                picked[-1] = (p, rng.choice(idle))
        ep = [p for p, _ in picked] + [c] * (M - len(picked))
        e = [b for _, b in picked] + [0] * (M - len(picked))
        base = replace(base, m=len(picked))
    ibp = rng.randrange(POOLS)
    ib = rng.randrange(world.pools[ibp].num_blocks + 1)
    return ConcreteArgs2(replace(base, e=tuple(e), ib=ib), c, tuple(ep), ibp)


_WEIGHT = {
    "GetNewBlocks": 4,
    "FreeBlocks": 10,
    "Touch": 4,
    "UnpinBlocks": 4,
    "CacheBlocks": 4,
    "DropPool": 1.5,
}
"""How often a random call is each kind (others 1): free_blocks most, where pools meet."""


def reachable_worlds(rng: random.Random, ns: tuple[int, int], max_steps: int = 14) -> list[World]:
    """Worlds the spec reaches from two pools as built by a random run (never dropping the
    last live pool: a world with none takes no call)."""
    world = World(
        [PoolState.initial(n, rng.random() < 0.8, rng.random() < 0.7) for n in ns], [True] * POOLS
    )
    out = [world.copy()]
    for _ in range(rng.randint(1, max_steps)):
        c = random_call(rng, world)
        if OPS2[c.a.kind] == "DropPool" and sum(world.alive) == 1:
            continue
        world.apply(to_op2(c))
        out.append(world.copy())
    return out


DIFF_SIZES: tuple[tuple[int, int], ...] = ((2, 3), (3, 3))
DIFF_SEED = 11


def diff_run(
    samples: int,
    bugs: frozenset[str] = frozenset(),
    stop_at_first: bool = False,
    seed: int = DIFF_SEED,
) -> tuple[int, list[str]]:
    """``samples`` (reachable world, call) pairs compared: (compared, mismatches)."""
    rng = random.Random(seed)
    steppers = {ns: Stepper2(ns, bugs) for ns in DIFF_SIZES}
    done, bad = 0, []
    while done < samples:
        ns = rng.choice(DIFF_SIZES)
        worlds = reachable_worlds(rng, ns)
        world = worlds[rng.randrange(len(worlds))]
        busy = [p for p in range(POOLS) if any(world.pools[p].ref[1:])]
        if all(world.alive) and busy and rng.random() < 0.35:
            # a gone pool that still holds blocks in use: where dropped entries matter
            world.apply(DropPool(pool=rng.choice(busy)))
        for _ in range(4):
            if done >= samples:
                break
            c = random_call(rng, world)
            if OPS2[c.a.kind] == "DropPool" and sum(world.alive) == 1:
                continue
            got = steppers[ns].compare(world, c)
            done += 1
            if got is not None:
                bad.append(got)
                if stop_at_first:
                    return done, bad
    return done, bad


def diff_rows(samples: int) -> list[dict[str, Any]]:
    """The differential on correct encoding (must agree) and on each of :data:`BUGS` (must
    be caught), ``runner.ObligationResult(**row)`` rows."""
    out = []
    t0 = time.perf_counter()
    done, bad = diff_run(samples)
    sizes = ", ".join(f"{a}+{b}" for a, b in DIFF_SIZES)
    out.append(
        dict(
            obligation="two-pool z3 transition == spec.World.apply",
            kind="differential",
            technique="differential",
            invariants=(),
            bounds=f"two pools: {done} reachable worlds x calls, N in {sizes}",
            status="agree" if not bad else "disagree",
            seconds=time.perf_counter() - t0,
            trace=bad[:3],
        )
    )
    for bug in BUGS:

        def run(bug: str = bug) -> tuple[int, list[str]]:
            done, bad = diff_run(samples, frozenset([bug]), stop_at_first=True)
            return done, bad[:1]

        out.append(differential.catch_row("two pools", "two-pool", bug, run))
    return out


def all_rows(
    sizes: tuple[tuple[int, int], ...],
    timeout_ms: int,
    bmc_at: tuple[tuple[int, int], int],
    diff_samples: int,
    bmc_proofs: bool = False,
    every_n: bool = False,
) -> list[dict[str, Any]]:
    """The two-pool part of a profile: the fixed-N induction and its witnesses at each
    size of ``sizes``, each bug refuted by the induction step and by BMC (at ``bmc_at``:
    (N_0, N_1), k) and replayed on the spec, the differential and its catches; with
    ``bmc_proofs``, every obligation by BMC too (a cross-check)."""
    out = rows(sizes, timeout_ms)
    ns, k = bmc_at
    out += induction_mutant_rows(ns, timeout_ms)
    out += mutant_rows(ns, k, timeout_ms)
    if bmc_proofs:
        out += bmc_rows(ns, k, timeout_ms)
    out += diff_rows(diff_samples)
    if every_n:
        out += every_n_rows(timeout_ms)
        out.append(every_n_witness_row())
        out.append(every_n_mutant_row(timeout_ms))
    return out
