"""The event log as a sequence, and watcher firings as nested operations, at a fixed N.

The fixed-N step of :mod:`kvpool.proofs.fixedn` built with ``seq=True`` carries the event
log as a z3 sequence (``State.hist``: every event ever logged, in order; ``taken``: how
many ``take_events`` has returned) and proves, for every k at each N it is run at:

* ``INV-EVENTS`` over the sequence: replaying the log from the start (a left fold of
  ``spec.events.apply_event``: contents and order both count) yields exactly the keys the
  index holds; with events off nothing is ever logged;
* ``EVENT-LOG``: what ``take_events`` returns next is ``hist[taken:]``, of the length the
  encoding counts, and the view the rest of the encoding keeps is the replay of ``hist``;
* ``FIRE-POINT``: a call's watchers run on a consistent state (every part of the
  hypothesis holds where they fire) on which none of the watchers it fires is still
  pending. A watcher may call back into the pool, so each firing is a nested operation
  applied to that state; with FIRE-POINT and the step (which holds from any state
  satisfying the hypothesis), nested calls keep every invariant at any depth, and none
  of them can fire the outer call's watchers a second time.

``NESTED-STEP`` (:func:`nested_goals`) asks the first link of that argument directly:
a firing call and a call nested in one of its watchers, composed in one query.

Each is refuted on its seeded mutants (:data:`SEQ_MUTANTS`), and each refutation is
replayed on the spec: the decoded call's log differs from the buggy encoding's, or the
decoded firing point breaks a spec invariant or still holds a watcher that fired.
"""

from __future__ import annotations

import time
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import Event, PoolState, World, check_pool

from . import fixedn, smtlib
from .model import (
    OPK,
    OPS,
    Config,
    Goal,
    State,
    args_domain,
    constants,
    fresh_args,
    goals_status,
    int_sort,
    isolated_checks,
    iv,
    transition,
)
from .rewrite import simplify
from .trace import decode_events, decode_state

TECHNIQUE = "z3 induction (fixed N)"
"""The matrix column these rows fill (``runner.FIXEDN_TECHNIQUE``)."""

SEQ_INVARIANTS = {
    "INV-EVENTS": ("INV-EVENTS",),
    "EVENT-LOG": ("INV-EVENTS",),
    "FIRE-POINT": ("WATCH-FIRE",),
}
"""The matrix row each goal speaks to."""

SEQ_MUTANTS: dict[str, tuple[str, str, str]] = {
    "event-out-of-order": (
        "INV-EVENTS",
        "CacheBlocks",
        "cache_blocks' BlockStored goes in before the events not yet taken",
    ),
    "event-dropped": (
        "INV-EVENTS",
        "EvictBlocks",
        "evict_blocks' BlockRemoved is counted and replayed, but not in the log",
    ),
    "fire-before-detach": (
        "FIRE-POINT",
        "GetNewBlocks",
        "get_new_blocks' watchers run while still pending (a nested call fires them again)",
    ),
    "fire-mid-handout": (
        "FIRE-POINT",
        "GetNewBlocks",
        "get_new_blocks' watchers run once the blocks left the queue, before ref_cnt 1",
    ),
    "fire-before-log": (
        "FIRE-POINT",
        "ResetPrefixCache",
        "reset_prefix_cache's watchers run before AllBlocksCleared is logged",
    ),
}
"""Mutants of the encoding only (the spec has neither a stored history nor a firing
point): name -> (the goal that refutes it, the call, what it does)."""


def bounds(n: int) -> str:
    return f"N={n}, every k, lists<=2 keys=2 watchers=2, event log a sequence"


def label(n: int) -> str:
    return f"proved for every k at fixed N={n}"


def untaken(m: z3.ModelRef, s: State) -> list[Event]:
    """The log of ``s`` (what ``take_events`` returns next) in ``m``."""
    hist = decode_events(m.eval(s.hist, model_completion=True))
    return hist[m.eval(s.taken, model_completion=True).as_long() :]


def decode(st: fixedn.Step, m: z3.ModelRef, s: State | None = None) -> PoolState:
    """The spec state ``s`` (default: the pre-state) stands for in ``m``, log included."""
    s = st.s if s is None else s
    cfg: Config = st.cfg
    n = cfg.dom.n  # type: ignore[attr-defined]
    caching = z3.is_true(m.eval(cfg.caching, model_completion=True))
    events = z3.is_true(m.eval(cfg.events, model_completion=True))
    ps = decode_state(m, s, n, cfg.K, cfg.W, caching, events, lambda a, i: a[i])
    ps.log = untaken(m, s)
    return ps


def rows(
    ns: tuple[int, ...], timeout_ms: int, keep: dict[int, list[Goal]] | None = None
) -> list[dict[str, Any]]:
    """At each N: init and step of each of :data:`fixedn.SEQ_GOALS`, one case per call
    kind (``runner.ObligationResult(**row)`` rows, kind "fixed-N"). ``keep``: the goals
    asked at each N are added to it (for :func:`cvc5_row`)."""
    out: list[dict[str, Any]] = []
    for n in ns:
        inits = {g.name: g for g in fixedn.init_goals(n, seq=True)}
        st = fixedn.build(n, seq=True)
        by: dict[str, list[Goal]] = {}
        for g in fixedn.step_goals(st, timeout_ms=timeout_ms):
            if g.status == "unknown":
                g = retry(st, g, timeout_ms)
            by.setdefault(g.name, []).append(g)
        if keep is not None:
            keep.setdefault(n, []).extend([*inits.values(), *(g for gs in by.values() for g in gs)])
        for name in fixedn.SEQ_GOALS:
            gs = ([inits[name]] if name in inits else []) + by.get(name, [])
            status, bad = goals_status(gs)
            obligation = "INV-EVENTS (log as a sequence)" if name == "INV-EVENTS" else name
            out.append(
                dict(
                    obligation=obligation,
                    kind="fixed-N",
                    technique=TECHNIQUE,
                    invariants=SEQ_INVARIANTS[name],
                    bounds=f"{bounds(n)} ({len(by.get(name, []))} cases): "
                    + (label(n) if status == "proved" else "not proved"),
                    status=status,
                    seconds=sum(g.seconds for g in gs),
                    replay="; ".join(f"{g.case} {g.op} ({g.status})" for g in bad),
                )
            )
    return out


def nested_goals(
    n: int, timeout_ms: int, bugs: frozenset[str] = frozenset(), ops: tuple[str, ...] = OPS
) -> list[Goal]:
    """NESTED-STEP at N=n: from a state satisfying H, a call of each kind in ``ops`` whose
    watchers fire, and any call nested in a watcher (applied to the firing point),
    leave a state satisfying H, and the nested call fires none of the outer call's
    watchers again. One case per (outer kind, nested kind), split into conjuncts; an
    outer kind for which "some watcher fires" simplifies to false (every kind but
    GetNewBlocks and ResetPrefixCache) has nothing nested in it, and no case.

    This is the first link of FIRE-POINT's argument asked of z3 directly (two calls
    composed, the second inside the first's firing), a cross-check at small N."""
    with int_sort(None):
        st = fixedn.build(n, bugs=bugs, seq=True)
        cfg = st.cfg
        a2 = fresh_args(cfg, "nested")
        assert st.r.at_fire is not None  # (transition always sets it)
        t2, r2 = transition(cfg, st.r.at_fire, a2)
        size = cfg.dom.n  # type: ignore[attr-defined]
        fires = z3.Or([cfg.dom.sel(f, b) for f in st.r.fire for b in range(size)])
        again = [
            z3.Implies(cfg.dom.sel(f, b), z3.Not(cfg.dom.sel(f2, b)))
            for f, f2 in zip(st.r.fire, r2.fire, strict=True)
            for b in range(size)
        ]
        goal = z3.Implies(fires, z3.And([*fixedn.state_obligations(cfg, t2).values(), *again]))
        dom2 = args_domain(cfg, a2)
    out = []
    for op in ops:
        if z3.is_false(simplify(z3.substitute(fires, (st.a.kind, iv(OPK[op]))))):
            continue  # a call of this kind fires no watcher: nothing runs nested in it
        for op2 in OPS:
            kinds = [(st.a.kind, iv(OPK[op])), (a2.kind, iv(OPK[op2]))]
            base = [
                simplify(z3.substitute(st.domain, *kinds)),
                st.a.kind == OPK[op],
                *st.hyp.values(),
                simplify(z3.substitute(dom2, *kinds)),
                a2.kind == OPK[op2],
            ]
            parts = fixedn.conjuncts(simplify(z3.substitute(goal, *kinds)))
            answers = isolated_checks(base, parts, timeout_ms)
            g = Goal("NESTED-STEP", "step", "proved", 0.0, op=f"{op}/{op2}")
            for part, (status, dt, m) in zip(parts, answers, strict=False):
                g.seconds += dt
                g.queries.append([*base, z3.Not(part)])
                if status != "proved":
                    g.status, g.model = status, m
            g.query = g.queries[-1] if g.queries else []
            out.append(g)
            if g.status != "proved":
                return out
    return out


def nested_rows(
    ns: tuple[int, ...], timeout_ms: int, keep: dict[int, list[Goal]] | None = None
) -> list[dict[str, Any]]:
    """NESTED-STEP at each N of ``ns`` (``runner.ObligationResult(**row)`` rows);
    ``keep`` as in :func:`rows`."""
    out: list[dict[str, Any]] = []
    for n in ns:
        gs = nested_goals(n, timeout_ms)
        if keep is not None:
            keep.setdefault(n, []).extend(gs)
        status, bad = goals_status(gs)
        out.append(
            dict(
                obligation="NESTED-STEP",
                kind="fixed-N",
                technique=TECHNIQUE,
                invariants=("WATCH-FIRE",),
                bounds=f"{bounds(n)} ({len(gs)} cases: a call nested in a firing): "
                + (label(n) if status == "proved" else "not proved"),
                status=status,
                seconds=sum(g.seconds for g in gs),
                replay="; ".join(f"{g.op} ({g.status})" for g in bad[:3]),
            )
        )
    return out


RETRY_SEEDS = (1, 2)
"""z3's answer on the sequence queries can depend on its random seed (N=2's EVENT-LOG was
once unknown at 120 s in one process and proved in 0.1 s in another): a case that comes
back unknown is asked again at these seeds. An unsat at any seed is a proof."""


def retry(st: fixedn.Step, g: Goal, timeout_ms: int) -> Goal:
    """Case ``g`` (unknown) asked again, conjunct by conjunct, at each of RETRY_SEEDS."""
    base = [fixedn._case(st, g.op, st.domain), st.a.kind == OPK[g.op], *st.hyp.values()]
    parts = fixedn.conjuncts(fixedn._case(st, g.op, st.goals[g.name]))
    for seed in RETRY_SEEDS:
        answers = isolated_checks(base, parts, timeout_ms, seed)
        spent = sum(dt for _, dt, _ in answers)
        if len(answers) == len(parts) and all(a == "proved" for a, _, _ in answers):
            qs = [[*base, z3.Not(p)] for p in parts]
            spent += g.seconds
            return Goal(g.name, "step", "proved", spent, op=g.op, query=qs[0], queries=qs)
        g.seconds += spent
    return g


def confirm(st: fixedn.Step, bug: str, m: z3.ModelRef) -> str:
    """A mutant's counterexample replayed on the spec: "confirmed: ..." or why not."""
    ps = decode(st, m)
    pre = check_pool(ps)
    if pre:
        return f"decoded state breaks {pre[0]}"
    _, op = fixedn.decode(st, m)
    world = World([ps.copy()], [True])
    outcome = world.apply(op)
    if SEQ_MUTANTS[bug][0] != "FIRE-POINT":
        spec_log, enc_log = world.pools[0].log, untaken(m, st.t)
        if spec_log != enc_log:
            return f"confirmed: the spec logs {spec_log}, the mutant {enc_log}"
        return "not confirmed: the same log"
    if not outcome.fired:
        return "not confirmed: the spec fires no watcher on this call"
    assert st.r.at_fire is not None
    at = decode(st, m, st.r.at_fire)
    broken = check_pool(at)
    if broken:
        return f"confirmed: watchers {outcome.fired} fire on a state that breaks {broken[0]}"
    still = [f for f in outcome.fired if f.watcher in at.pending.get(f.block, ())]
    if still:
        return f"confirmed: {still} still pending where they fire (a nested call refires them)"
    return "not confirmed: the firing point is consistent"


def mutant_rows(
    n: int, timeout_ms: int, which: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Each mutant of :data:`SEQ_MUTANTS` refuted by its goal's step at N=n, replayed."""
    out: list[dict[str, Any]] = []
    for bug, (goal, op, _) in SEQ_MUTANTS.items():
        if which is not None and bug not in which:
            continue
        st = fixedn.build(n, bugs=frozenset([bug]), seq=True)
        ops = (op, *(o for o in OPS if o != op))
        gs: list[Goal] = []
        for o in ops:
            gs += fixedn.step_goals(st, (goal,), timeout_ms, (o,))
            if gs[-1].status == "refuted":
                break
        hit = gs[-1] if gs and gs[-1].status == "refuted" else None
        row: dict[str, Any] = dict(
            obligation=f"{goal} [{bug}]",
            kind="mutant",
            technique=TECHNIQUE,
            invariants=SEQ_INVARIANTS[goal],
            bounds=bounds(n),
            status="NOT-refuted",
            seconds=sum(g.seconds for g in gs),
        )
        if hit is not None and hit.model is not None:
            t0 = time.perf_counter()
            replay = confirm(st, bug, hit.model)
            row["seconds"] += time.perf_counter() - t0
            row["replay"] = replay
            row["status"] = (
                "expected-refuted" if replay.startswith("confirmed") else "NOT-confirmed"
            )
            ps = decode(st, hit.model)
            row["trace"] = [
                f"state: {ps.describe()} log={ps.log}",
                repr(fixedn.decode(st, hit.model)[1]),
            ]
        out.append(row)
    return out


# -- cvc5 on the event log's queries -----------------------------------------------------------

CVC5_PROBES: tuple[tuple[str, str, str], ...] = (
    ("event-out-of-order", "INV-EVENTS", "CacheBlocks"),
    ("fire-before-detach", "FIRE-POINT", "GetNewBlocks"),
)
"""(mutant, goal, call): a false obligation of each kind the row confirms (the log's
contents and order, the firing point), exported the same way: cvc5 must say sat."""


RETRY_MS = 60000
"""cvc5's limit (wall clock) on an event-log query it left unknown at the row's limit, and
on each of its cases (:meth:`_Export.confirm`). Measured 2026-12-06 at N=6 under other
sessions' load (load average 5 to 6): the six GetNewBlocks queries left unknown at 5 s
(one INV-EVENTS, two EVENT-LOG, three FIRE-POINT) take 0.7 to 4.9 CPU s of cvc5 each
(1.6 to 22.7 s of wall time): the limit is wall clock, and the load ran it out."""


def case_facts(query: list[z3.BoolRef], n: int) -> list[z3.BoolRef]:
    """Cases that cover every model of ``query``: the pool's events off; events on, with
    the call's count ``a.n`` at most 1, each of 2..n-1, at least n (GetNewBlocks: how
    many blocks it hands out, so how many evictions the log records). One of them holds
    in every model, so ``query`` is unsat iff it is unsat with each one added. Empty when
    the query names no ``events`` or ``a.n`` of those sorts (then no split is made)."""
    consts = constants(query)
    ev, an = consts.get("events"), consts.get("a.n")
    if ev is None or an is None or not z3.is_bool(ev) or not z3.is_int(an):
        return []
    on = [an <= 1, *(an == k for k in range(2, n)), an >= max(n, 2)]
    return [z3.Not(ev), *(z3.And(ev, c) for c in on)]


class _Export:
    """Queries of the event log written out for cvc5, their folds abstracted
    (:func:`smtlib.abstract_folds`: an unsat proves the query unsat). The folds found so
    far are substituted directly (they are the same few terms in every query: the pre-
    state's log replayed per key), and all texts are made in one context of their own."""

    def __init__(self) -> None:
        self.ctx = z3.Context()
        self.folds: list[z3.ExprRef] = []

    def text(self, query: list[z3.BoolRef]) -> str:
        q = smtlib.abstract_terms(query, self.folds)
        text = smtlib.to_smt2(q, self.ctx)
        if "seq.fold" in text:  # a fold not seen yet
            more = smtlib.find_folds(q)
            self.folds += more
            text = smtlib.to_smt2(smtlib.abstract_terms(q, more), self.ctx)
        # z3 4.x sometimes prints the nullary constructor ``cleared`` as the indexed
        # ``(_ cleared cleared)``, which is not SMT-LIB (cvc5 refuses it): the same term
        return text.replace("(_ cleared cleared)", "cleared")

    def verdict(self, query: list[z3.BoolRef], timeout_ms: int) -> str:
        """cvc5 on ``query``: quantifier-free at fixed N, so asked in this process."""
        try:
            return smtlib.cvc5_check(self.text(query), timeout_ms)[0]
        except (ValueError, RuntimeError) as exc:  # cvc5 does not read the text
            return f"refused ({str(exc)[:60]})"

    def confirm(self, query: list[z3.BoolRef], timeout_ms: int, n: int) -> tuple[str, str]:
        """cvc5 on ``query`` as :meth:`verdict` asks it; if it is left unknown, once more
        at :data:`RETRY_MS`, then case by case (:func:`case_facts`, each case at
        :data:`RETRY_MS`). The verdict and how it was reached ("whole", "retry",
        "cases: k"). Each case is the query with one more assertion, and the cases'
        assertions cover every model (one of them holds in each), so the query is unsat
        if every case is unsat; a case's model is a model of the query ("sat" is
        returned as it is: a disagreement)."""
        v = self.verdict(query, timeout_ms)
        if v != "unknown":
            return v, "whole"
        v = self.verdict(query, RETRY_MS)
        if v != "unknown":
            return v, "retry"
        cases = case_facts(query, n)
        for fact in cases:
            v = self.verdict([*query, fact], RETRY_MS)
            if v != "unsat":
                return v, f"cases: {len(cases)}"
        return ("unsat", f"cases: {len(cases)}") if cases else ("unknown", "retry")


def cvc5_row(kept: dict[int, list[Goal]], timeout_ms: int, probe_n: int = 2) -> dict[str, Any]:
    """cvc5 on every query z3 proved among ``kept`` (by N: INV-EVENTS over the sequence,
    EVENT-LOG, FIRE-POINT, NESTED-STEP), each of which must be unsat, and on the mutants'
    queries of :data:`CVC5_PROBES` at N=``probe_n``, each of which must be sat (the check
    can fail). An obligation at an N is *confirmed* when every query z3 proved for it
    there is unsat to cvc5; a sat on a proved query, or an unsat on a probe, is a
    disagreement and fails the row; an unknown leaves the obligation not confirmed
    (named in the row). ``runner.ObligationResult(**row)``, kind "second solver"."""
    t0 = time.perf_counter()
    export = _Export()
    verdicts: dict[str, dict[str, list[str]]] = {}  # "NAME N=n" -> verdicts
    n_queries = 0
    settled: list[str] = []  # (the queries settled past the first ask, and how)
    for n, gs in sorted(kept.items()):
        for g in gs:
            if g.status != "proved":
                continue
            for q in g.all_queries():
                n_queries += 1
                by = verdicts.setdefault(f"{g.name} N={n}", {})
                v, how = export.confirm(q, timeout_ms, n)
                by.setdefault(v, []).append(g.op or g.case)
                if how != "whole" and v == "unsat":
                    settled.append(f"{g.name} {g.op or g.case} N={n} ({how})")
    probes = []
    for bug, goal, op in CVC5_PROBES:
        st = fixedn.build(probe_n, bugs=frozenset([bug]), seq=True)
        (g,) = fixedn.step_goals(st, (goal,), timeout_ms, (op,), direct=True)
        pv = export.verdict(g.query, timeout_ms) if g.status == "refuted" else "not refuted"
        probes.append((bug, g.status, pv))
    disagree = [
        f"{k}: sat on {', '.join(sorted(set(v['sat'])))}" for k, v in verdicts.items() if "sat" in v
    ]
    disagree += [f"probe {b}: z3 {zs}, cvc5 {pv}" for b, zs, pv in probes if pv != "sat"]
    open_ = [
        f"{k} ({', '.join(sorted(v for v in vs if v != 'unsat'))})"
        for k, vs in verdicts.items()
        if set(vs) - {"unsat", "sat"}
    ]
    confirmed = [k for k, vs in verdicts.items() if set(vs) == {"unsat"}]
    status = "disagree" if disagree else "partly-confirmed" if open_ else "agree"
    if not verdicts:
        status = "not-run"
    ns = ", ".join(str(n) for n in sorted(kept))
    return dict(
        obligation="cvc5 re-checks the event log as a sequence",
        kind="second solver",
        technique="cvc5 (SMT-LIB 2 from z3, the log's folds abstracted)",
        invariants=(),
        bounds=f"the event log as a sequence, N={ns}: cvc5 confirms {len(confirmed)} of "
        f"{len(verdicts)} (obligation, N) z3 proved ({n_queries} queries, "
        f"{timeout_ms // 1000} s each); mutant probes "
        + ", ".join(f"{b} {pv}" for b, _, pv in probes)
        + (f"; NOT confirmed: {len(open_)}" if open_ else "")
        + (f"; {len(settled)} asked again at {RETRY_MS // 1000} s or by cases" if settled else ""),
        status=status,
        seconds=time.perf_counter() - t0,
        replay="; ".join(
            ([f"disagrees: {'; '.join(disagree)}"] if disagree else [])
            + ([f"settled again: {', '.join(settled)}"] if settled else [])
            + ([f"not confirmed: {', '.join(open_)}"] if open_ else [])
        ),
    )
