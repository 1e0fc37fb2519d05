"""Two pools for every N: the obligations ``twopool.every_n_rows`` leaves at fixed N.

:mod:`kvpool.proofs.twopool` proves, for two pools at fixed (N_0, N_1) (``make verify``:
2+2, 3+3, 4+4), each pool's every INV-* and the rules of ``spec/rules.py``'s
:data:`~kvpool.spec.rules.POOL_RULES`; for every N_0, N_1 (``make proofs-deep``,
``twopool.every_n_rows``) only each part of the strengthened invariant ``props.strong``
of each pool. What that every-N part does not prove, listed in :data:`GAPS`:

* INV-CONSERVE and INV-WATCH in the spec's own words, their counts: every-N for two pools
  only in their strengthened forms (PERM, WATCH-PER-BLOCK), the counting module's ghost
  sums (:mod:`kvpool.proofs.counting`) not carried through a two-pool step;
* FREE-FORWARD, DROP-GONE and POOL-FRAME: fixed N only (``twopool.rules2`` counts over
  concrete blocks, and ORD-RELEASE inside FREE-FORWARD is the fixed-N one).

Here both are proved for every N_0, N_1 >= 1 and every length of run, on
``twopool.build_every_n``'s step (the composition of :mod:`kvpool.proofs.twopool` with both
pool sizes symbolic, block lists of at most 2 entries, 2 keys, 2 watcher ids):

* **the counts** (:func:`count_obligations`): each pool carries the counting module's
  ghosts (``C``, ``P``, ``registered``, ``fired``, sums defined by their recurrence). A
  call changes pool p's state only at the entries mapped onto p (its own call, or a
  forwarded free), so p's new sums are the old ones corrected there
  (``counting.stepped_ghost`` on the entries mapped onto p); a successful
  ``get_new_blocks`` on p is the counting module's hand-out loop on p
  (``counting.handout_loop``). One case per (call kind, calling pool, pool spoken of),
  plus init and the loop, with the call's domain, pool p's strengthened invariant ``S``
  (``props.strong``, itself proved for two pools by ``twopool.every_n_rows``) and p's
  counts as hypotheses;
* **the rules** (:func:`rule_obligations`): FREE-FORWARD, DROP-GONE and POOL-FRAME as
  ``twopool.rules2`` states them, with the sums over concrete blocks replaced by their
  every-N forms: "some block over-freed" as a disjunction over the (at most 2) entries,
  "each ref_cnt drops by the entries naming it" as a quantifier over the blocks, and
  ORD-RELEASE on a pool's own entries as ``steprules.release_order``. FREE-FORWARD's
  accept-iff part and DROP-GONE and POOL-FRAME need no invariant; FREE-FORWARD's part on
  pool p has p's ``S`` as hypothesis.

Every distinct hypothesis has a model (:func:`witness_row`) whose pre-world is one the
spec reaches (:func:`witness_worlds`, pinned by :func:`pin`; z3 chooses the call):
decoded, every pool passes ``check_pool``, a count's ghosts equal its pool's counts, and
the call, replayed on the spec, leaves a world that passes ``check_pool``. Each
obligation has a seeded bug (:data:`BUGS`) that z3 refutes, on such a world (or, failing
that, on any of N_0, N_1 <= 4 with both pools' S): its counterexample is decoded, the
call replayed on the spec, and the bug is confirmed only if the correct encoding agrees
with the spec there and the buggy step's decoded world breaks the invariant
(``check_pool``) or differs from the spec's (a rule).

:func:`obligations` returns every query (hypotheses, goal), for a second solver.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import PoolState, World, check_pool

from . import counting, steprules, twopool
from .counting import Ghost, fresh_ghost, invariant
from .model import (
    ERR,
    ERRORS,
    OPK,
    Config,
    Goal,
    Unbounded,
    fresh_args,
    hypothesis_model,
    initial,
    int_sort,
    isolated_check,
    iv,
    merge,
    name_rows,
    named,
    op_free_blocks,
    state_eq,
    to_int,
    transition,
)
from .trace import ConcreteArgs, decode_state
from .twopool import OPK2, OPS2, POOLS, Step2, World2, _of, world_trace, world_violations

GAPS: dict[str, str] = {
    "INV-CONSERVE": "each pool's count of free + in-use blocks (ghost sum C, per pool): "
    "every N for two pools only as PERM",
    "INV-WATCH": "each pool's registered == fired + pending (ghost sum P and counters, per "
    "pool): every N for two pools only as WATCH-PER-BLOCK",
    "FREE-FORWARD": "fixed N only (2+2..4+4, deep 6+6)",
    "DROP-GONE": "fixed N only (2+2..4+4, deep 6+6)",
    "POOL-FRAME": "fixed N only (2+2..4+4, deep 6+6)",
}
"""The two-pool obligations with no every-N proof before this module: name -> what was
there."""

PARTS = counting.PARTS
"""The counts: INV-CONSERVE and INV-WATCH, in the spec's words (ghost sums)."""
RULE_NAMES = twopool.RULE_NAMES
NAMES: tuple[str, ...] = (*PARTS, *RULE_NAMES)

BUGS: dict[str, tuple[str, str, str]] = {
    "forward-also-local": (
        "FREE-FORWARD",
        "FreeBlocks",
        "free_blocks releases a forwarded entry in its own pool and, unchecked, the block "
        "of the same id in the calling pool too",
    ),
    "forward-no-enqueue": (
        "INV-CONSERVE",
        "FreeBlocks",
        "a forwarded free lowers ref_cnt in the other pool but never links a block it "
        "frees into that pool's free queue",
    ),
    "forward-forgets-watchers": (
        "INV-WATCH",
        "FreeBlocks",
        "a forwarded free drops the watchers pending on the blocks it releases in the "
        "other pool, unfired",
    ),
    "touch-foreign-skipped": (
        "POOL-FRAME",
        "Touch",
        "touch skips an entry naming another pool's block (as it skips the null block) "
        "instead of refusing the call (ForeignBlock)",
    ),
    "drop-frees-dropped": ("DROP-GONE", "FreeBlocks", twopool.BUGS["drop-frees-dropped"][1]),
}
"""Seeded bugs of the two-pool step, one per obligation here: name -> (the obligation it
must break, the call kind it shows on, what it does). ``drop-frees-dropped`` is
:data:`twopool.BUGS`'s (a dropped pool's blocks still linked to the world: a free still
reaches them); the others are applied to ``twopool.transition2``'s result by
:func:`_seed`."""

BOUND = 4
"""N_0, N_1 <= BOUND in a refutation's model on no pinned world (so that it decodes)."""


@dataclass
class Obligation:
    name: str  # one of NAMES
    case: str  # "<call>@<calling pool> pool <p>", "init pool <p>", "loop step@p", ...
    hyp: list[z3.BoolRef]
    goal: z3.BoolRef
    pool: int | None
    """The pool whose ``S`` and counts the hypothesis holds (None: no pool's)."""
    ghost: Ghost | None = None
    """Pool ``pool``'s ghosts before the call, for the counts (to check a witness)."""


def _seed(st: Step2, bugs: frozenset[str]) -> None:
    """Apply this module's own bugs (not twopool's) to ``st``'s post-world and error."""
    c2, w, a2, r = st.c2, st.w, st.a2, st.r
    a, c = a2.a, a2.c
    ok = r.err == 0
    is_free = a.kind == OPK["FreeBlocks"]
    states = list(st.t.s)
    err = r.err
    for p, cfg in enumerate(c2.cfgs):
        d = cfg.dom
        forwarded = z3.And(ok, is_free, c != p, w.alive[p])
        if "forward-also-local" in bugs:
            extra = replace(
                a,
                e=[
                    z3.If(
                        z3.And(
                            j < a.m,
                            a2.ep[j] != p,
                            _of(a2.ep[j], w.alive),
                            a.e[j] >= 1,
                            a.e[j] < d.N,
                        ),
                        a.e[j],
                        iv(0),
                    )
                    for j in range(c2.M)
                ],
            )
            again, _ = op_free_blocks(cfg, states[p], extra)
            states[p] = merge(d, z3.And(ok, is_free, c == p), again, states[p])
        if "forward-no-enqueue" in bugs:
            states[p] = merge(d, forwarded, replace(w.s[p], ref=states[p].ref), states[p])
        if "forward-forgets-watchers" in bugs:

            def listed(b: Any, p: int = p) -> Any:
                return z3.Or(
                    [z3.And(j < a.m, a2.ep[j] == p, a.e[j] == b, b != 0) for j in range(c2.M)]
                )

            def kept(x: Any, d: Any = d) -> Any:
                return d.mk(lambda b: z3.And(d.sel(x, b), z3.Not(listed(b))), z3.BoolSort())

            pend = [kept(x) for x in states[p].pend]
            states[p] = merge(d, forwarded, replace(states[p], pend=pend), states[p])
    if "touch-foreign-skipped" in bugs:
        Ns = [cfg.dom.N for cfg in c2.cfgs]
        invalid = z3.Or([z3.And(j < a.m, a.e[j] >= _of(a2.ep[j], Ns)) for j in range(c2.M)])
        through = z3.And(
            a.kind == OPK["Touch"],
            r.err == ERR["ForeignBlock"],
            z3.Not(invalid),
            _of(c, [x.err for x in r.res]) == 0,
        )
        for p, cfg in enumerate(c2.cfgs):
            nxt, _ = transition(cfg, w.s[p], r.mapped[p])
            states[p] = merge(cfg.dom, z3.And(through, c == p), nxt, states[p])
        err = z3.If(through, iv(0), err)
    st.t = World2(states, st.t.alive)
    st.r = replace(r, err=err)


def setting(bugs: frozenset[str] = frozenset()) -> Step2:
    """``twopool.build_every_n``'s step (N_0, N_1 symbolic), with ``bugs`` seeded."""
    unknown = bugs - set(BUGS) - {"hyp-false"}
    if unknown:
        raise ValueError(f"not a bug of the two-pool every-N proof: {sorted(unknown)}")
    st = twopool.build_every_n(frozenset(b for b in bugs if b in twopool.BUGS))
    with int_sort(None):
        _seed(st, bugs)
    return st


def _hyp(st: Step2, op: str, caller: int, pool: int | None) -> list[z3.BoolRef]:
    """The call's domain, kind and pool; both N >= 1; pool ``pool``'s S (if any)."""
    h = [
        twopool._case(st, op, caller, st.domain),
        st.a2.a.kind == OPK2[op],
        st.a2.c == caller,
        *(cfg.dom.N >= 1 for cfg in st.c2.cfgs),
    ]
    if pool is not None:
        h += [v for k, v in st.hyp.items() if k.endswith(f"@{pool}")]
    return h


def count_obligations(st: Step2) -> list[Obligation]:
    """INV-CONSERVE and INV-WATCH of each pool, their sums as ghosts: init, each call kind
    on each pool (a successful get_new_blocks on pool p: the hand-out loop on p)."""
    out: list[Obligation] = []
    a, c, ok = st.a2.a, st.a2.c, st.r.err == 0
    for p, cfg in enumerate(st.c2.cfgs):
        d = cfg.dom
        # init: pool p as built
        c0 = Config(Unbounded(d.N), K=cfg.K, W=cfg.W, caching=cfg.caching, events=cfg.events)
        i0 = z3.Int("i0")
        zero = z3.Lambda([i0], iv(0))
        inv0 = invariant(c0, initial(c0), Ghost(zero, zero, iv(0), iv(0)))
        for part in PARTS:
            out.append(Obligation(part, f"init pool {p}", [d.N >= 1], inv0[part], None))
        # a step: pool p's state changes only at the entries mapped onto p
        s, t, ap = st.w.s[p], st.t.s[p], st.r.mapped[p]
        g = fresh_ghost(f"g{p}")
        mine = c == p
        reset_ok = z3.And(a.kind == OPK["ResetPrefixCache"], mine, ok, st.r.res[p].value == 1)
        unpin_ok = z3.And(a.kind == OPK["UnpinBlocks"], mine, ok)
        post = invariant(cfg, t, counting.stepped_ghost(cfg, s, ap, t, g, reset_ok, unpin_ok))
        pre = list(invariant(cfg, s, g).values())
        for op in OPS2:
            for caller in range(POOLS):
                hyp = [*_hyp(st, op, caller, p), *pre]
                if op == "GetNewBlocks" and caller == p:
                    hyp.append(z3.Not(ok))  # (its successes: the loop, below)
                for part in PARTS:
                    goal = twopool._case(st, op, caller, post[part])
                    out.append(Obligation(part, f"{op}@{caller} pool {p}", hyp, goal, p, g))
        # a successful get_new_blocks on pool p: the hand-out loop
        gnb = [*_hyp(st, "GetNewBlocks", p, p), *pre, ok]
        for part, case, hyp, goal in counting.handout_loop(cfg, s, ap, t, g, gnb, f"@{p}"):
            goal = twopool._case(st, "GetNewBlocks", p, goal)
            out.append(Obligation(part, f"{case}@{p}", hyp, goal, p, g))
    return out


def _entry_count(st: Step2, p: int, b: Any) -> Any:
    """How many live entries of the call name block b of pool p."""
    a, ep = st.a2.a, st.a2.ep
    return z3.Sum(
        [z3.If(z3.And(j < a.m, ep[j] == p, a.e[j] == b), iv(1), iv(0)) for j in range(st.c2.M)]
    )


def rule_goals(st: Step2) -> dict[str, Any]:
    """The POOL_RULES for every N, split: "FREE-FORWARD accept", "FREE-FORWARD pool p",
    "DROP-GONE pool p", "POOL-FRAME" (``twopool.rules2``'s statement, its sums over
    concrete blocks in their every-N forms)."""
    w, t, a2, r = st.w, st.t, st.a2, st.r
    a, c, kind = a2.a, a2.c, a2.a.kind
    ok = r.err == 0
    is_free = kind == OPK["FreeBlocks"]
    M = st.c2.M
    Ns = [cfg.dom.N for cfg in st.c2.cfgs]
    out: dict[str, Any] = {}

    # FREE-FORWARD: accepted iff no entry is invalid and no live pool's entries over-free
    invalid = z3.Or([z3.And(j < a.m, a.e[j] >= _of(a2.ep[j], Ns)) for j in range(M)])
    over = z3.Or(
        [
            z3.And(
                j < a.m,
                a2.ep[j] == p,
                w.alive[p],
                a.e[j] >= 1,
                a.e[j] < Ns[p],
                _entry_count(st, p, a.e[j]) > w.s[p].ref[a.e[j]],
            )
            for p in range(POOLS)
            for j in range(M)
        ]
    )
    out["FREE-FORWARD accept"] = z3.Implies(is_free, ok == z3.And(z3.Not(invalid), z3.Not(over)))
    for p, cfg in enumerate(st.c2.cfgs):
        d = cfg.dom
        s, u = w.s[p], t.s[p]

        def dropped_by_count(b: Any, d: Any = d, s: Any = s, u: Any = u, p: int = p) -> Any:
            return d.sel(u.ref, b) == d.sel(s.ref, b) - _entry_count(st, p, b)

        refs = d.forall(1, d.N, dropped_by_count)
        order = steprules.release_order(cfg, s, r.mapped[p], u)
        same = twopool._fields_eq(d, s, u, twopool._UNCHANGED_BY_FREE)
        out[f"FREE-FORWARD pool {p}"] = z3.Implies(
            z3.And(is_free, ok, w.alive[p]), z3.And(refs, order, same)
        )

    # DROP-GONE
    for p, cfg in enumerate(st.c2.cfgs):
        d = cfg.dom
        dropped = z3.And(kind == OPK2["DropPool"], c == p)
        out[f"DROP-GONE pool {p}"] = z3.And(
            z3.Implies(t.alive[p], w.alive[p]),
            z3.Implies(z3.Not(w.alive[p]), state_eq(d, w.s[p], t.s[p])),
            z3.Implies(
                kind == OPK2["DropPool"],
                z3.And(
                    ok,
                    state_eq(d, w.s[p], t.s[p]),
                    t.alive[p] == z3.And(w.alive[p], z3.Not(dropped)),
                ),
            ),
        )

    # POOL-FRAME
    pf = []
    for p, cfg in enumerate(st.c2.cfgs):
        pf.append(
            z3.Implies(
                z3.Or(z3.Not(ok), z3.And(z3.Not(is_free), c != p)),
                state_eq(cfg.dom, w.s[p], t.s[p]),
            )
        )
        pf.append(z3.Implies(z3.Not(ok), t.alive[p] == w.alive[p]))
    own = z3.And([z3.Implies(j < a.m, z3.Or(a.e[j] == 0, a2.ep[j] == c)) for j in range(M)])
    names_blocks = z3.Or([kind == OPK[k] for k in ("Touch", "UnpinBlocks", "CacheBlocks")])
    pf.append(z3.Implies(z3.And(ok, names_blocks), own))
    pf.append(z3.Implies(z3.And(ok, kind == OPK["IsBlockWritable"]), z3.Or(a.ib == 0, a2.ibp == c)))
    out["POOL-FRAME"] = z3.And(pf)
    return out


def rule_obligations(st: Step2) -> list[Obligation]:
    """Each rule's goals, one case per (call kind, calling pool) where the rule speaks of
    the call (FREE-FORWARD: free_blocks only); FREE-FORWARD's part on pool p with p's S."""
    goals = rule_goals(st)
    out: list[Obligation] = []
    for caller in range(POOLS):
        case = f"FreeBlocks@{caller}"
        g = twopool._case(st, "FreeBlocks", caller, goals["FREE-FORWARD accept"])
        out.append(Obligation("FREE-FORWARD", case, _hyp(st, "FreeBlocks", caller, None), g, None))
        for p in range(POOLS):
            g = twopool._case(st, "FreeBlocks", caller, goals[f"FREE-FORWARD pool {p}"])
            hyp = _hyp(st, "FreeBlocks", caller, p)
            out.append(Obligation("FREE-FORWARD", f"{case} pool {p}", hyp, g, p))
    for op in OPS2:
        for caller in range(POOLS):
            hyp = _hyp(st, op, caller, None)
            for p in range(POOLS):
                g = twopool._case(st, op, caller, goals[f"DROP-GONE pool {p}"])
                out.append(Obligation("DROP-GONE", f"{op}@{caller} pool {p}", hyp, g, None))
            g = twopool._case(st, op, caller, goals["POOL-FRAME"])
            out.append(Obligation("POOL-FRAME", f"{op}@{caller}", hyp, g, None))
    return out


def obligations_of(st: Step2, names: tuple[str, ...] = NAMES) -> list[Obligation]:
    """The obligations ``names`` on the step ``st``."""
    out = [
        *(count_obligations(st) if set(names) & set(PARTS) else []),
        *(rule_obligations(st) if set(names) & set(RULE_NAMES) else []),
    ]
    return [o for o in out if o.name in names]


def obligations(
    bugs: frozenset[str] = frozenset(), names: tuple[str, ...] = NAMES
) -> list[Obligation]:
    """Every obligation of this module, each its z3 query (``hyp`` and not ``goal``), of
    the obligations ``names``, on the step with ``bugs`` seeded (a second solver's
    export: these are the queries :func:`rows` asks)."""
    out = obligations_of(setting(bugs), names)
    if "hyp-false" in bugs:  # a test's seeded vacuity: every hypothesis contradicts itself
        out = [replace(o, hyp=[*o.hyp, z3.BoolVal(False)]) for o in out]
    return out


def _bounded() -> list[z3.BoolRef]:
    """N_0, N_1 <= BOUND (a refutation's or a witness's model, to decode)."""
    return [z3.Int(f"N{p}") <= BOUND for p in range(POOLS)]


def prove(
    obs: list[Obligation], timeout_ms: int = 60000, refute: bool = False, seed: int = 0
) -> list[Goal]:
    """Each obligation asked in a context of its own (with ``refute``: N_0, N_1 <= 4, and
    stop at the first refutation)."""
    out: list[Goal] = []
    for ob in obs:
        extra = _bounded() if refute else []
        with named(f"two pools every N: {ob.name} / {ob.case}"):
            status, dt, m = isolated_check([*ob.hyp, *extra], ob.goal, timeout_ms, seed)
        out.append(Goal(ob.name, ob.case, status, dt, m, ob))
        if refute and status == "refuted":
            break
    return out


# -- from a model back to the spec ---------------------------------------------------------------


def _strong_both(st: Step2) -> list[z3.BoolRef]:
    """Both pools' S (added to a witness's or a refutation's query: its model then
    decodes into a world whose pools pass ``check_pool``)."""
    return [v for k, v in st.hyp.items() if "@" in k]


def decode_world(m: z3.ModelRef, st: Step2, post: bool = False) -> World:
    """The spec world of a model: before the call, or (``post``) after it."""
    w = st.t if post else st.w
    pools = []
    for p, cfg in enumerate(st.c2.cfgs):
        n = to_int(m.eval(cfg.dom.N, model_completion=True))
        caching = z3.is_true(m.eval(cfg.caching, model_completion=True))
        events = z3.is_true(m.eval(cfg.events, model_completion=True))
        pools.append(
            decode_state(m, w.s[p], n, cfg.K, cfg.W, caching, events, z3.Select, ranked=False)
        )
    return World(pools, [z3.is_true(m.eval(x, model_completion=True)) for x in w.alive])


def _call(m: z3.ModelRef, st: Step2) -> Any:
    return twopool.to_op2(twopool.read_args2(m, st.a2))


def _view(world: World, err: str | None) -> tuple[Any, ...]:
    """What a step is compared on: the error, each pool's state (its event log left out:
    a decoded world's log is not the spec's events), which pools are live."""
    from .differential import comparable

    return (err, [comparable(ps)[:-1] for ps in world.pools], list(world.alive))


def _err(m: z3.ModelRef, st: Step2) -> str | None:
    e = to_int(m.eval(st.r.err, model_completion=True))
    return ERRORS[e] if e else None


def confirm(ob_name: str, m: z3.ModelRef, good: Step2, bad: Step2) -> tuple[list[str], str]:
    """A refutation's model (of ``bad``'s query) replayed: the pre-world decoded (it must
    pass ``check_pool``), the call run on the spec. The correct encoding (``good``, same
    variables) must agree with the spec on it; the buggy one must break ``ob_name``: an
    invariant that ``check_pool`` reports on the buggy post-world, or a rule as the buggy
    step and the spec parting (error, a pool's state, which pools are live)."""
    pre = decode_world(m, good)
    call = _call(m, good)
    trace = world_trace(pre, call)
    pre_bad = world_violations(pre)
    if pre_bad:
        return trace, f"decoded world already violates: {pre_bad[0]}"
    spec = pre.copy()
    out = spec.apply(call)
    want = _view(spec, out.error.value if out.error else None)
    if _view(decode_world(m, good, post=True), _err(m, good)) != want:
        return trace, "NOT confirmed: the correct encoding and the spec disagree on this step"
    after = decode_world(m, bad, post=True)
    if ob_name in PARTS:
        hits = world_violations(after, ob_name)
        if hits:
            return trace, f"confirmed: the buggy step leaves {hits[0]}"
        return trace, "NOT confirmed by replay"
    got = _view(after, _err(m, bad))
    if got != want:
        return trace, (
            f"confirmed: the buggy step returns {got[0]!r}, the spec {want[0]!r}; after it "
            + " | ".join(ps.describe() for ps in after.pools)
            + ", the spec's "
            + " | ".join(ps.describe() for ps in spec.pools)
        )
    return trace, "NOT confirmed by replay"


# -- rows ----------------------------------------------------------------------------------------

BOUNDS = "two pools, every N_0>=1 and N_1>=1, every k, lists<=2 keys=2 watchers=2"
GIVEN_S: tuple[str, ...] = (*PARTS, "FREE-FORWARD")
"""The obligations whose hypothesis holds a pool's strengthened invariant S (proved
inductive for two pools by ``twopool.every_n_rows``, in ``make proofs-deep``); DROP-GONE and
POOL-FRAME need none."""
GIVEN_TEXT = ", given each pool's S"
"""What their rows' bounds say of it (``kvpool.verify.GIVEN_S`` reads it)."""


def rows(
    timeout_ms: int = 60000, st: Step2 | None = None, names: tuple[str, ...] = NAMES
) -> list[dict[str, Any]]:
    """One row per obligation of ``names`` (``runner.ObligationResult(**row)``): every
    case proved (on ``st``, the correct step, built when not given)."""
    return name_rows(
        prove(obligations_of(st or setting(), names), timeout_ms),
        names,
        lambda name: (
            f"S and T => {name}{' (ghost sums)' if name in PARTS else ''} (two pools, every N)"
        ),
        lambda name, mine: f"{BOUNDS}{GIVEN_TEXT if name in GIVEN_S else ''} ({len(mine)} cases)",
        most=3,
    )


def _ghost_problem(m: z3.ModelRef, ob: Obligation, world: World) -> str:
    """The pre-call ghost sums of pool ``ob.pool`` against the decoded pool's counts."""
    if ob.ghost is None or ob.pool is None:
        return ""
    ps = world.pools[ob.pool]
    n = ps.num_blocks

    def ev(x: Any) -> int:
        return to_int(m.eval(x, model_completion=True))

    used = sum(1 for b in range(1, n) if ps.ref[b] > 0)
    pend = sum(len(v) for v in ps.pending.values())
    if ev(z3.Select(ob.ghost.C, n)) != used or ev(z3.Select(ob.ghost.P, n)) != pend:
        return "ghost sums are not the decoded pool's counts"
    if ev(ob.ghost.registered) != ps.registered or ev(ob.ghost.fired) != ps.fired:
        return "ghost counters are not the decoded pool's registered/fired"
    return ""


WITNESS_SEED = 5
WITNESS_SIZES: tuple[tuple[int, int], ...] = ((3, 3), (2, 3), (3, 2))


def watched_world() -> World:
    """Two live pools of 3 blocks, each holding a block a watcher is pending on (random
    runs seldom reach it: a free forwarded onto a watched block)."""
    from kvpool.spec import GetNewBlocks, Touch, UnpinBlocks

    world = World([PoolState.initial(3, True, True) for _ in range(POOLS)], [True] * POOLS)
    for p in range(POOLS):
        for op in (GetNewBlocks(2, pool=p), Touch((1,), pool=p), UnpinBlocks((1,), 0, pool=p)):
            if world.apply(op).error:
                raise RuntimeError(f"{op!r} refused building the watched world")
    return world


def witness_worlds(count: int = 24, seed: int = WITNESS_SEED) -> list[World]:
    """Worlds the spec reaches: :func:`watched_world`, then random runs'
    (``twopool.reachable_worlds``) of the sizes :data:`WITNESS_SIZES`, some with a pool
    dropped. A witness's (or a refutation's) pre-world is one of them."""
    import random

    rng = random.Random(seed)
    out: list[World] = [watched_world()]
    while len(out) < count:
        ns = WITNESS_SIZES[len(out) % len(WITNESS_SIZES)]
        worlds = twopool.reachable_worlds(rng, ns)
        out += [worlds[-1], worlds[len(worlds) // 2]]
    return out


def pin(st: Step2, world: World, ghosts: dict[int, Ghost]) -> list[z3.BoolRef]:
    """Constraints giving the step's pre-world the value ``world`` (each pool's state as
    ``differential.encode`` encodes it on the unbounded reading, its size, flags and
    liveness), and each ghost of ``ghosts`` (per pool) its sums over that pool."""
    from .differential import encode

    out: list[z3.BoolRef] = []
    M = st.c2.M
    dummy = ConcreteArgs(0, 0, 0, (0,) * M, False, 0, 0, (1,) * M, 1, 0)
    for p, cfg in enumerate(st.c2.cfgs):
        ps = world.pools[p]
        view = twopool._PoolView(cfg, st.w.s[p], fresh_args(cfg, "unused"), "unbounded")
        subst = encode(view, ps, dummy)  # type: ignore[arg-type]
        out += [var == val for var, val in subst.pairs if not str(var).startswith("unused.")]
        out += [ps.num_blocks == cfg.dom.N, st.w.alive[p] == world.alive[p]]
        g = ghosts.get(p)
        if g is None:
            continue
        n = ps.num_blocks
        used = [1 if ps.ref[b] > 0 else 0 for b in range(n)]
        pend = [len(ps.pending.get(b, ())) for b in range(n)]
        C: Any = z3.K(z3.IntSort(), z3.IntVal(0))
        for i in range(2, n + 1):
            C = z3.Store(C, i, sum(used[1:i]))
        P: Any = z3.K(z3.IntSort(), z3.IntVal(0))
        for i in range(1, n + 1):
            P = z3.Store(P, i, sum(pend[:i]))
        # (the encoded state's per-block counters are (pending, 0): the decoded pool's
        # registered and fired are those sums, and the ghosts follow them)
        out += [g.C == C, g.P == P, g.registered == sum(pend), g.fired == 0]
    return out


def _loop_ghosts(ob: Obligation) -> list[z3.BoolRef]:
    """A loop step's hypothesis is witnessed at j = 0 (its ghosts those before the loop)."""
    if ob.ghost is None or not ob.case.startswith("loop step"):
        return []
    tag = ob.case.split("@")[-1]
    gj = fresh_ghost(f"gj@{tag}")
    g = ob.ghost
    return [z3.Int(f"j@{tag}") == 0, gj.C == g.C, gj.P == g.P, gj.fired == g.fired]


def witness_row(
    timeout_ms: int = 10000,
    bugs: frozenset[str] = frozenset(),
    worlds: list[World] | None = None,
    st: Step2 | None = None,
    names: tuple[str, ...] = NAMES,
) -> dict[str, Any]:
    """Every distinct hypothesis has a model whose pre-world is one the spec reaches
    (:func:`witness_worlds`, pinned by :func:`pin`; z3 chooses the call, and the loop's
    ghosts at its exit): decoded, every pool passes ``check_pool``, a count's ghosts are
    its pool's counts, and the call replayed on the spec leaves a world that passes
    ``check_pool`` too. An accepted call is preferred; the worlds are tried in turn."""
    st = st or setting(bugs)
    obs = obligations_of(st, names)
    if "hyp-false" in bugs:
        obs = [replace(o, hyp=[*o.hyp, z3.BoolVal(False)]) for o in obs]
    pool = witness_worlds() if worlds is None else worlds
    seen: set[tuple[int, ...]] = set()
    problems: list[str] = []
    seconds, cases = 0.0, 0
    ok = st.r.err == 0
    for ob in obs:
        key = tuple(sorted(h.get_id() for h in ob.hyp))
        if key in seen:
            continue
        seen.add(key)
        cases += 1
        where = f"{ob.name} / {ob.case}"
        if ob.case.startswith("init"):  # (no pre-state: the pool as built, of some N)
            status, dt, m = hypothesis_model(ob.hyp, [[*_bounded()]], timeout_ms, seeds=1)
            seconds += dt
            if status != "sat" or m is None:
                problems.append(f"{where}: hypothesis {status}")
                continue
            cfg = st.c2.cfgs[int(ob.case.split()[-1])]
            n = to_int(m.eval(cfg.dom.N, model_completion=True))
            if bad := check_pool(PoolState.initial(n, True, True)):
                problems.append(f"{where}: the pool as built breaks {bad[0]}")
            continue
        ghosts = {ob.pool: ob.ghost} if ob.pool is not None and ob.ghost is not None else {}
        status, m = "unknown", None
        for world in pool:
            pins = [*pin(st, world, ghosts), *_loop_ghosts(ob)]
            status, dt, m = hypothesis_model(
                [*ob.hyp, *_strong_both(st)], [[*pins, ok], pins], timeout_ms, seeds=1
            )
            seconds += dt
            if status == "sat":
                break
        if status != "sat" or m is None:
            problems.append(f"{where}: hypothesis {status} on each of {len(pool)} worlds")
            continue
        pre = decode_world(m, st)
        bad = world_violations(pre)
        if bad:
            problems.append(f"{where}: decoded world breaks {bad[0]}")
            continue
        if why := _ghost_problem(m, ob, pre):
            problems.append(f"{where}: {why}")
            continue
        call = _call(m, st)
        pre.apply(call)
        bad = world_violations(pre)
        if bad:
            problems.append(f"{where}: {call!r} on the spec breaks {bad[0]}")
    return dict(
        obligation="S and counts satisfiable, two pools, every N",
        kind="witness",
        technique="z3 induction",
        invariants=(),
        bounds=f"two pools, every N: {cases - len(problems)}/{cases} distinct hypotheses, a "
        "model on a world the spec reaches, decoded, the call replayed on the spec",
        status="witnessed" if cases and not problems else "NOT-witnessed",
        seconds=seconds,
        replay="; ".join(problems[:3]),
    )


def mutant_row(
    bug: str,
    timeout_ms: int = 30000,
    worlds: list[World] | None = None,
    good: Step2 | None = None,
) -> dict[str, Any]:
    """``bug`` must make its obligation's every-N proof fail: a case's query (hypothesis
    and not goal) is satisfiable with its pre-world one the spec reaches (pinned as in
    :func:`witness_row`; z3 chooses the call), the cases of the bug's call kind asked
    first. The counterexample is decoded and confirmed on the spec (:func:`confirm`)."""
    name, kind, _ = BUGS[bug]
    good, st = good or setting(), setting(frozenset([bug]))
    obs = obligations_of(st, (name,))
    pool = witness_worlds() if worlds is None else worlds
    row: dict[str, Any] = dict(
        obligation=f"S and T => {name} (two pools, every N) [{bug}]",
        kind="mutant",
        technique="z3 induction",
        invariants=(name,),
        bounds=f"two pools, every N (a counterexample on one of {len(pool)} worlds the spec "
        "reaches)",
        status="NOT-refuted",
        seconds=0.0,
    )
    hinted = [o for o in obs if o.case.startswith(f"{kind}@")]
    # the bug's call kind on the worlds the spec reaches; then on any world of N <= 4 with
    # both pools' S (the worlds may miss it: a watcher pending on a block another pool
    # frees), that kind first
    tries: list[tuple[Obligation, World | None]] = [(o, w) for w in pool for o in hinted]
    tries += [(o, None) for o in hinted] + [(o, None) for o in obs if o not in hinted]
    for ob, world in tries:
        ghosts = {ob.pool: ob.ghost} if ob.pool is not None and ob.ghost is not None else {}
        where = (
            [*pin(st, world, ghosts), *_loop_ghosts(ob)]
            if world is not None
            else [*_strong_both(st), *_bounded()]
        )
        with named(f"mutant: {bug}"):
            status, dt, m = isolated_check([*ob.hyp, *where], ob.goal, timeout_ms)
        row["seconds"] += dt
        if status == "unknown":
            row["status"] = "unknown"
        if status != "refuted" or m is None:
            continue
        row["trace"], row["replay"] = confirm(name, m, good, st)
        row["trace"].insert(0, f"case: {ob.case}")
        confirmed = row["replay"].startswith("confirmed")
        row["status"] = "expected-refuted" if confirmed else "NOT-confirmed"
        if confirmed:
            return row
    return row


def all_rows(timeout_ms: int = 60000, names: tuple[str, ...] = NAMES) -> list[dict[str, Any]]:
    """The part, for the obligations ``names``: each proved, the witnesses of their
    hypotheses, each of their :data:`BUGS` refuted."""
    st, worlds = setting(), witness_worlds()
    return [
        *rows(timeout_ms, st, names),
        witness_row(worlds=worlds, st=st, names=names),
        *(mutant_row(bug, timeout_ms // 2, worlds, st) for bug in BUGS if BUGS[bug][0] in names),
    ]
