"""Two pools with lists of symbolic length: FREE-FORWARD, DROP-GONE, POOL-FRAME as loops.

:mod:`kvpool.proofs.twopooln` proves the two-pool rules for every N_0, N_1, with block
lists of at most 2 entries (unrolled). Here the list is :mod:`kvpool.proofs.symlists`'
array ``E[0..m)`` of symbolic length ``m``, each entry with its pool ``EP[j]`` (0 or 1),
and a list-taking call on pool ``c`` -- ``free_blocks``, ``touch``, ``unpin_blocks``,
``cache_blocks`` -- is a loop over it. Entry j's *guard* is the spec's check on the loop's
states there: an id that is no block of its pool refuses; in ``free_blocks`` each pool p's
one-pool guard (``symlists.guard``) on the entry *as p reads it* (``mapped``: the block if
the entry names p's block and p is live, else the null block, which every one-pool
guard and body skips); in the other calls the null block is skipped (touch) or refused,
another pool's block refused (``ForeignBlock``), and the caller's one-pool guard. The
*body* is ``symlists.body`` on each pool's state with its mapped entry (free_blocks: both
pools, so a forwarded entry is a direct free in its own pool; the other calls: the
caller's pool only). A refused call leaves the pre-world (the spec checks every entry
before it changes anything); the loop carries whether every entry so far passed and
what a refusal leaves, as ``symlists.atomic_obligations`` does. The refusal's kind is
not stated.

Obligations, each as loop init, step and exit, for every N_0, N_1 >= 1 and every m:

* **FREE-FORWARD, accept** (per calling pool): a free_blocks is accepted iff no entry is
  invalid (an id that is no block of its pool) and no live pool's entries over-free a
  block, the counts ``Cnt_p(b, j)`` (entries among the first j naming block b of pool
  p) ghost arrays defined by their recurrences (``symlists._ghosts`` on the entries
  naming p's blocks). Loop invariant: "accepted so far" iff every entry so far valid and
  no live pool's block counted beyond its ref_cnt; accepted so far, each live pool's
  ref_cnt is its count less its listings so far. No invariant of the pools is assumed.
* **FREE-FORWARD, pool p** (per calling pool and pool p, p live): an accepted free leaves
  p's ref_cnts dropped by the entries naming each block, its queue as ORD-RELEASE of its
  own entries (``symlists._shape``: FRONT, the old queue, BACK, each in list order) and
  every other field unchanged. Loop invariant: ``symlists._shape`` and ``_tracks`` of
  p's entries so far, the unchanged fields, and p's PERM and INV-REF with the loop's
  FRONT count in range (proved preserved in a case of their own, ``pool p S``); the
  hypothesis holds p's PERM and INV-REF.
* **DROP-GONE** (free_blocks, per calling pool): a gone pool's state never changes, for
  any list naming its blocks (the loop invariant; a refused call is POOL-FRAME's).
* **POOL-FRAME** (each of the four calls, per calling pool): a refused call leaves both
  pools as they were; every call but free_blocks leaves the other pool as it was, and an
  accepted touch, unpin_blocks or cache_blocks names no other pool's non-null block (the
  loop invariant: so far). No invariant of the pools is assumed. (``evict_blocks`` takes
  ids of its own pool, as ``twopool``'s domain has it: no entry names another pool.)

Calls that take no list are :mod:`~kvpool.proofs.twopooln`'s (their rows there), as the
one-pool every-N proof leaves them to the induction.

Seeded bugs (:data:`BUGS`), each acting from the third entry on, so that lists of at most
2 entries -- twopooln's -- cannot hold them: each fails its obligation's loop step for
every list length (z3 gives an entry and loop states), the same step with ``m <= 2`` is
proved, and with the loop unrolled to :data:`UNROLL` entries from a world whose pools
satisfy S (``props.strong``) z3 gives a counterexample that is decoded into a spec
``World`` and call: the spec run on it must agree with the correct unrolled loop, and
part from the buggy one (the call's acceptance, a pool's state). Every distinct
hypothesis has a model (:func:`witness_row`) whose pre-world is one the spec reaches,
decoded and passing ``check_pool``, its call replayed on the spec leaving a world that
passes it. The loops agree with ``twopool.transition2`` (the encoding twopooln proves
on) on every list of at most 2 entries, from every world whose pools satisfy S
(:func:`agreement_goals`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import (
    Op,
    World,
)

from . import props
from .model import (
    OPK,
    Config,
    Goal,
    State,
    Unbounded,
    blank_mutant_row,
    fresh_state,
    hypothesis_model,
    isolated_check,
    iv,
    merge,
    name_rows,
    named,
    robust_check,
    state_eq,
    to_int,
)
from .symlists import (
    LArgs,
    Loop,
    _ghosts,
    _shape,
    _tracks,
    body,
    closed_checks,
    finish,
    fresh_largs,
    guard,
    loop_facts,
    same_state,
)
from .twopool import _UNCHANGED_BY_FREE, _fields_eq, world_trace, world_violations

I = z3.IntSort()  # noqa: E741
POOLS = 2
OPS: tuple[str, ...] = ("FreeBlocks", "Touch", "UnpinBlocks", "CacheBlocks")
"""The list-taking calls whose entries name a pool's block."""
NAMES: tuple[str, ...] = ("FREE-FORWARD", "DROP-GONE", "POOL-FRAME")
LATE = 2
"""The first entry (0-based) a seeded bug acts on: a list of >= 3 entries shows it."""
UNROLL = 3
"""Entries the loop is unrolled to for a bug's decodable counterexample."""

BUGS: dict[str, tuple[str, str, str]] = {
    "forward-late-unchecked": (
        "FREE-FORWARD",
        "FreeBlocks",
        "from the third entry on, free_blocks does not check an entry naming another "
        "pool's block for an over-free (it is released below ref_cnt 0)",
    ),
    "drop-late-freed": (
        "DROP-GONE",
        "FreeBlocks",
        "from the third entry on, free_blocks forwards an entry naming a gone pool's block "
        "as if that pool were live",
    ),
    "touch-late-foreign-skipped": (
        "POOL-FRAME",
        "Touch",
        "from the third entry on, touch skips an entry naming another pool's block (as it "
        "skips the null block) instead of refusing the call (ForeignBlock)",
    ),
    "refusal-keeps-forwarded": (
        "POOL-FRAME",
        "FreeBlocks",
        "a free_blocks refused at its third entry or later keeps, in the pool it was not "
        "made on, what the entries before did there",
    ),
}
"""Seeded bugs: name -> (the obligation it must break, the call it changes, what it
does)."""

BOUNDS = "two pools, every list length, every N_0>=1 and N_1>=1, keys=2 watchers=2"
"""A row's bounds (``kvpool.verify`` reads the "two pools, every list length" it opens
with: twopooln's rows open with "two pools, every N" and hold lists <= 2)."""


def pool_cfg(p: int) -> Config:
    """Pool p's one-pool configuration: N_p symbolic (the unbounded reading), its own
    caching and events flags (the names ``twopool.build_every_n`` gives them)."""
    return Config(
        Unbounded(z3.Int(f"N{p}")),
        K=2,
        W=2,
        M=1,
        caching=z3.Bool(f"caching{p}"),
        events=z3.Bool(f"events{p}"),
    )


@dataclass
class Call:
    """A list-taking call on pool ``c``: ``a`` (symlists' list, keys, evict_first,
    watcher), each entry's pool ``EP[j]``, and which pools are live."""

    op: str
    c: int
    a: LArgs
    EP: Any
    alive: list[Any]
    bugs: frozenset[str]


@dataclass
class World2:
    """The setting: each pool's configuration and pre-state, and the call."""

    cfgs: list[Config]
    s: list[State]
    call: Call


def setting(op: str, c: int, bugs: frozenset[str] = frozenset()) -> World2:
    unknown = bugs - set(BUGS) - {"hyp-false"}
    if unknown:
        raise ValueError(f"not a bug of the two-pool list loops: {sorted(unknown)}")
    if op not in OPS or c not in range(POOLS):
        raise ValueError(f"not a two-pool list call: {op!r} on pool {c!r}")
    cfgs = [pool_cfg(p) for p in range(POOLS)]
    s = [fresh_state(cfg, f"w.p{p}", globals_=False) for p, cfg in enumerate(cfgs)]
    a = fresh_largs("a")
    alive = [z3.Bool(f"w.alive{p}") for p in range(POOLS)]
    return World2(cfgs, s, Call(op, c, a, z3.Array("a.EP", I, I), alive, bugs))


def _E(call: Call, k: Any) -> Any:
    return z3.Select(call.a.E, k)


def _EP(call: Call, k: Any) -> Any:
    return z3.Select(call.EP, k)


def _N(wd: World2, p: Any) -> Any:
    """N of pool ``p`` (a term: 0 or 1)."""
    return z3.If(p == 0, wd.cfgs[0].dom.N, wd.cfgs[1].dom.N)


def own(call: Call, p: int) -> LArgs:
    """The entries naming pool p's blocks (the others as the null block): what the rules'
    counts speak of, whether p is live or not."""
    k = z3.Int("own_k")
    e = z3.Lambda([k], z3.If(_EP(call, k) == p, _E(call, k), iv(0)))
    return replace(call.a, E=e)


def mapped(call: Call, p: int) -> LArgs:
    """The call as pool p reads it: an entry naming p's block is that block (in
    free_blocks only while p is live: a gone pool's entries are dropped), any other
    entry the null block."""
    k = z3.Int("map_k")
    mine = _EP(call, k) == p
    if call.op == "FreeBlocks":
        live = call.alive[p]
        if "drop-late-freed" in call.bugs:
            live = z3.Or(live, k >= LATE)
        mine = z3.And(mine, live)
    e = z3.Lambda([k], z3.If(mine, _E(call, k), iv(0)))
    return replace(call.a, E=e)


def domain(wd: World2, j: Any) -> Any:
    """Entry ``j``'s range (its pool 0 or 1; id N of its pool stands for an id that is
    no block), its key, the watcher."""
    call, K, W = wd.call, wd.cfgs[0].K, wd.cfgs[0].W
    a, x, ep, ks = call.a, _E(call, j), _EP(call, j), z3.Select(call.a.KS, j)
    return z3.And(ep >= 0, ep < POOLS, x >= 0, x <= _N(wd, ep), ks >= 1, ks <= K, a.w >= 0, a.w < W)


def valid(wd: World2, k: Any) -> Any:
    """Entry k names a block of its pool (else the call is refused: InvalidArgument)."""
    return _E(wd.call, k) < _N(wd, _EP(wd.call, k))


def guard2(wd: World2, lps: list[Loop], j: Any) -> Any:
    """Entry ``j`` is accepted on the loop's states ``lps`` (else the call is refused)."""
    call, c, op = wd.call, wd.call.c, wd.call.op
    x, ep = _E(call, j), _EP(call, j)
    g = [valid(wd, j)]
    if op == "FreeBlocks":
        for p, cfg in enumerate(wd.cfgs):
            xp = z3.Select(mapped(call, p).E, j)
            gp = guard(cfg, op, lps[p], xp)
            if "forward-late-unchecked" in call.bugs and p != c:
                gp = z3.If(j >= LATE, z3.And(xp >= 0, xp < cfg.dom.N), gp)
            g.append(gp)
        return z3.And(g)
    mine: Any = ep == c
    if "touch-late-foreign-skipped" in call.bugs and op == "Touch":
        mine = z3.Or(mine, j >= LATE)
    g.append(z3.Or(x == 0, mine) if op == "Touch" else z3.And(x != 0, mine))
    g.append(guard(wd.cfgs[c], op, lps[c], z3.Select(mapped(call, c).E, j)))
    return z3.And(g)


def step(wd: World2, lps: list[Loop], j: Any) -> list[Loop]:
    """Entry ``j``'s body: free_blocks on each pool (its mapped entry), the other calls
    on the caller's pool only."""
    call = wd.call
    if call.op == "FreeBlocks":
        return [body(cfg, call.op, lps[p], mapped(call, p), j) for p, cfg in enumerate(wd.cfgs)]
    c = call.c
    return [
        body(wd.cfgs[c], call.op, lps[c], mapped(call, c), j) if p == c else lps[p]
        for p in range(POOLS)
    ]


def finish2(wd: World2, lps: list[Loop]) -> list[State]:
    """The call's post-states from the loop's last states (cache_blocks' one event)."""
    call = wd.call
    return [
        finish(cfg, call.op, lps[p], mapped(call, p)) if p == call.c else lps[p].s
        for p, cfg in enumerate(wd.cfgs)
    ]


def refusal_left2(wd: World2, p: int, u: State, j: Any) -> State:
    """What a refusal at entry ``j`` leaves in pool p (``u``: p's state there): p's
    pre-state; with ``refusal-keeps-forwarded``, a free refused at j >= 2 keeps ``u`` in
    the pool it was not made on."""
    s = wd.s[p]
    call = wd.call
    if "refusal-keeps-forwarded" in call.bugs and call.op == "FreeBlocks" and p != call.c:
        return merge(wd.cfgs[p].dom, j >= LATE, u, s)
    return s


def opening(wd: World2) -> Any:
    """The call's checks that read no entry (cache_blocks: lengths, caching on)."""
    c = wd.call.c
    return closed_checks(wd.cfgs[c], wd.call.op, wd.call.a)


def prefix(wd: World2, n: int) -> tuple[list[Loop], Any, list[State]]:
    """The loop after its first ``n`` entries (those below ``m``): each pool's loop state,
    whether every entry so far passed (and the closed checks), what a refusal leaves."""
    lps = [Loop(s, iv(0), s.L) for s in wd.s]
    ok: Any = opening(wd)
    left = list(wd.s)
    a = wd.call.a
    for j in range(n):
        live = iv(j) < a.m
        g = guard2(wd, lps, iv(j))
        here = z3.And(live, ok, z3.Not(g))
        left = [
            merge(cfg.dom, here, refusal_left2(wd, p, lps[p].s, iv(j)), left[p])
            for p, cfg in enumerate(wd.cfgs)
        ]
        ok = z3.And(ok, z3.Implies(live, g))
        nxt = step(wd, lps, iv(j))
        lps = [
            Loop(
                merge(cfg.dom, live, nxt[p].s, lps[p].s),
                z3.If(live, nxt[p].f, lps[p].f),
                lps[p].L0,
            )
            for p, cfg in enumerate(wd.cfgs)
        ]
    return lps, ok, left


def unrolled(wd: World2, n: int) -> tuple[list[State], Any]:
    """The call on a list of at most ``n`` entries, its loop unrolled: each pool's
    post-state and whether the call is accepted (refused: what the first failing
    entry's refusal leaves)."""
    lps, ok, left = prefix(wd, n)
    post = finish2(wd, lps)
    return [merge(cfg.dom, ok, post[p], left[p]) for p, cfg in enumerate(wd.cfgs)], ok


# -- the obligations ---------------------------------------------------------------------


@dataclass
class Obligation:
    name: str  # one of NAMES
    case: str  # "<op>@<c> <part>: loop init/step/exit"
    hyp: list[z3.BoolRef]
    goal: z3.BoolRef
    wd: World2
    j: Any = None
    """The loop step's entry (None: not a step)."""
    loops: list[Loop] | None = None
    """The loop's states the hypothesis speaks of (a step's: before the entry)."""
    ok: Any = None
    """Whether every entry so far passed (the loops that carry it)."""
    left: list[State] | None = None
    """What a refusal so far leaves (the loops that carry it)."""
    ghosts: dict[int, Any] | None = None


def _base(wd: World2) -> list[Any]:
    call = wd.call
    a = call.a
    return [
        *(cfg.dom.N >= 1 for cfg in wd.cfgs),
        call.alive[call.c],
        a.kind == OPK[call.op],
        a.m >= 0,
        a.km >= 0,
        a.w >= 0,
        a.w < wd.cfgs[0].W,
    ]


def _fresh_loops(wd: World2, tag: str) -> list[Loop]:
    return [
        Loop(fresh_state(cfg, f"{tag}.p{p}", globals_=False), z3.Int(f"{tag}.f{p}"), wd.s[p].L)
        for p, cfg in enumerate(wd.cfgs)
    ]


def _ex(lo: Any, hi: Any, f: Any) -> Any:
    k = z3.Int("ex_k")
    return z3.Exists([k], z3.And(k >= lo, k < hi, f(k)))


def _all(lo: Any, hi: Any, f: Any) -> Any:
    k = z3.Int("all_k")
    return z3.ForAll([k], z3.Implies(z3.And(k >= lo, k < hi), f(k)))


def _cases(
    wd: World2, name: str, part: str, triples: list[tuple[str, list[Any], Any, dict[str, Any]]]
) -> list[Obligation]:
    tag = f"{wd.call.op}@{wd.call.c}" + (f" {part}" if part else "")
    out = []
    for case, hyp, goal, extra in triples:
        h = [*hyp]
        if "hyp-false" in wd.call.bugs:  # a test's seeded vacuity
            h.append(z3.BoolVal(False))
        out.append(Obligation(name, f"{tag}: {case}", h, goal, wd, **extra))
    return out


def accept_parts(
    wd: World2, gh: dict[int, Any], ok: Any, lps: list[Loop], j: Any
) -> dict[str, Any]:
    """FREE-FORWARD's accept-iff loop invariant after the first ``j`` entries, by part:
    accepted so far, every entry so far is valid, no live pool's block is counted beyond
    its ref_cnt, and each live pool's ref_cnt is its count less its listings so far;
    refused so far, some entry so far is invalid or some live pool's block over-freed;
    and every count is >= 0."""
    call = wd.call
    out = {"valid": z3.Implies(ok, _all(0, j, lambda k: valid(wd, k)))}
    for p, cfg in enumerate(wd.cfgs):
        d, s, g, u = cfg.dom, wd.s[p], gh[p], lps[p].s

        def counted(b: Any, g: Any = g) -> Any:
            return g.cnt(b, j) >= 0

        def within(b: Any, g: Any = g, s: State = s, d: Any = d) -> Any:
            return z3.Or(g.cnt(b, j) == 0, g.cnt(b, j) <= d.sel(s.ref, b))

        def tracked(b: Any, g: Any = g, s: State = s, u: State = u, d: Any = d) -> Any:
            return d.sel(u.ref, b) == d.sel(s.ref, b) - g.cnt(b, j)

        live = z3.And(ok, call.alive[p])
        out[f"counts {p}"] = d.forall(1, d.N, counted)
        out[f"no over-free {p}"] = z3.Implies(live, d.forall(1, d.N, within))
        out[f"ref_cnt {p}"] = z3.Implies(live, d.forall(1, d.N, tracked))
    out["refused"] = z3.Implies(z3.Not(ok), z3.Or(_invalid(wd, j), _over(wd, gh, j)))
    return out


def _invalid(wd: World2, j: Any) -> Any:
    """Some entry among the first j is no block of its pool."""
    return _ex(0, j, lambda k: z3.Not(valid(wd, k)))


def _over(wd: World2, gh: dict[int, Any], j: Any) -> Any:
    """Some live pool's block is named more often among the first j entries than its
    ref_cnt."""
    out = []
    for p, cfg in enumerate(wd.cfgs):
        d, g, s = cfg.dom, gh[p], wd.s[p]

        def beyond(b: Any, g: Any = g, s: State = s, d: Any = d) -> Any:
            return z3.And(g.cnt(b, j) >= 1, g.cnt(b, j) > d.sel(s.ref, b))

        out.append(z3.And(wd.call.alive[p], d.exists(1, d.N, beyond)))
    return z3.Or(out)


def accept_obligations(wd: World2) -> list[Obligation]:
    """FREE-FORWARD's accept-iff part (see the module docstring), no invariant of the
    pools assumed. The loop step is asked part by part (:func:`accept_parts`), each from
    the whole invariant; the exit gives the rule in the spec's terms: accepted iff no
    entry is invalid and no live pool's entries over-free a block."""
    call, a = wd.call, wd.call.a
    gh = {
        p: _ghosts(cfg, "FreeBlocks", wd.s[p], own(call, p), tag=str(p))
        for p, cfg in enumerate(wd.cfgs)
    }
    recs = [r for g in gh.values() for r in g.recs[:2]]  # (Cnt's recurrence only)
    base = [*_base(wd), *recs]
    lp0 = [Loop(s, iv(0), s.L) for s in wd.s]
    t = z3.BoolVal(True)
    triples: list[tuple[str, list[Any], Any, dict[str, Any]]] = []
    extra0 = {"loops": lp0, "ok": t, "ghosts": gh}
    init = accept_parts(wd, gh, t, lp0, iv(0))
    triples.append(("loop init", base, z3.And(list(init.values())), extra0))
    lps = _fresh_loops(wd, "sj")
    j, okj = z3.Int("j"), z3.Bool("okj")
    hyp = [*base, j >= 0, j < a.m, domain(wd, j), *accept_parts(wd, gh, okj, lps, j).values()]
    nxt = accept_parts(wd, gh, z3.And(okj, guard2(wd, lps, j)), step(wd, lps, j), j + 1)
    extra = {"j": j, "loops": lps, "ok": okj, "ghosts": gh}
    for part, goal in nxt.items():
        if part != "refused":
            triples.append((f"loop step, {part}", hyp, goal, extra))
    # "refused" in two cases: refused before entry j, or at it
    g = guard2(wd, lps, j)
    bad = z3.Or(_invalid(wd, j + 1), _over(wd, gh, j + 1))
    triples.append(("loop step, refused before", hyp, z3.Implies(z3.Not(okj), bad), extra))
    here = z3.Implies(z3.And(okj, z3.Not(g)), bad)
    triples.append(("loop step, refused here", hyp, here, extra))
    lpm, okm = _fresh_loops(wd, "sm"), z3.Bool("okm")
    at_m = accept_parts(wd, gh, okm, lpm, a.m)
    spec = z3.And(z3.Not(_invalid(wd, a.m)), z3.Not(_over(wd, gh, a.m)))
    extra_m = {"loops": lpm, "ok": okm, "ghosts": gh}
    triples.append(("loop exit", [*base, *at_m.values()], okm == spec, extra_m))
    return _cases(wd, "FREE-FORWARD", "accept", triples)


def pool_obligations(wd: World2, p: int) -> list[Obligation]:
    """FREE-FORWARD on live pool p: refs, ORD-RELEASE of p's own entries, other fields
    unchanged (part ``pool p``), and p's PERM, INV-REF and FRONT count kept by the loop
    (part ``pool p S``)."""
    call, a = wd.call, wd.call.a
    cfg, s = wd.cfgs[p], wd.s[p]
    d = cfg.dom
    ap = own(call, p)
    g = _ghosts(cfg, "FreeBlocks", s, ap, tag=str(p))
    S = props.strong(cfg, s)

    def sparts(u: Loop) -> list[Any]:
        St = props.strong(cfg, u.s)
        return [St["PERM"], St["INV-REF"], *loop_facts(cfg, "FreeBlocks", u)]

    def rule(u: Loop, j: Any) -> list[Any]:
        return [
            *_shape(cfg, "FreeBlocks", s, ap, g, u, j),
            *_tracks(cfg, "FreeBlocks", s, g, u, j),
            _fields_eq(d, s, u.s, _UNCHANGED_BY_FREE),
        ]

    base = [*_base(wd), call.alive[p], *g.recs, S["PERM"], S["INV-REF"]]
    lp0 = [Loop(x, iv(0), x.L) for x in wd.s]
    lps = _fresh_loops(wd, "sj")
    j = z3.Int("j")
    u = lps[p]
    hyp = [*base, j >= 0, j < a.m, domain(wd, j), valid(wd, j)]
    hyp.append(guard(cfg, "FreeBlocks", u, z3.Select(mapped(call, p).E, j)))
    nxt = step(wd, lps, j)[p]
    # (the S part: entry j as pool p reads it, a constant xp: symlists' one-pool step;
    # with the entry's term itself in the body z3 took 0.5 to 21 s, seed and pool apart)
    xp = z3.Int(f"x{p}")
    one = replace(mapped(call, p), E=z3.K(I, xp))
    snext = body(cfg, "FreeBlocks", u, one, j)
    sdef = [xp == z3.Select(mapped(call, p).E, j), xp >= 0, xp <= d.N]
    sdef.append(guard(cfg, "FreeBlocks", u, xp))
    # (the S part: no ghost, as symlists' loop step for PERM: PERM and INV-REF only)
    sbase = [*_base(wd), call.alive[p], S["PERM"], S["INV-REF"]]
    shyp = [*sbase, j >= 0, j < a.m, *sdef]
    lpm = _fresh_loops(wd, "sm")
    um = lpm[p]
    refs = d.forall(1, d.N, lambda b: z3.Select(um.s.ref, b) == z3.Select(s.ref, b) - g.cnt(b, a.m))
    post = finish2(wd, lpm)[p]
    rule_post = z3.And(
        refs,
        *_shape(cfg, "FreeBlocks", s, ap, g, Loop(post, um.f, um.L0), a.m),
        _fields_eq(d, s, post, _UNCHANGED_BY_FREE),
    )
    ghosts = {p: g}
    out = _cases(
        wd,
        "FREE-FORWARD",
        f"pool {p}",
        [
            ("loop init", base, z3.And(rule(lp0[p], iv(0))), {"loops": lp0, "ghosts": ghosts}),
            (
                "loop step",
                [*hyp, *sparts(u), *rule(u, j)],
                z3.And(rule(nxt, j + 1)),
                {"j": j, "loops": lps, "ghosts": ghosts},
            ),
            (
                "loop exit",
                [*base, *sparts(um), *rule(um, a.m)],
                rule_post,
                {"loops": lpm, "ghosts": ghosts},
            ),
        ],
    )
    out += _cases(
        wd,
        "FREE-FORWARD",
        f"pool {p} S",
        [
            ("loop init", sbase, z3.And(sparts(lp0[p])), {"loops": lp0}),
            ("loop step", [*shyp, *sparts(u)], z3.And(sparts(snext)), {"j": j, "loops": lps}),
        ],
    )
    return out


def drop_obligations(wd: World2) -> list[Obligation]:
    """DROP-GONE for free_blocks: a gone pool's state is its pre-state throughout."""
    call, a = wd.call, wd.call.a

    def inv(lps: list[Loop] | list[State]) -> Any:
        sts = [x.s if isinstance(x, Loop) else x for x in lps]
        return z3.And(
            [
                z3.Implies(z3.Not(call.alive[p]), state_eq(cfg.dom, sts[p], wd.s[p]))
                for p, cfg in enumerate(wd.cfgs)
            ]
        )

    base = _base(wd)
    lp0 = [Loop(s, iv(0), s.L) for s in wd.s]
    lps = _fresh_loops(wd, "sj")
    j = z3.Int("j")
    hyp = [*base, j >= 0, j < a.m, domain(wd, j), inv(lps)]
    lpm = _fresh_loops(wd, "sm")
    return _cases(
        wd,
        "DROP-GONE",
        "",
        [
            ("loop init", base, inv(lp0), {"loops": lp0}),
            ("loop step", hyp, inv(step(wd, lps, j)), {"j": j, "loops": lps}),
            ("loop exit", [*base, inv(lpm)], inv(finish2(wd, lpm)), {"loops": lpm}),
        ],
    )


def frame_obligations(wd: World2) -> list[Obligation]:
    """POOL-FRAME for a list-taking call: a refusal leaves both pools' pre-states; a call
    but free_blocks leaves the other pool's, and accepted names no other pool's
    non-null block."""
    call, a, c = wd.call, wd.call.a, wd.call.c
    other = 1 - c
    free = call.op == "FreeBlocks"

    def owned(k: Any) -> Any:
        return z3.Or(_E(call, k) == 0, _EP(call, k) == c)

    def inv(ok: Any, left: list[State], sts: list[State], j: Any) -> Any:
        out = [
            z3.Implies(z3.Not(ok), state_eq(cfg.dom, left[p], wd.s[p]))
            for p, cfg in enumerate(wd.cfgs)
        ]
        if not free:
            out.append(z3.Implies(ok, _all(0, j, owned)))
            out.append(state_eq(wd.cfgs[other].dom, sts[other], wd.s[other]))
        return z3.And(out)

    base = _base(wd)
    lp0 = [Loop(s, iv(0), s.L) for s in wd.s]
    ok0 = opening(wd)
    init = inv(ok0, list(wd.s), list(wd.s), iv(0))
    lps = _fresh_loops(wd, "sj")
    j, okj = z3.Int("j"), z3.Bool("okj")
    left = [fresh_state(cfg, f"vj.p{p}", globals_=False) for p, cfg in enumerate(wd.cfgs)]
    g = guard2(wd, lps, j)
    here = z3.And(okj, z3.Not(g))
    left2 = [
        merge(cfg.dom, here, refusal_left2(wd, p, lps[p].s, j), left[p])
        for p, cfg in enumerate(wd.cfgs)
    ]
    nxt = step(wd, lps, j)
    hyp = [*base, j >= 0, j < a.m, domain(wd, j), inv(okj, left, [x.s for x in lps], j)]
    goal = inv(z3.And(okj, g), left2, [x.s for x in nxt], j + 1)
    lpm, okm = _fresh_loops(wd, "sm"), z3.Bool("okm")
    leftm = [fresh_state(cfg, f"vm.p{p}", globals_=False) for p, cfg in enumerate(wd.cfgs)]
    fin = finish2(wd, lpm)
    post = [merge(cfg.dom, okm, fin[p], leftm[p]) for p, cfg in enumerate(wd.cfgs)]
    goals = [
        z3.Implies(z3.Not(okm), state_eq(cfg.dom, post[p], wd.s[p]))
        for p, cfg in enumerate(wd.cfgs)
    ]
    if not free:
        goals.append(state_eq(wd.cfgs[other].dom, post[other], wd.s[other]))
        goals.append(z3.Implies(okm, _all(0, a.m, owned)))
    exit_hyp = [*base, inv(okm, leftm, [x.s for x in lpm], a.m)]
    return _cases(
        wd,
        "POOL-FRAME",
        "",
        [
            ("loop init", base, init, {"loops": lp0, "ok": ok0}),
            ("loop step", hyp, goal, {"j": j, "loops": lps, "ok": okj, "left": left}),
            ("loop exit", exit_hyp, z3.And(goals), {"loops": lpm, "ok": okm, "left": leftm}),
        ],
    )


def obligations(
    names: tuple[str, ...] = NAMES,
    bugs: frozenset[str] = frozenset(),
    ops: tuple[str, ...] = OPS,
    callers: tuple[int, ...] = (0, 1),
) -> list[Obligation]:
    """Every obligation of ``names`` (loop init, step and exit of each case), on the
    loops with ``bugs`` seeded (a second solver's export: the queries :func:`prove`
    asks)."""
    out: list[Obligation] = []
    for op in ops:
        for c in callers:
            if op == "FreeBlocks" and "FREE-FORWARD" in names:
                out += accept_obligations(setting(op, c, bugs))
                for p in range(POOLS):
                    out += pool_obligations(setting(op, c, bugs), p)
            if op == "FreeBlocks" and "DROP-GONE" in names:
                out += drop_obligations(setting(op, c, bugs))
            if "POOL-FRAME" in names:
                out += frame_obligations(setting(op, c, bugs))
    return out


SEEDS = 3
"""A proof still unknown is asked again at the next z3 seed, up to this many."""


def prove(
    obs: list[Obligation],
    timeout_ms: int = 60000,
    extra: tuple[Any, ...] = (),
    label: str = "two pools, list loops",
) -> list[Goal]:
    """Each obligation in a context of its own (``isolated_check``), an unknown asked
    again at the next seed (up to :data:`SEEDS`, each with ``timeout_ms``:
    :func:`model.robust_check`); a goal's ``ctx`` is its obligation. Recorded
    (``model.named``) as "``label``: name / case" (a seeded bug's: "mutant: ...", which a
    second solver's row leaves out: ``cvc5more.groups``)."""
    out = []
    for ob in obs:
        with named(f"{label}: {ob.name} / {ob.case}"):
            status, total, m = robust_check(
                [*ob.hyp, *extra], ob.goal, timeout_ms, SEEDS, cap_ms=timeout_ms
            )
        out.append(Goal(ob.name, ob.case, status, total, m, ob))
    return out


# -- rows ----------------------------------------------------------------------------------------


def rows(timeout_ms: int = 60000, names: tuple[str, ...] = NAMES) -> list[dict[str, Any]]:
    """One row per obligation: every case's loop init, step and exit proved."""

    def given(name: str) -> str:
        return ", given pool p's PERM and INV-REF" if name == "FREE-FORWARD" else ""

    return name_rows(
        prove(obligations(names), timeout_ms),
        names,
        lambda name: f"T => {name} (two pools, list calls as loops)",
        lambda name, mine: f"{BOUNDS}{given(name)} ({len(mine)} loop cases)",
        most=3,
    )


# -- the seeded bugs: refuted for every list length, proved with lists <= 2, and replayed ------

PROBE_MS = 3000
"""z3's limit on a bug's loop step asked as it is, before the pinned searches (the
proved steps take well under a second)."""
SHORT_MS = 10000
"""z3's limit (per seed) on a bug's loop step with lists of <= 2 entries (under 2 s)."""
PIN_MS = 5000
"""z3's limit on a bug's query on one pinned world (z3 chooses the call: a refutation
takes well under a second; an unknown moves on to the next world)."""

REFUTE_NS: tuple[tuple[int, int], ...] = ((3, 3), (2, 3), (3, 2), (4, 4))
"""The pool sizes a refutation is looked for at, one after the other (z3 finds a model of
the quantified hypotheses far sooner at fixed sizes than with them only bounded)."""


def _sizes(wd: World2, ns: tuple[int, int]) -> list[Any]:
    return [n == cfg.dom.N for cfg, n in zip(wd.cfgs, ns, strict=True)]


def unrolled_goal(wd: World2, name: str, n: int = UNROLL) -> tuple[list[Any], Any]:
    """The call on at most ``n`` entries (the loop unrolled) from a world whose pools
    satisfy S, and ``name`` of it in the spec's terms (counts as sums over the entries):
    (hypotheses, goal)."""
    call, a = wd.call, wd.call.a
    post, ok = unrolled(wd, n)
    hyp = [*_base(wd), a.m <= n, *(domain(wd, iv(k)) for k in range(n))]
    hyp += [v for p, cfg in enumerate(wd.cfgs) for v in props.strong(cfg, wd.s[p]).values()]

    def live(k: int) -> Any:
        return iv(k) < a.m

    def cnt(p: int, b: Any) -> Any:
        return z3.Sum(
            [
                z3.If(z3.And(live(k), _EP(call, k) == p, _E(call, k) == b), iv(1), iv(0))
                for k in range(n)
            ]
        )

    unchanged = [
        z3.Implies(z3.Not(ok), state_eq(cfg.dom, post[p], wd.s[p])) for p, cfg in enumerate(wd.cfgs)
    ]
    if name == "FREE-FORWARD":
        invalid = z3.Or([z3.And(live(k), z3.Not(valid(wd, iv(k)))) for k in range(n)])
        over = z3.Or(
            [
                z3.And(
                    live(k),
                    _EP(call, k) == p,
                    call.alive[p],
                    _E(call, k) != 0,
                    cnt(p, _E(call, k)) > z3.Select(wd.s[p].ref, _E(call, k)),
                )
                for k in range(n)
                for p in range(POOLS)
            ]
        )
        return hyp, ok == z3.And(z3.Not(invalid), z3.Not(over))
    if name == "DROP-GONE":
        gone = [
            z3.Implies(z3.Not(call.alive[p]), state_eq(cfg.dom, post[p], wd.s[p]))
            for p, cfg in enumerate(wd.cfgs)
        ]
        return hyp, z3.And(gone)
    if name == "POOL-FRAME":
        goal = list(unchanged)
        if call.op != "FreeBlocks":
            other = 1 - call.c
            goal.append(state_eq(wd.cfgs[other].dom, post[other], wd.s[other]))
            owned = [
                z3.Implies(live(k), z3.Or(_E(call, k) == 0, _EP(call, k) == call.c))
                for k in range(n)
            ]
            goal.append(z3.Implies(ok, z3.And(owned)))
        return hyp, z3.And(goal)
    raise ValueError(f"not an obligation of the two-pool list loops: {name}")


def decode(m: z3.ModelRef, wd: World2, states: list[State] | None = None) -> World:
    """The spec world of a model: its pre-world, or ``states`` (both pools) in it."""
    from .trace import decode_state

    sts = states if states is not None else wd.s
    pools = []
    for p, cfg in enumerate(wd.cfgs):
        n = to_int(m.eval(cfg.dom.N, model_completion=True))
        caching = z3.is_true(m.eval(cfg.caching, model_completion=True))
        events = z3.is_true(m.eval(cfg.events, model_completion=True))
        pools.append(
            decode_state(m, sts[p], n, cfg.K, cfg.W, caching, events, z3.Select, ranked=False)
        )
    alive = [z3.is_true(m.eval(x, model_completion=True)) for x in wd.call.alive]
    return World(pools, alive)


def decode_call(m: z3.ModelRef, wd: World2) -> Op:
    """The spec call of a model: its entries ``(EP[k], E[k])`` for k < m, on pool c."""
    from .trace import ConcreteArgs
    from .twopool import ConcreteArgs2, to_op2

    call, a = wd.call, wd.call.a

    def ev(x: Any) -> int:
        return to_int(m.eval(x, model_completion=True))

    n, km = ev(a.m), ev(a.km)
    e = tuple(ev(_E(call, iv(k))) for k in range(n))
    ep = tuple(ev(_EP(call, iv(k))) for k in range(n))
    ks = tuple(ev(z3.Select(a.KS, iv(k))) for k in range(km))
    ef = z3.is_true(m.eval(a.ef, model_completion=True))
    ca = ConcreteArgs(OPK[call.op], 0, n, e, ef, ev(a.w), km, ks, 1, 0)
    return to_op2(ConcreteArgs2(ca, call.c, ep, 0))


def _view(world: World, refused: bool) -> tuple[Any, ...]:
    """What a step is compared on: refused or not, each pool's state (its event log left
    out: the unbounded reading counts it), which pools are live."""
    from .differential import comparable

    return (refused, [comparable(ps)[:-1] for ps in world.pools], list(world.alive))


def confirm(m: z3.ModelRef, good: World2, bad: World2, n: int = UNROLL) -> tuple[list[str], str]:
    """A refutation's model (of ``bad``'s unrolled query) replayed: the pre-world decoded
    (it must pass ``check_pool``), the call run on the spec. The correct unrolled loop
    (``good``, the same variables) must agree with the spec there (acceptance, states,
    liveness), and the buggy one must not."""
    pre = decode(m, good)
    call = decode_call(m, good)
    trace = world_trace(pre, call)
    broken = world_violations(pre)
    if broken:
        return trace, f"decoded world already violates: {broken[0]}"
    spec = pre.copy()
    out = spec.apply(call)
    want = _view(spec, out.error is not None)
    gpost, gok = unrolled(good, n)
    mine = _view(decode(m, good, gpost), not z3.is_true(m.eval(gok, model_completion=True)))
    if mine != want:
        return trace, "NOT confirmed: the correct loop and the spec disagree on this call"
    bpost, bok = unrolled(bad, n)
    refused = not z3.is_true(m.eval(bok, model_completion=True))
    after = decode(m, bad, bpost)
    got = _view(after, refused)
    if got == want:
        return trace, "NOT confirmed by replay"
    said = "refused" if refused else "accepted"
    return trace, (
        f"confirmed: the buggy loop has it {said}, the spec "
        + (f"refuses it ({out.error})" if out.error else "accepts it")
        + "; after it "
        + " | ".join(ps.describe() for ps in after.pools)
        + ", the spec's "
        + " | ".join(ps.describe() for ps in spec.pools)
    )


def mutant_row(bug: str, timeout_ms: int = 30000) -> dict[str, Any]:
    """``bug`` must (1) fail a loop step of its obligation, for every list length, at one
    of :data:`REFUTE_NS`; (2) leave those steps proved with lists of <= 2 entries; (3)
    give, with the loop unrolled to :data:`UNROLL` entries from a world whose pools
    satisfy S, a counterexample that the spec confirms (:func:`confirm`)."""
    name, op, _ = BUGS[bug]
    bugs = frozenset([bug])
    row = blank_mutant_row(
        f"T => {name} (two pools, list calls as loops) [{bug}]",
        (name,),
        f"{BOUNDS} (a counterexample unrolled to {UNROLL} entries, N_0, N_1 <= 4)",
    )
    worlds = reached_worlds()
    steps = [o for o in obligations((name,), bugs, (op,)) if "loop step" in o.case]
    notes: list[str] = []
    hit = None
    for ob in steps:
        # as it is (a step proved is not asked again); on a world the spec reaches, the
        # loop's states and ghosts its own after 2 of 3 entries (:func:`_pins`: z3
        # chooses the call); then at each of REFUTE_NS
        def wheres(ob: Obligation = ob) -> Iterator[tuple[list[Any], int]]:
            yield [], min(timeout_ms, PROBE_MS)
            pins = _pins(ob)
            for w in worlds:
                yield [*pin_world(ob.wd, w), *pins], min(timeout_ms, PIN_MS)
            for ns in REFUTE_NS:
                yield _sizes(ob.wd, ns), min(timeout_ms, PIN_MS)

        for at, limit in wheres():
            with named(f"mutant: {bug}: two pools, list loops: {ob.name} / {ob.case}"):
                status, dt, m = isolated_check([*ob.hyp, *at], ob.goal, limit)
            row["seconds"] += dt
            if status == "refuted" and m is not None:
                hit = (ob, m)
                break
            if status == "proved" and not at:
                break
        if hit:
            break
    if hit is None:
        row["replay"] = "no loop step refuted"
        return row
    ob, m = hit
    jv = m.eval(ob.j, model_completion=True) if ob.j is not None else "?"
    notes.append(f"loop step refuted ({ob.case}, entry j={jv})")
    bounded = [replace(o, hyp=[*o.hyp, o.wd.call.a.m <= LATE]) for o in steps]
    short = prove(bounded, min(timeout_ms, SHORT_MS), label=f"mutant: {bug}: two pools, list loops")
    row["seconds"] += sum(g.seconds for g in short)
    if any(g.status != "proved" for g in short):
        row["status"] = "NOT-confirmed"
        row["replay"] = "; ".join([*notes, "with lists <= 2 the steps are not all proved"])
        return row
    notes.append("with lists <= 2 every step is proved (twopooln's lists cannot see it)")
    for c in (0, 1):
        good, bad = setting(op, c), setting(op, c, bugs)
        hyp, goal = unrolled_goal(bad, name)
        # on worlds the spec reaches first (z3 chooses the call: far quicker than a
        # search over the worlds too), then at each of REFUTE_NS
        unrolled_wheres = (
            *((pin_world(bad, w), min(timeout_ms, PIN_MS)) for w in worlds),
            *(([*_sizes(bad, ns), *_small(bad)], timeout_ms) for ns in REFUTE_NS),
        )
        for at, limit in unrolled_wheres:
            with named(f"mutant: two pools, list loops: {name} [{bug}] unrolled <= {UNROLL}"):
                status, dt, m = isolated_check([*hyp, *at], goal, limit)
            row["seconds"] += dt
            if status != "refuted" or m is None:
                continue
            row["trace"], verdict = confirm(m, good, bad)
            row["replay"] = "; ".join([*notes, f"unrolled to {UNROLL} entries: {verdict}"])
            if verdict.startswith("confirmed"):
                row["status"] = "expected-refuted"
                return row
            row["status"] = "NOT-confirmed"
    if not row["replay"]:
        row["replay"] = "; ".join([*notes, f"no counterexample with <= {UNROLL} entries"])
    return row


def _small(wd: World2, most: int = 3) -> list[Any]:
    """ref_cnts of at most ``most`` on blocks 0..4 (a counterexample's or a witness's
    world reads better; still a model of what it is added to)."""
    return [z3.Select(x.ref, iv(b)) <= most for x in wd.s for b in range(5)]


# -- every hypothesis has a witness ----------------------------------------------------------


def _pins(ob: Obligation) -> list[Any]:
    """A step's (or an exit's) loop states pinned to the loop's own after j = 2 (m = 3)
    entries from the pre-world, the ghosts to their closed forms on those 3 entries."""
    wd = ob.wd
    a = wd.call.a
    out: list[Any] = [a.m == UNROLL]
    for p, g in (ob.ghosts or {}).items():
        closed = _ghosts(wd.cfgs[p], "FreeBlocks", wd.s[p], own(wd.call, p), upto=UNROLL)
        out += [g.Cnt == closed.Cnt, *(g.pre[c] == closed.pre[c] for c in g.pre)]
    if ob.case.endswith("loop init") or ob.loops is None:
        return out
    n = LATE if ob.j is not None else UNROLL
    if ob.j is not None:
        out.append(ob.j == LATE)
    lps, ok, left = prefix(wd, n)
    for p, cfg in enumerate(wd.cfgs):
        out += [state_eq(cfg.dom, ob.loops[p].s, lps[p].s), ob.loops[p].f == lps[p].f]
        if ob.left is not None:
            out.append(state_eq(cfg.dom, ob.left[p], left[p]))
    if ob.ok is not None:
        out.append(ob.ok == ok)
    return out


@cache
def _reached() -> tuple[World, ...]:
    from .twopooln import witness_worlds

    return tuple(witness_worlds())


def reached_worlds() -> list[World]:
    """``twopooln.witness_worlds()``: worlds the spec reaches (drawn once a process, by
    random runs of the spec; copies, so that a caller's replay changes none of them)."""
    return [w.copy() for w in _reached()]


def pin_world(wd: World2, world: World) -> list[Any]:
    """Constraints giving the pre-world the value ``world`` (each pool's state as
    ``differential.encode`` encodes it on the unbounded reading, its size, flags and
    liveness), as ``twopooln.pin`` does."""
    from .differential import encode
    from .model import fresh_args
    from .trace import ConcreteArgs
    from .twopool import _PoolView

    out: list[Any] = []
    dummy = ConcreteArgs(0, 0, 0, (0,), False, 0, 0, (1,), 1, 0)
    for p, cfg in enumerate(wd.cfgs):
        ps = world.pools[p]
        view = _PoolView(cfg, wd.s[p], fresh_args(cfg, "unused"), "unbounded")
        subst = encode(view, ps, dummy)  # type: ignore[arg-type]
        out += [var == val for var, val in subst.pairs if not str(var).startswith("unused.")]
        out += [ps.num_blocks == cfg.dom.N, wd.call.alive[p] == world.alive[p]]
    return out


def witness_row(
    timeout_ms: int = 10000, names: tuple[str, ...] = NAMES, worlds: list[World] | None = None
) -> dict[str, Any]:
    """Every distinct hypothesis has a model whose pre-world is one the spec reaches
    (``twopooln.witness_worlds``, pinned by :func:`pin_world`; z3 chooses the call):
    preferably with a list of 3 entries and, for a step or an exit, its loop states, what
    a refusal leaves and the ghosts those of the loop itself after 2 (a step) or 3
    entries (:func:`_pins`). Decoded, the pre-world passes ``check_pool``, and the call
    replayed on the spec leaves a world that passes it too."""
    pool = reached_worlds() if worlds is None else worlds
    seen: set[tuple[int, ...]] = set()
    problems: list[str] = []
    seconds, cases, pinned = 0.0, 0, 0
    for ob in obligations(names):
        key = tuple(sorted(h.get_id() for h in ob.hyp))
        if key in seen:
            continue
        seen.add(key)
        cases += 1
        wd = ob.wd
        pins = _pins(ob)
        status, m = "unknown", None
        for world in pool:
            at = pin_world(wd, world)
            with named(f"two pools, list loops: witness {ob.name} / {ob.case}"):
                status, dt, m = hypothesis_model(ob.hyp, [[*at, *pins], at], timeout_ms, seeds=1)
            seconds += dt
            if status == "sat":
                break
        where = f"{ob.name} / {ob.case}"
        if status != "sat" or m is None:
            problems.append(f"{where}: hypothesis {status} on each of {len(pool)} worlds")
            continue
        if all(z3.is_true(m.eval(x, model_completion=True)) for x in pins):
            pinned += 1
        pre = decode(m, wd)
        broken = world_violations(pre)
        if broken:
            problems.append(f"{where}: decoded world breaks {broken[0]}")
            continue
        call = decode_call(m, wd)
        pre.apply(call)
        broken = world_violations(pre)
        if broken:
            problems.append(f"{where}: {call!r} on the spec breaks {broken[0]}")
    return dict(
        obligation="hypotheses satisfiable, two pools, list calls as loops",
        kind="witness",
        technique="z3 induction",
        invariants=(),
        bounds=f"two pools, every list length, every N: {cases - len(problems)}/{cases} "
        f"distinct hypotheses, a model on a world the spec reaches ({pinned} with "
        f"{UNROLL} entries and the loop's own states), decoded, the call replayed on the "
        "spec",
        status="witnessed" if cases and not problems else "NOT-witnessed",
        seconds=seconds,
        replay="; ".join(problems[:3]),
    )


def all_rows(timeout_ms: int = 60000, names: tuple[str, ...] = NAMES) -> list[dict[str, Any]]:
    """The part: each obligation proved, the loops' agreement with twopool's encoding,
    the witnesses of their hypotheses, each of their :data:`BUGS` refuted."""
    return [
        *rows(timeout_ms, names),
        agreement_row(timeout_ms),
        witness_row(names=names),
        *(mutant_row(bug, timeout_ms // 2) for bug in BUGS if BUGS[bug][0] in names),
    ]


# -- the loops against twopool's encoding ----------------------------------------------------

AGREE_N = 2
"""The list length the loops are compared with ``twopool.transition2`` at."""


def agreement_goals(
    n: int = AGREE_N,
    timeout_ms: int = 60000,
    bugs: frozenset[str] = frozenset(),
    ops: tuple[str, ...] = OPS,
    callers: tuple[int, ...] = (0, 1),
    sizes: tuple[int, int] | None = None,
) -> list[Goal]:
    """The loop, unrolled to ``n`` entries, and ``twopool.transition2`` on lists of at
    most ``n`` entries (``build_every_n(M=n)``: N_0, N_1 symbolic, the same pre-world
    variables) agree from every world whose pools satisfy S: the same calls are
    refused, and an accepted call leaves each pool with the same ref_cnts, keys, index,
    pending watchers, ghost counters, event view and count, and the same queue ``q[0..L)``.
    This ties the loops' guards (the checks as the loop meets them) to twopool's checks
    (as the spec states them: entry errors in list order, then the counts). ``bugs`` go
    into the loop only (a test's way to show the check can fail; ``sizes`` fixes N_0,
    N_1 for its counterexample). At n = 3 free_blocks' took 18 CPU s (48 to 59 s of
    solver wall time under load), at n = 2 under 2: n = 2, the lists twopooln proves."""
    from .twopool import OPK2, _case, build_every_n

    st = build_every_n(M=n)
    out: list[Goal] = []
    for op in ops:
        for c in callers:
            wd = setting(op, c, bugs)
            a, a2 = wd.call.a, st.a2
            post, ok = unrolled(wd, n)
            same = [
                a2.a.kind == OPK2[op],
                a2.c == c,
                a2.a.m == a.m,
                a2.a.km == a.km,
                a2.a.ef == a.ef,
                a2.a.w == a.w,
                *(a2.a.e[j] == _E(wd.call, iv(j)) for j in range(n)),
                *(a2.ep[j] == _EP(wd.call, iv(j)) for j in range(n)),
                *(a2.a.ks[j] == z3.Select(a.KS, iv(j)) for j in range(n)),
                *(x == y for x, y in zip(st.w.alive, wd.call.alive, strict=True)),
            ]
            hyp = [*same, _case(st, op, c, st.domain), *_base(wd), a.m <= n, a.km <= n]
            hyp += [domain(wd, iv(j)) for j in range(n)]
            hyp += [v for p, cfg in enumerate(wd.cfgs) for v in props.strong(cfg, wd.s[p]).values()]
            hyp += _sizes(wd, sizes) if sizes is not None else []
            fields_ = []
            for p, cfg in enumerate(wd.cfgs):
                fields_ += same_state(cfg.dom, post[p], st.t.s[p])
            # (asked conjunct by conjunct: as one query free_blocks' was unknown at 30 s)
            parts = [ok == (st.r.err == 0), *(z3.Implies(ok, f) for f in fields_)]
            total, status, m = 0.0, "proved", None
            for part in parts:
                with named(f"two pools, list loops == twopool.transition2 / {op}@{c} / <= {n}"):
                    status, dt, m = isolated_check(hyp, _case(st, op, c, part), timeout_ms)
                total += dt
                if status != "proved":
                    break
            out.append(Goal("agreement", f"{op}@{c}", status, total, m))
    return out


def agreement_row(timeout_ms: int = 60000, n: int = AGREE_N) -> dict[str, Any]:
    gs = agreement_goals(n, timeout_ms)
    bad = [g for g in gs if g.status != "proved"]
    return dict(
        obligation=f"two-pool list loops == twopool.transition2 (lists <= {n})",
        kind="differential",
        technique="z3 induction",
        invariants=(),
        bounds=f"two pools, every N, lists <= {n}: refusals and post-states agree, from "
        "every world whose pools satisfy S",
        status="agree"
        if not bad
        else ("disagree" if any(g.status == "refuted" for g in bad) else "unknown"),
        seconds=sum(g.seconds for g in gs),
        replay="; ".join(f"{g.case}: {g.status}" for g in bad),
    )
