"""Run every obligation of a profile; results as :class:`ObligationResult` rows."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from kvpool.spec import INVARIANTS, Op, World, check_pool

from . import (
    bmc,
    counting,
    cvc5cases,
    cvc5certs,
    cvc5hot,
    cvc5leaves,
    cvc5more,
    differential,
    eventseq,
    fixedn,
    induction,
    listreplay,
    multikey,
    pyhot,
    pypool,
    pyrefine,
    refinement,
    smtlib,
    spacer,
    steprules,
    symlists,
    symsorts,
    twolists,
    twopool,
    twopooln,
    witnesses,
)
from .model import (
    OPS,
    Goal,
    Record,
    all_proved,
    any_refuted,
    goals_status,
    name_rows,
    named,
    recording,
    replay_ladder,
)
from .mutants import MUTANTS, BuggyWorld, world_class
from .props import STRONG_PARTS
from .pysource import Translation, Unsupported
from .trace import decode_state, read_args, to_op

PROFILES: dict[str, dict[str, Any]] = {
    # what `make test` runs (well under a minute)
    # "bmc" is (N, k, M): N blocks, k steps, block lists of at most M entries (M = 2 lets
    # a list repeat a block and gives FRONT and BACK an order to keep)
    "fast": {
        "bmc": (4, 4, 2),
        # fixed-N 1-induction: every obligation for every k, at each of these N
        "fixedn": (1, 2, 3),
        "fixedn_timeout": 120000,
        "cvc5": (2,),
        # cvc5 on the every-N induction's and the refinements' proved queries
        "cvc5_quantified": False,
        # the parts whose quantified queries cvc5 leaves unknown whole are asked again
        # split into parts (see smtlib.cvc5_confirm)
        "cvc5_split": (),
        # cvc5 on the every-N counts and step rules (counting.py, steprules.py)
        "cvc5_counts": False,
        # the queries even the split leaves open, asked case by case (cvc5cases.CASES)
        "cvc5_cases": False,
        # the source's posts cvc5 leaves unknown, case by case on their branches, up to
        # this many cases (cvc5leaves.py; 0: not asked)
        "cvc5_leaves": 0,
        "spacer": (),
        "spacer_timeout": 150.0,
        # Spacer's invariants checked by z3 and cvc5 (cvc5certs.py): with Spacer, in "deep"
        "spacer_cvc5": False,
        # BMC's unrolled queries asked of z3 and cvc5 at these (N, k, M) (cvc5certs.py)
        "bmc_cvc5": (),
        "fixedn_mutants": ("touch-no-remove", "watcher-kept", "unpin-reversed"),
        # the event log as a sequence and the watchers' firing point (eventseq.py)
        "eventseq": (1, 2, 3),
        "eventseq_nested": (2,),
        "eventseq_mutants": ("event-out-of-order", "fire-before-detach"),
        # cvc5 on the event log's queries at these N (eventseq.cvc5_row)
        "cvc5_eventseq": (),
        # generous: a timeout is reported as unknown, a failure, on a loaded machine
        "ind_timeout": 60000,
        "diff": 300,
        "diff_mutants": False,
        "mut_bmc": (4, 4, 2),
        "all_mutants": False,
        # two pools (twopool.py): fixed-N induction at each (N_0, N_1); its bugs by BMC
        # at ((N_0, N_1), k); the differential's (world, call) pairs
        "twopool": ((2, 2),),
        "twopool_bmc": ((2, 2), 3),
        "twopool_diff": 150,
        "twopool_bmc_proofs": False,
        "twopool_every_n": False,
        # two pools for every N (twopooln.py): the obligations run (counts, POOL_RULES)
        "twopool_n": (),
        # two pools, list calls as loops over a list of symbolic length (twolists.py)
        "twopool_lists": (),
        # blocks with several keys (multikey.py): tests/test_proofs_multikey.py runs its own
        "multikey": None,
        # lists of symbolic length (symlists.py, its own part): () leaves it out
        "symlists": (),
        # impl/pool.py's touch from its source (pypool.py): in "deep" only (its cost)
        "pool_source": False,
        # impl/pool.py's other hot paths from their source (pyhot.py): () leaves them out
        "hot_source": (),
        # cvc5 on these parts' proved queries (cvc5more.py): none here
        "cvc5_more": (),
        "cvc5_jobs": 1,
    },
    # `make proofs` / `make verify`
    "default": {
        # BMC's proof rows are a cross-check of the fixed-N induction (which covers every k
        # at N <= 8); its counterexample search on the mutants is what it is there for
        "bmc": (4, 4, 2),
        "fixedn": (1, 2, 3, 4, 5, 6, 7, 8),
        "fixedn_timeout": 120000,
        # every proved query at these N (1..4: 427 to 1170 queries each, 5 to 26 s)
        "cvc5": (1, 2, 3, 4),
        "cvc5_quantified": True,
        # the split where it is cheap; in "source" it cost 23 -> 73 CPU s (three posts stay
        # unknown with ~70 parts each), and the counts' cvc5 row 50 s: both in "deep",
        # to keep `make verify` within its 10 minutes
        "cvc5_split": ("bmc-induction", "refinement"),
        "cvc5_counts": False,
        # case by case: the every-N induction row 116 CPU s of cvc5 with it (PERM / FreeBlocks
        # ~67 of them): "deep"
        "cvc5_cases": False,
        # the six posts left unknown, to leaves: the source part 59 -> 92 CPU s (12-06,
        # quiet), its cvc5 row 26 of 26 where it was 20 of 26
        "cvc5_leaves": cvc5leaves.MAX_LEAVES,
        # Spacer, no hand lemma (its own part, :func:`run_spacer`), as (N, obligations):
        # every fixed-N obligation in one query at N=3 and N=4, and its two mutants at N=3:
        # 15.8 CPU s with the children (12-06, load ~6); N=5 and 6 and the certificate
        # are "deep"'s
        "spacer": ((3, spacer.OBLIGATIONS), (4, spacer.OBLIGATIONS)),
        "spacer_timeout": 150.0,
        # Spacer's invariants checked by z3 and cvc5 (cvc5certs.py): with Spacer, in "deep"
        "spacer_cvc5": False,
        # BMC's unrolled queries asked of z3 and cvc5 at these (N, k, M) (cvc5certs.py)
        "bmc_cvc5": (),
        "fixedn_mutants": None,
        # N=1..5: about 15 s in all; N=6 about 18 s alone, N=8 unknown at 60 s (deep)
        "eventseq": (1, 2, 3, 4, 5),
        # NESTED-STEP (a call nested in a firing, composed): 4-6 s per N, over the ~15 s
        # this profile's budget gave the event log; in "fast" and "deep"
        "eventseq_nested": (),
        "eventseq_mutants": None,
        # cvc5 on the event log's queries (folds abstracted, quantifier-free): 5.7 CPU s
        # for N=1..3 and the two probes (N=4, 5 add 3.3, 6.8: "deep")
        "cvc5_eventseq": (1, 2, 3),
        "ind_timeout": 60000,
        "diff": 1200,
        "diff_mutants": True,
        "mut_bmc": (5, 5, 2),
        "all_mutants": True,
        # ~20 CPU s in all (measured: twopool's section of docs/06-z3.md)
        "twopool": ((2, 2), (3, 3), (4, 4)),
        "twopool_bmc": ((3, 3), 3),
        "twopool_diff": 150,
        "twopool_bmc_proofs": False,
        "twopool_every_n": False,
        # two pools for every N: the POOL_RULES, their witnesses and 3 mutants (twopooln.py:
        # the part 23.1-26.2 -> 31.1 CPU s, side by side); with the counts 38.4: "deep"
        "twopool_n": twopooln.RULE_NAMES,
        # two pools with lists of symbolic length (twolists.py): ~24 CPU s with its
        # agreement, witnesses and four mutants (72 proofs alone: ~2), over the 10 this
        # profile can add: "deep"
        "twopool_lists": (),
        # blocks with several keys: induction at N=2,3, 3 of its 5 mutants by BMC (N=3,
        # k=4), 120 differential pairs, INV-CACHE and INV-EVENTS for every N with 4 mutants
        # refuted there (29 CPU s for the part's process, measured under load: over the
        # 20 s aimed at; N=2 alone is 5 s of it; all 5 mutants by BMC and the mutants'
        # differential: deep)
        "multikey": multikey.Plan(
            (2, 3),
            (3, 4),
            120,
            False,
            ("mk-promote-keeps-index", "mk-move-announces", "mk-evict-primary-only"),
            multikey.EVERY_N_MUTANTS,
        ),
        # lists of symbolic length: the loop proofs, the loop == model.py agreement, the
        # witnesses, the mutants (about 14 CPU s in all, measured)
        "symlists": ("proofs", "agreement", "witnesses", "mutants"),
        # impl/pool.py's touch from its source: 67 obligations at L = 2 and 3, 69 CPU s
        # (12-05, loaded), over the 20 s this profile can give it: in "deep"
        "pool_source": False,
        # get_new_blocks from its source: 63 obligations, 3.4 CPU s, and its mutant 1.2 s
        # (12-05); free_blocks' 99 take 55 CPU s, unpin_blocks' 73 12 CPU s, and their
        # mutants up to 37 CPU s each: in "deep"
        "hot_source": ("get_new_blocks",),
        # cvc5 on the two-pool, multi-key, symbolic-list parts' proved queries: each over
        # the 10 CPU s this profile can add (cvc5more.py; docs/06-z3.md): "deep"
        "cvc5_more": (),
        "cvc5_jobs": 1,
    },
    "deep": {
        "bmc": (6, 8, 2),
        "fixedn": (1, 2, 3, 4, 5, 6, 7, 8),
        "fixedn_timeout": 300000,
        "cvc5": (1, 2, 3, 4, 5, 6, 7, 8),
        "cvc5_quantified": True,
        "cvc5_split": ("bmc-induction", "refinement", "source"),
        "cvc5_counts": True,
        "cvc5_cases": True,
        "cvc5_leaves": cvc5leaves.MAX_LEAVES,
        # (N, obligations): every one in one query up to N=5; at N=6 two queries, the
        # state obligations (108 CPU s, measured) and the step rules (34 CPU s): the joint
        # query on all 16 there was unknown after 615 CPU s
        "spacer": (
            (3, spacer.OBLIGATIONS),
            (4, spacer.OBLIGATIONS),
            (5, spacer.OBLIGATIONS),
            (6, spacer.STATE_OBLIGATIONS),
            (6, spacer.STEP_OBLIGATIONS),
        ),
        "spacer_timeout": 900.0,
        "spacer_cvc5": True,
        # (N, k, M): 32 step queries, 45 CPU s (12-06, loaded); the rows' own 6 x 8 and
        # make verify's 4 x 4 were not measured under cvc5: the row names its bounds
        # (N=3 k=3: 46 of 48 confirmed, 151 CPU s; N=4 k=2: 31 of 32, 62 CPU s: 12-06)
        "bmc_cvc5": (3, 2, 2),
        "fixedn_mutants": None,
        "eventseq": (1, 2, 3, 4, 5, 6, 7),
        "eventseq_nested": (1, 2, 3, 4),
        "eventseq_mutants": None,
        "cvc5_eventseq": (1, 2, 3, 4, 5, 6, 7),
        "ind_timeout": 120000,
        "diff": 3000,
        "diff_mutants": True,
        "mut_bmc": (6, 6, 2),
        "all_mutants": True,
        "twopool": ((2, 2), (2, 3), (3, 3), (3, 4), (4, 4), (5, 5), (6, 6)),
        # (BMC's proof rows at 3+3, k = 4: INV-FREE, INV-CONSERVE and FREE-FORWARD were
        # unknown at 150 s; at k = 3 every one is proved, 25 CPU s)
        "twopool_bmc": ((3, 3), 3),
        "twopool_diff": 1000,
        "twopool_bmc_proofs": True,
        # each pool's strengthened invariant for every N_0, N_1 (twopool.every_n_rows)
        "twopool_every_n": True,
        "twopool_n": twopooln.NAMES,
        "twopool_lists": twolists.NAMES,
        "multikey": multikey.Plan(
            (2, 3, 4, 5, 6),
            (4, 5),
            1200,
            True,
            None,
            multikey.EVERY_N_MUTANTS,
        ),
        # (and S's parts, ORD-*, WATCH-PER-BLOCK with keys and watchers as sorts: ~30 CPU s)
        "symlists": ("proofs", "agreement", "witnesses", "mutants", "sorted-state"),
        "pool_source": True,
        "hot_source": pyhot.METHODS,
        # cvc5 on every proved query of these parts, and case by case where named
        "cvc5_more": tuple(cvc5more.FAMILIES),
        # cvc5hot's queries two at a time (steps 1 to 3e; each its own process): its
        # step 3d takes 6 to 1,900 s a query on `touch` (docs/06-z3.md)
        "cvc5_jobs": 2,
    },
}


@dataclass
class ObligationResult:
    obligation: str
    kind: str  # "BMC", "inductive", "refinement", "differential", "mutant"
    technique: str  # "z3 BMC", "z3 induction", "refinement", ...
    invariants: tuple[str, ...]
    bounds: str
    # "proved", "refuted", "unknown", "expected-refuted", "NOT-refuted", "agree", "disagree",
    # "caught", "missed" (a differential run on an encoding mutant)
    status: str
    seconds: float
    trace: list[str] = field(default_factory=list)
    replay: str = ""

    @property
    def ok(self) -> bool:
        # "partly-confirmed": the second solver disagreed on nothing but did not confirm
        # every obligation (which ones is in the row): shown as such, not as "agree"
        return self.status in (
            "proved",
            "expected-refuted",
            "agree",
            "partly-confirmed",
            "witnessed",
            "caught",
            "fixed-N-only",
        )

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def _inv_of(name: str) -> tuple[str, ...]:
    if name in INVARIANTS:
        return (name,)
    if name in STRONG_PARTS:
        return STRONG_PARTS[name]
    return (name,)


# -- bounded model checking ------------------------------------------------------------------


def run_bmc(n: int, k: int, M: int, timeout_ms: int = 600000) -> list[ObligationResult]:
    """Each obligation at every step 1..k, proved step by step (earlier steps are lemmas)."""
    u = bmc.unroll(n, k, M=M)
    s = z3.Solver()
    s.add(u.solver.assertions())
    names = list(u.obligations)
    times = dict.fromkeys(names, 0.0)
    status = dict.fromkeys(names, "proved")
    for step in range(k):
        for o in names:
            if status[o] != "proved":
                continue
            s.push()
            s.set("timeout", timeout_ms)
            s.add(z3.Not(u.obligations[o][step]))
            t0 = time.perf_counter()
            r = s.check()
            times[o] += time.perf_counter() - t0
            s.pop()
            if r != z3.unsat:
                status[o] = "unknown" if r == z3.unknown else "refuted"
        for o in names:
            s.add(u.obligations[o][step])
    c = u.cfg
    bounds = f"N={n} k={k} lists<={c.M} keys={c.K} watchers={c.W} caching,events symbolic"
    return [
        ObligationResult(o, "BMC", "z3 BMC", _inv_of(o), bounds, status[o], times[o]) for o in names
    ]


def _replay_bmc(bug: str, obligation: str, c: bmc.Check, n: int) -> str:
    """Replay the decoded trace on the spec with the same bug; say what it shows."""
    assert c.trace is not None
    w = world_class(bug).make(bug, n, bool(c.caching), bool(c.events))
    return _replay_ops(w, obligation, c.trace)


def _replay_ops(w: BuggyWorld, obligation: str, trace: list[Op]) -> str:
    """Apply ``trace`` to the buggy world ``w``; the first step that breaks ``obligation``."""
    for i, op in enumerate(trace):
        before = w.pools[0].copy()
        out = w.apply(op)
        if obligation in INVARIANTS:
            bad: list[object] = [v for v in check_pool(w.pools[0]) if v.invariant == obligation]
            if obligation == "INV-FREE" and w.queued_twice:
                bad.append(f"INV-FREE: block {w.queued_twice[0]} queued twice")
            if bad:
                return f"confirmed at step {i + 1}: {bad[0]}"
        else:
            good = World([before], [True])
            ref = good.apply(op)
            if (ref.value, ref.error, ref.fired) != (out.value, out.error, out.fired) or (
                good.pools[0].snapshot() != w.pools[0].snapshot()
            ):
                return (
                    f"confirmed at step {i + 1}: {op!r} gives {out.value!r}/{out.fired!r},"
                    " the semantics"
                    f" {ref.value!r}/{ref.fired!r}; after it, buggy {w.pools[0].describe()}"
                    f" vs {good.pools[0].describe()}"
                )
    return "NOT confirmed by replay"


def run_bmc_mutants(
    n: int, k: int, M: int, which: tuple[str, ...] | None
) -> list[ObligationResult]:
    out = []
    for m in MUTANTS:
        if which is not None and m.name not in which:
            continue
        u = bmc.unroll(n, k, M=M, bugs=frozenset([m.name]))
        for ob in m.bmc:
            c = bmc.check(u, ob, 120000)
            row = ObligationResult(
                f"{ob} [{m.name}]",
                "mutant",
                "z3 BMC",
                _inv_of(ob),
                f"N={n} k={k} lists<={M}",
                "",
                c.seconds,
            )
            if c.status == "refuted":
                row.trace = [repr(op) for op in c.trace or []]
                row.replay = _replay_bmc(m.name, ob, c, n)
                row.status = (
                    "expected-refuted" if row.replay.startswith("confirmed") else "NOT-confirmed"
                )
            else:
                row.status = "NOT-refuted" if c.status == "proved" else "unknown"
            out.append(row)
    return out


# -- induction -------------------------------------------------------------------------------


def run_induction(timeout_ms: int) -> list[ObligationResult]:
    rows = []
    for g in induction.init_goals(timeout_ms):
        rows.append(
            ObligationResult(
                f"init => {g.name}",
                "inductive",
                "z3 induction",
                _inv_of(g.name),
                "every N>=1",
                g.status,
                g.seconds,
            )
        )
    for g in induction.lemma_goals(timeout_ms):
        rows.append(
            ObligationResult(
                f"S => {g.name}",
                "inductive",
                "z3 induction",
                (g.name,),
                "every N>=1",
                g.status,
                g.seconds,
            )
        )
    goals = induction.step_goals(timeout_ms=timeout_ms)
    by_part: dict[str, list[Goal]] = {}
    for g in goals:
        by_part.setdefault(g.name, []).append(g)
    for part, gs in by_part.items():
        status, bad = goals_status(gs)
        note = (
            "" if not bad else "not proved for: " + ", ".join(f"{g.op} ({g.status})" for g in bad)
        )
        rows.append(
            ObligationResult(
                f"S and T => {part}",
                "inductive",
                "z3 induction",
                _inv_of(part),
                f"every N>=1, every n, lists<=2, all {len(gs)} ops",
                status,
                sum(g.seconds for g in gs),
                replay=note,
            )
        )
    return rows


# the operation each mutant changes: its induction counterexample is looked for there first
MUTANT_OPS: dict[str, tuple[str, ...]] = {
    "no-underflow-check": ("FreeBlocks",),
    "touch-no-remove": ("Touch",),
    "unpin-append-always": ("UnpinBlocks",),
    "touch-null": ("Touch",),
    "watcher-kept": ("GetNewBlocks",),
    "unpin-dup-watcher": ("UnpinBlocks",),
    "evict-keeps-index": ("EvictBlocks",),
    "cache-when-off": ("CacheBlocks",),
    "removed-per-block": ("EvictBlocks", "GetNewBlocks"),
    "stored-event-missing": ("CacheBlocks",),
}


def run_induction_mutants(
    timeout_ms: int, which: tuple[str, ...] | None = None, extras: bool = True
) -> list[ObligationResult]:
    rows = []
    deferred: list[tuple[str, str]] = []  # claims the fixed-N induction runs, after the rest
    for m in MUTANTS:
        if which is not None and m.name not in which:
            continue
        for part in m.induction:
            if part not in STRONG_PARTS:
                # no part of the every-N invariant speaks of it: the fixed-N induction
                # does, and runs the claim there; a claim nothing can run is a failure
                if part in fixedn.STATE_OBLIGATIONS or part in fixedn.STEP_RULES:
                    deferred.append((m.name, part))
                else:
                    rows.append(
                        ObligationResult(
                            f"S and T => {part} [{m.name}]",
                            "mutant",
                            "z3 induction",
                            _inv_of(part),
                            "every N>=1",
                            "not-run",
                            0.0,
                            replay="no induction obligation states this claim",
                        )
                    )
                continue
            gs = induction.step_goals(
                parts=(part,),
                ops=MUTANT_OPS.get(m.name, OPS),
                bugs=frozenset([m.name]),
                timeout_ms=timeout_ms,
                refute=True,
            )
            hit = [g for g in gs if g.status == "refuted"]
            row = ObligationResult(
                f"S and T => {part} [{m.name}]",
                "mutant",
                "z3 induction",
                _inv_of(part),
                "every N>=1",
                "",
                sum(g.seconds for g in gs),
            )
            if not hit:
                row.status = "NOT-refuted" if all(g.status == "proved" for g in gs) else "unknown"
            else:
                g = hit[0]
                cfg, s, a = g.ctx
                mdl = g.model
                assert mdl is not None
                N = int(mdl.eval(cfg.dom.N, model_completion=True).as_long())
                caching = z3.is_true(mdl.eval(cfg.caching, model_completion=True))
                events = z3.is_true(mdl.eval(cfg.events, model_completion=True))
                ps = decode_state(mdl, s, N, cfg.K, cfg.W, caching, events, z3.Select, ranked=False)
                op = to_op(read_args(mdl, a), N)
                row.trace = [f"state: N={N} {ps.describe()}", repr(op)]
                pre_bad = check_pool(ps)
                w = BuggyWorld.from_state(m.name, ps)
                w.apply(op)
                post_bad = [v for v in check_pool(w.pools[0]) if v.invariant in STRONG_PARTS[part]]
                if pre_bad:
                    row.replay = f"decoded state already violates: {pre_bad[0]}"
                    row.status = "NOT-confirmed"
                elif post_bad:
                    row.replay = f"confirmed: {post_bad[0]}"
                    row.status = "expected-refuted"
                else:
                    row.replay = "NOT confirmed by replay"
                    row.status = "NOT-confirmed"
            rows.append(row)
    if extras:
        rows += _induction_extras(timeout_ms)
    # (after the every-N queries: those are sensitive to what the process built before)
    for name, part in deferred:
        rows += run_fixedn_mutants(4, (name,), (part,), timeout_ms)
    return rows


def _induction_extras(timeout_ms: int) -> list[ObligationResult]:
    rows: list[ObligationResult] = []
    # the initial state and the lemmas have mutants of their own
    gs = induction.init_goals(timeout_ms, bugs=frozenset(["init-null-free"]))
    refuted = [g for g in gs if g.status == "refuted"]
    from collections import OrderedDict

    from kvpool.spec import PoolState

    ps = PoolState.initial(3)
    ps.free = OrderedDict.fromkeys(range(0, 3))
    bad = check_pool(ps)
    rows.append(
        ObligationResult(
            "init => S [init-null-free]",
            "mutant",
            "z3 induction",
            ("INV-NULL", "INV-FREE"),
            "every N>=1",
            "expected-refuted" if refuted and bad else "NOT-refuted",
            sum(g.seconds for g in gs),
            trace=["initial queue 0, 1, .., N-1"],
            replay=f"confirmed: {bad[0]}" if bad else "",
        )
    )
    ls = induction.lemma_goals(timeout_ms, weaken=True)
    row = ObligationResult(
        "S => INV-FREE [perm-without-inverse]",
        "mutant",
        "z3 induction",
        ("INV-FREE",),
        "every N>=1",
        "NOT-refuted",
        sum(g.seconds for g in ls),
    )
    if ls and ls[0].status == "refuted":
        cfg, s, _ = ls[0].ctx
        mdl = ls[0].model
        assert mdl is not None
        N = int(mdl.eval(cfg.dom.N, model_completion=True).as_long())
        ps = decode_state(mdl, s, N, cfg.K, cfg.W, True, False, z3.Select, ranked=False)
        L = int(mdl.eval(s.L, model_completion=True).as_long())
        queue = [
            int(mdl.eval(z3.Select(s.q, i), model_completion=True).as_long()) for i in range(L)
        ]
        v = [x for x in check_pool(ps) if x.invariant == "INV-FREE"]
        if len(set(queue)) < len(queue):
            v = [f"INV-FREE: the queue {queue} holds a block twice"]  # type: ignore[list-item]
        row.trace = [f"state: N={N} {ps.describe()}"]
        row.status = "expected-refuted" if v else "NOT-confirmed"
        row.replay = f"confirmed: {v[0]}" if v else "NOT confirmed"
    rows.append(row)
    return rows


# -- the counting invariants for every N (ghost sums) ----------------------------------------

COUNTING_BOUNDS = "every N>=1, every n, lists<=2 keys=2 watchers=2, sums by their recurrence"

# each mutant breaks the count it is listed with; its counterexample is looked for in
# these cases first, decoded and replayed on the buggy spec
COUNTING_MUTANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "touch-no-remove": ("INV-CONSERVE", ("Touch",)),
    "unpin-append-always": ("INV-CONSERVE", ("UnpinBlocks",)),
    "watcher-kept": ("INV-WATCH", ("loop exit",)),
}


def _decode_pre(mdl: z3.ModelRef, cfg: Any, s: Any, N: int) -> Any:
    """The spec's pool state a model of the every-N encoding describes (N blocks)."""
    caching = z3.is_true(mdl.eval(cfg.caching, model_completion=True))
    events = z3.is_true(mdl.eval(cfg.events, model_completion=True))
    return decode_state(mdl, s, N, cfg.K, cfg.W, caching, events, z3.Select, ranked=False)


def _goal_rows(
    gs: list[Any], names: Iterable[str], title: str, bounds: str
) -> list[ObligationResult]:
    """One inductive row per name of ``names`` from the goals ``gs`` bearing it; ``title``
    and ``bounds`` take the name and the goals' count (:func:`model.name_rows`)."""
    rows = name_rows(gs, tuple(names), title.format, lambda name, mine: bounds.format(len(mine)))
    return [ObligationResult(**r) for r in rows]


def run_counting(timeout_ms: int) -> list[ObligationResult]:
    """INV-CONSERVE and INV-WATCH for every N (:mod:`counting`): one row per invariant
    (init, every call kind, the hand-out loop)."""
    return _goal_rows(
        counting.goals(timeout_ms=timeout_ms),
        counting.PARTS,
        "init, S and T => {} (ghost sums)",
        f"{COUNTING_BOUNDS}; {{}} cases (init, 12 call kinds, hand-out loop)",
    )


def counting_witness_row(
    timeout_ms: int = 20000, n: int = 3, bugs: frozenset[str] = frozenset()
) -> ObligationResult:
    """Every counting obligation's hypothesis has a model at N=n; each model's pre-state,
    decoded, satisfies the spec's invariants, and its ghost sums are the decoded state's
    counts (blocks in use, watchers pending)."""
    ws = counting.witness_goals(timeout_ms, n, bugs)
    problems: list[str] = []
    for w in ws:
        if w.status != "sat" or w.model is None:
            problems.append(f"{w.name} / {w.case}: hypothesis {w.status}")
            continue
        if w.ctx is None:
            continue
        cfg, s, _a, g, _r = w.ctx
        mdl = w.model
        ps = _decode_pre(mdl, cfg, s, n)
        bad = check_pool(ps)
        in_use = sum(1 for b in range(1, n) if ps.ref[b] > 0)
        pend = sum(len(v) for v in ps.pending.values())

        def ev(x: Any, mdl: z3.ModelRef = mdl) -> int:
            return int(mdl.eval(x, model_completion=True).as_long())

        if bad:
            problems.append(f"{w.name} / {w.case}: decoded state breaks {bad[0]}")
        elif ev(z3.Select(g.C, n)) != in_use or ev(z3.Select(g.P, n)) != pend:
            problems.append(f"{w.name} / {w.case}: ghost sums are not the decoded counts")
    return ObligationResult(
        f"H satisfiable (every-N counting, N={n})",
        "witness",
        "z3 induction",
        (),
        f"N={n}: one model per distinct hypothesis ({len(ws)}), pre-state decoded and checked, "
        "ghost sums equal to its counts",
        "witnessed" if not problems else "NOT-witnessed",
        sum(w.seconds for w in ws),
        replay="; ".join(problems[:3]),
    )


def _mutant_row(
    row: ObligationResult,
    bug: str,
    ask: Callable[[tuple[str, ...] | None, int, int], list[Any]],
    cases: tuple[str, ...] | None,
    timeout_ms: int,
    invariants: tuple[str, ...] = (),
) -> ObligationResult:
    """``row`` for a mutant that must make its every-N proof fail: ``ask(cases,
    timeout_ms, seed)`` the obligation's goals (refuting), first at ``cases`` then,
    without a refutation, at every case; the counterexample replayed on the buggy spec
    (:func:`_replay_step`). An unknown, or a refutation the replay does not confirm, is
    asked again at z3 seeds 1..3 (:func:`model.replay_ladder`; a proof does not change
    with the seed): z3's answer and model depend on the seed (some models are of a call
    the spec treats otherwise, and evict-first-ignored's query came back unknown in 3 s
    once, after the part's other queries)."""
    rule = row.invariants[0]

    def asked(limit: int, seed: int) -> Goal:
        # a rung's goals as one: refuted (its first refutation as ``ctx``), proved, unknown
        gs = ask(cases, limit, seed)
        if cases is not None and not any_refuted(gs):
            gs += ask(None, limit, seed)
        seconds = sum(g.seconds for g in gs)
        hit = next((g for g in gs if g.status == "refuted"), None)
        if hit is not None and hit.model is not None and hit.ctx is not None:
            return Goal(rule, hit.case, "refuted", seconds, hit.model, hit)
        return Goal(rule, "", "proved" if all_proved(gs) else "unknown", seconds)

    def judge(g: Goal) -> tuple[list[str], str]:
        cfg, s, a = g.ctx.ctx[:3]
        trace, verdict = _replay_step(bug, rule, cfg, s, a, g.model, invariants)
        return [f"case: {g.case}", *trace], verdict

    found, last, dt = replay_ladder(asked, judge, timeout_ms, 4, stop_proved=True)
    row.seconds += dt
    if found is not None:  # (the last counterexample replayed)
        row.trace, row.replay = found.trace, found.verdict
        row.status = "expected-refuted" if found.confirmed else "NOT-confirmed"
    else:
        row.status = "NOT-refuted" if last.goal.status == "proved" else "unknown"
    return row


def run_counting_mutants(
    timeout_ms: int, which: dict[str, tuple[str, tuple[str, ...]]] | None = None
) -> list[ObligationResult]:
    """Each mutant must make its count's proof fail (:func:`_mutant_row`)."""
    rows = []
    for bug, (part, cases) in (COUNTING_MUTANTS if which is None else which).items():
        row = ObligationResult(
            f"S and T => {part} (ghost sums) [{bug}]",
            "mutant",
            "z3 induction",
            (part,),
            "every N>=1",
            "",
            0.0,
        )

        def ask(
            cs: tuple[str, ...] | None, limit: int, seed: int, part: str = part, bug: str = bug
        ) -> Any:
            return counting.goals((part,), cs, frozenset([bug]), limit, True, seed)

        rows.append(_mutant_row(row, bug, ask, cases, timeout_ms, (part,)))
    return rows


def _replay_step(
    bug: str,
    rule: str,
    cfg: Any,
    s: Any,
    a: Any,
    mdl: z3.ModelRef,
    invariants: tuple[str, ...] = (),
) -> tuple[list[str], str]:
    """The counterexample's pre-state and call, decoded; the call replayed on the buggy
    spec. With ``invariants``: "confirmed" if it breaks one of them there; without: if
    its result or state differs from the semantics' (:func:`_replay_ops`)."""
    N = int(mdl.eval(cfg.dom.N, model_completion=True).as_long())
    ps = _decode_pre(mdl, cfg, s, N)
    op = to_op(read_args(mdl, a), N)
    trace = [f"state: N={N} {ps.describe()}", repr(op)]
    pre_bad = check_pool(ps)
    if pre_bad:
        return trace, f"decoded state already violates: {pre_bad[0]}"
    w = world_class(bug).from_state(bug, ps)
    if not invariants:
        return trace, _replay_ops(w, rule, [op])
    w.apply(op)
    post_bad = [v for v in check_pool(w.pools[0]) if v.invariant in invariants]
    return trace, (f"confirmed: {post_bad[0]}" if post_bad else "NOT confirmed by replay")


# -- the step rules for every N ----------------------------------------------------------------

STEPRULE_BOUNDS = "every N>=1, every n, lists<=2 keys=2 watchers=2"

# each rule's mutant: its counterexample is decoded and replayed on the buggy spec
STEPRULE_MUTANTS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "lifo-handout": ("ORD-HANDOUT", None),
    "front-reversed": ("ORD-RELEASE", None),
    "evict-first-ignored": ("ORD-RELEASE", None),
    "unpin-reversed": ("ORD-UNPIN", None),
    "watcher-kept": ("WATCH-FIRE", ("GetNewBlocks",)),
    "free-partial-on-refusal": ("ERR-ATOMIC", ("FreeBlocks",)),
    "reset-ignores-use": ("RES-RESET", None),
    "numfree-counts-null": ("RES-NUMFREE", None),
}


def run_steprules(timeout_ms: int) -> list[ObligationResult]:
    """Each rule of ``spec/rules.py`` for every N (:mod:`steprules`), one row per rule;
    a rule that cannot be stated for every N gets a row that says so ("fixed-N-only")."""
    rows = _goal_rows(
        steprules.goals(timeout_ms=timeout_ms),
        steprules.RULES,
        "S and T => {}",
        f"{STEPRULE_BOUNDS}; {{}} queries",
    )
    for rule, why in steprules.FIXED_N_ONLY.items():
        rows.append(
            ObligationResult(
                f"{rule} for every N", "scope", "z3 induction", (rule,), why, "fixed-N-only", 0.0
            )
        )
    return rows


def steprules_witness_row(
    timeout_ms: int = 20000, n: int = 3, bugs: frozenset[str] = frozenset()
) -> ObligationResult:
    """Every every-N rule's hypothesis has a model at N=n whose pre-state, decoded,
    satisfies the spec's invariants."""
    ws = steprules.witness_goals(timeout_ms, n, bugs)
    problems: list[str] = []
    for w in ws:
        if w.status != "sat" or w.model is None:
            problems.append(f"{w.name} / {w.case}: hypothesis {w.status}")
            continue
        cfg, s, _a, _r = w.ctx
        bad = check_pool(_decode_pre(w.model, cfg, s, n))
        if bad:
            problems.append(f"{w.name} / {w.case}: decoded state breaks {bad[0]}")
    return ObligationResult(
        f"H satisfiable (every-N rules, N={n})",
        "witness",
        "z3 induction",
        (),
        f"N={n}: one model per hypothesis ({len(ws)}), pre-state decoded and checked",
        "witnessed" if not problems else "NOT-witnessed",
        sum(w.seconds for w in ws),
        replay="; ".join(problems[:3]),
    )


def run_steprule_mutants(
    timeout_ms: int, which: dict[str, tuple[str, tuple[str, ...] | None]] | None = None
) -> list[ObligationResult]:
    """Each rule's mutant must make its proof fail (:func:`_mutant_row`)."""
    rows = []
    for bug, (rule, cases) in (STEPRULE_MUTANTS if which is None else which).items():
        row = ObligationResult(
            f"S and T => {rule} [{bug}]", "mutant", "z3 induction", (rule,), "every N>=1", "", 0.0
        )

        def ask(
            cs: tuple[str, ...] | None, limit: int, seed: int, rule: str = rule, bug: str = bug
        ) -> Any:
            return steprules.goals((rule,), cs, frozenset([bug]), limit, True, seed)

        rows.append(_mutant_row(row, bug, ask, cases, timeout_ms))
    return rows


def run_every_n_counts_and_rules(timeout_ms: int, cvc5: bool) -> list[ObligationResult]:
    """The counts (:func:`run_counting`) and the rules (:func:`run_steprules`) for every N,
    their witnesses, cvc5 on their proved queries, and their mutants. ``run`` calls it
    after every other every-N query of its part: those are sensitive to what the process
    built before them, and were measured without these."""
    with recording() as rec:
        rows = run_counting(timeout_ms) + run_steprules(timeout_ms)
    rows += [counting_witness_row(), steprules_witness_row()]
    if cvc5:
        # (deep only: case by case too, for ORD-RELEASE's and ORD-UNPIN's queries)
        rows.append(cvc5_recorded_row("the every-N counts and rules", rec, cases=True))
    rows += run_counting_mutants(timeout_ms // 2) + run_steprule_mutants(timeout_ms // 2)
    return rows


# -- fixed-N induction -----------------------------------------------------------------------

FIXEDN_TECHNIQUE = "z3 induction (fixed N)"


def run_eventseq(
    ns: tuple[int, ...],
    timeout_ms: int,
    mutants: tuple[str, ...] | None,
    nested: tuple[int, ...] = (),
    cvc5_ns: tuple[int, ...] = (),
) -> list[ObligationResult]:
    """The event log as a sequence and the watchers' firing point, proved for every k at
    each N of ``ns``, a call nested in a firing at each N of ``nested``; the mutants
    refuted at N=3 and replayed (:mod:`.eventseq`). At each N of ``cvc5_ns`` (of those
    run) cvc5 re-checks every query z3 proved (:func:`eventseq.cvc5_row`)."""
    kept: dict[int, list[Goal]] = {}
    rows = [ObligationResult(**r) for r in eventseq.rows(ns, timeout_ms, kept)]
    rows += [ObligationResult(**r) for r in eventseq.nested_rows(nested, timeout_ms, kept)]
    if cvc5_ns:
        mine = {n: gs for n, gs in kept.items() if n in cvc5_ns}
        rows.append(ObligationResult(**eventseq.cvc5_row(mine, QUANTIFIED_CVC5_MS)))
    rows += [ObligationResult(**r) for r in eventseq.mutant_rows(3, timeout_ms // 2, mutants)]
    return rows


SPACER_TECHNIQUE = "z3 Spacer (fixed N)"
SPACER_LABEL = "Spacer, no hand lemma"
"""What a Spacer cell says besides its N: every k, found by the engine on its own."""

SPACER_MUTANTS: tuple[tuple[str, str], ...] = (
    ("touch-no-remove", "INV-FREE"),
    ("lifo-handout", "ORD-HANDOUT"),
)
"""Seeded bugs Spacer must refute (mutant, the obligation it breaks), at N=3: a state
invariant and a step rule, so that both kinds of query are shown able to fail."""


def _spacer_bounds(n: int) -> str:
    return f"N={n}, every k, lists<=2 keys=2 watchers=2, no hand lemma"


def run_spacer(
    plan: tuple[tuple[int, tuple[str, ...]], ...],
    timeout_s: float,
    split: bool = False,
    mutant_n: int = 3,
    certify: bool = False,
) -> list[ObligationResult]:
    """Spacer, no hand lemma: for each ``(N, names)`` of ``plan``, the obligations
    ``names`` (of :data:`spacer.OBLIGATIONS`: the fixed-N induction's, less its two ghost
    conjuncts) as one query on their conjunction (Spacer shares its lemmas between them:
    at N=4, 35 s together against 107 s one by one), or with ``split`` one query each.
    Each query runs in a child process killed at ``timeout_s`` (a timeout is a failure,
    never a proof). Then each of :data:`SPACER_MUTANTS` at N=``mutant_n``, which must
    be refuted. With ``certify``, the invariant behind each proved answer is checked by
    z3 and cvc5 (:mod:`.cvc5certs`), in one row more."""
    rows = []
    certs: list[cvc5certs.Certified] = []
    t0 = time.perf_counter()
    for n, names in plan:
        if split:
            answers = [
                a
                for name in names
                for a in spacer.check_isolated(
                    n, (name,), timeout_s=timeout_s, certify=certify
                ).values()
            ]
        else:
            answers = list(
                spacer.check_isolated(
                    n, names, timeout_s=timeout_s, together=True, certify=certify
                ).values()
            )
        what = spacer.group_name(names)
        for ans in answers:
            together = ans.name == spacer.ALL
            certs.append((n, what if together else ans.name, ans.status, ans.cert))
            rows.append(
                ObligationResult(
                    f"{what if together else ans.name} (Spacer, N={n})",
                    "spacer",
                    SPACER_TECHNIQUE,
                    names if together else (ans.name,),
                    _spacer_bounds(n),
                    ans.status,
                    ans.seconds,
                    replay=ans.detail or f"CPU {ans.cpu:.1f} s",
                )
            )
    if certify:
        rows.append(ObligationResult(**cvc5certs.spacer_row(certs, time.perf_counter() - t0)))
    for bug, name in SPACER_MUTANTS:
        ((ans),) = spacer.check_isolated(
            mutant_n, (name,), frozenset([bug]), timeout_s=timeout_s
        ).values()
        rows.append(
            ObligationResult(
                f"{name} [{bug}]",
                "mutant",
                SPACER_TECHNIQUE,
                (name,),
                f"N={mutant_n}",
                "expected-refuted" if ans.status == "refuted" else f"NOT-refuted ({ans.status})",
                ans.seconds,
                replay=ans.detail,
            )
        )
    return rows


def _fixedn_bounds(n: int) -> str:
    return f"N={n}, every k, lists<=2 keys=2 watchers=2"


def run_fixedn(
    ns: tuple[int, ...], timeout_ms: int, cvc5_ns: tuple[int, ...] = ()
) -> list[ObligationResult]:
    """At each N: init and step of every obligation, and the hypothesis's witnesses; at
    each N of ``cvc5_ns``, every query z3 proved is exported and re-checked by cvc5."""
    rows: list[ObligationResult] = []
    for n in ns:
        inits = {g.name: g for g in fixedn.init_goals(n)}
        st = fixedn.build(n)
        by: dict[str, list[Goal]] = {}
        every: list[Goal] = list(inits.values())
        for g in fixedn.step_goals(st, timeout_ms=timeout_ms):
            by.setdefault(g.name, []).append(g)
            every.append(g)
        for name, gs in by.items():
            if name in inits:
                gs = [inits[name], *gs]
            status, bad = goals_status(gs)
            how = (
                f"lemma from {fixedn.LEMMAS[name]}"
                if name in fixedn.LEMMAS
                else f"{sum(g.case == 'step' for g in gs)} cases"
            )
            note = "; ".join(f"{g.case} {g.op} ({g.status})" for g in bad)
            rows.append(
                ObligationResult(
                    name,
                    "fixed-N",
                    FIXEDN_TECHNIQUE,
                    _inv_of(name),
                    f"{_fixedn_bounds(n)} ({how})",
                    status,
                    sum(g.seconds for g in gs),
                    replay=("not proved: " + note) if note else "",
                )
            )
        rows.append(_witness_row(st, n))
        if n in cvc5_ns:
            rows.append(_cvc5_row(n, [g for g in every if g.status == "proved"], timeout_ms))
    return rows


def _cvc5_row(n: int, proved: list[Goal], timeout_ms: int) -> ObligationResult:
    """cvc5 on the SMT-LIB 2 text of every query z3 proved at N=n (each must be unsat),
    and on one query z3 refutes (a mutant's step, which must be sat: the check can fail)."""
    t0 = time.perf_counter()
    verdicts: dict[str, int] = {}
    problems: list[str] = []
    for g in proved:
        for q in g.all_queries():
            v, _ = smtlib.cvc5_check(smtlib.to_smt2(q), timeout_ms)
            verdicts[v] = verdicts.get(v, 0) + 1
            if v != "unsat":
                problems.append(f"{g.name} {g.case} {g.op}: cvc5 says {v}")
    # (at N=1 there is no block to touch: the probe runs on 2 blocks)
    bad = fixedn.build(max(n, 2), bugs=frozenset(["touch-no-remove"]))
    (probe,) = fixedn.step_goals(bad, ("INV-FREE",), timeout_ms, ("Touch",), direct=True)
    pv, _ = smtlib.cvc5_check(smtlib.to_smt2(probe.query), timeout_ms)
    if probe.status != "refuted" or pv != "sat":
        problems.append(f"mutant probe touch-no-remove: z3 {probe.status}, cvc5 {pv}")
    disagree = any("says sat" in p for p in problems) or pv == "unsat"
    return ObligationResult(
        f"cvc5 re-checks N={n}",
        "second solver",
        "cvc5 (SMT-LIB 2 from z3)",
        (),
        f"N={n}: {len(proved)} proved queries "
        f"({', '.join(f'{c} {v}' for v, c in sorted(verdicts.items()))}); mutant probe {pv}",
        "agree" if not problems else ("disagree" if disagree else "unknown"),
        time.perf_counter() - t0,
        replay="; ".join(problems[:3]),
    )


QUANTIFIED_CVC5_MS = 5000
"""cvc5's time limit on a quantified query (every-N induction, refinement): an unknown is
reported as not confirmed, so a longer limit only buys more confirmations."""


def cvc5_recorded_row(
    label: str,
    records: list[Record],
    timeout_ms: int = QUANTIFIED_CVC5_MS,
    split: bool = True,
    cases: bool = False,
    leaves: int = 0,
    deep_leaves: bool = False,
) -> ObligationResult:
    """cvc5 on every query z3 proved among ``records`` (lambdas lifted to arrays with
    axioms, :func:`smtlib.to_smt2_lifted`). Grouped by obligation name: a name is
    *confirmed* when cvc5 says unsat on every query z3 proved under it. cvc5 ``sat`` on
    any of them is a disagreement and fails the row; ``unknown`` (its time limit, or
    quantifiers it gives up on) or text cvc5 refuses leaves the name *not confirmed*,
    listed by name in the row, never counted as confirmed. A query cvc5 leaves unknown
    whole is asked again split into its goal's conjuncts (:func:`smtlib.cvc5_confirm`:
    every part must be unsat); the row counts the queries confirmed that way. With
    ``cases``, an obligation :data:`cvc5cases.CASES` names is asked case by case instead
    (:func:`cvc5cases.confirm`), one still unknown case by case on its goal's ``ite``
    conditions (:func:`cvc5cases.confirm_ite`), and the row counts those too. With
    ``leaves`` (a number of cases), a query still unknown is asked case by case on its
    goal's branch conditions down to leaves (:func:`cvc5leaves.confirm`) before that.
    The row says where the names it leaves open are confirmed: in ``make proofs-deep``,
    case by case to leaves (with ``deep_leaves``, the deep profile asking this row so,
    when this run asks fewer cases), or case by case (a name :data:`cvc5cases.CASES`
    names, in a row asked without ``cases``)."""
    t0 = time.perf_counter()
    names: dict[str, list[str]] = {}
    n_split = n_cases = n_leaves = 0
    for name, hyp, goal, status in records:
        if status != "proved":
            continue
        by_case = cvc5cases.confirm(name, hyp, goal, timeout_ms) if cases else None
        v, how = by_case or smtlib.cvc5_confirm(hyp, goal, timeout_ms, split)
        if v == "unknown" and leaves and by_case is None:  # (on its branches, to leaves)
            v, how = cvc5leaves.confirm(hyp, goal, max_leaves=leaves) or (v, how)
            n_leaves += v == "unsat"
        if v == "unknown" and cases and by_case is None:  # (on its ite conditions)
            by_case = cvc5cases.confirm_ite(hyp, goal, timeout_ms)
            v, how = by_case or (v, how)
        leafy = how.startswith("leaves:")
        n_split += v == "unsat" and how != "whole" and by_case is None and not leafy
        n_cases += v == "unsat" and by_case is not None and how != "cases: 1"
        names.setdefault(name, []).append(v)
    confirmed = [n for n, vs in names.items() if all(v == "unsat" for v in vs)]
    disagree = [n for n, vs in names.items() if "sat" in vs]
    open_ = [
        f"{n} ({', '.join(sorted({v for v in vs if v != 'unsat'}))})"
        for n, vs in names.items()
        if n not in confirmed and n not in disagree
    ]
    status = (
        "disagree"
        if disagree
        else "not-run"
        if not names
        else "agree"
        if not open_
        else "partly-confirmed"
    )
    return ObligationResult(
        f"cvc5 re-checks {label}",
        "second solver",
        "cvc5 (SMT-LIB 2 from z3, lambdas lifted)",
        (),
        f"{label}: cvc5 confirms {len(confirmed)} of {len(names)} obligations z3 proved "
        f"({sum(len(v) for v in names.values())} queries, {timeout_ms // 1000} s each; "
        f"{n_split} confirmed split into conjuncts"
        + (f", {n_cases} case by case" if cases else "")
        + (f", {n_leaves} case by case to leaves (<= {leaves} cases)" if leaves else "")
        + ")"
        + (f"; NOT confirmed: {len(open_)}" if open_ else "")
        + (
            f" (make proofs-deep confirms them case by case to leaves, <= "
            f"{cvc5leaves.MAX_LEAVES} cases: cvc5leaves.py)"
            if open_ and deep_leaves and leaves < cvc5leaves.MAX_LEAVES and not disagree
            else ""
        )
        + (
            f" (make proofs-deep confirms {', '.join(deep)} case by case, cvc5cases.py)"
            if (deep := [n for n in names if n in cvc5cases.CASES and n not in confirmed])
            and not (cases or disagree)
            else ""
        ),
        status,
        time.perf_counter() - t0,
        replay="; ".join(
            ([f"cvc5 says sat (disagrees) on: {', '.join(disagree)}"] if disagree else [])
            + ([f"not confirmed: {', '.join(open_)}"] if open_ else [])
        ),
    )


def _witness_row(st: fixedn.Step, n: int) -> ObligationResult:
    """Every case's hypothesis is satisfiable, and its model is a state the spec accepts."""
    ws = fixedn.witnesses(st)
    problems: list[str] = []
    for w in ws:
        if w.status != "sat" or w.model is None:
            problems.append(f"{w.op}: hypothesis {w.status}")
            continue
        ps, op = fixedn.decode(st, w.model)
        pre = check_pool(ps)
        if pre:
            problems.append(f"{w.op}: decoded state breaks {pre[0]}")
            continue
        world = World([ps.copy()], [True])
        world.apply(op)
        post = check_pool(world.pools[0])
        if post:
            problems.append(f"{w.op}: {op!r} on the spec breaks {post[0]}")
    seconds = sum(w.seconds for w in ws)
    for name in fixedn.LEMMAS:  # the lemma's hypothesis: a state it claims INV-X of
        lw, ps = fixedn.lemma_witness(st, name)
        seconds += lw.seconds
        if ps is None:
            problems.append(f"{lw.op or name}: hypothesis {lw.status}")
        elif bad := [v for v in check_pool(ps) if v.invariant == name]:
            problems.append(f"{lw.op}: the decoded state breaks {bad[0]}")
    total = len(ws) + len(fixedn.LEMMAS)
    return ObligationResult(
        f"H satisfiable at N={n}",
        "witness",
        FIXEDN_TECHNIQUE,
        (),
        f"N={n}: {total - len(problems)}/{total} hypotheses (a call of each kind, and "
        f"the lemma's), decoded, the calls replayed on the spec",
        "witnessed" if not problems else "NOT-witnessed",
        seconds,
        replay="; ".join(problems[:3]),
    )


def run_fixedn_mutants(
    n: int,
    which: tuple[str, ...] | None,
    parts: tuple[str, ...] | None = None,
    timeout_ms: int = 60000,
    split: bool = False,
) -> list[ObligationResult]:
    """Each mutant's claimed obligations, refuted by the step at N=n, the pre-state decoded
    (it must satisfy the spec's invariants) and the call replayed on the buggy spec."""
    rows = []
    for m in MUTANTS:
        if which is not None and m.name not in which:
            continue
        claims = parts or tuple(
            dict.fromkeys([*m.bmc, *(p for p in m.induction if p not in STRONG_PARTS)])
        )
        st = fixedn.build(n, bugs=frozenset([m.name]))
        for ob in claims:
            ops = MUTANT_OPS.get(m.name, OPS)
            ops = (*ops, *(o for o in OPS if o not in ops))
            row = _fixedn_mutant_row(st, m.name, ob, ops, n, timeout_ms, split)
            rows.append(row)
    return rows


def _fixedn_mutant_row(
    st: fixedn.Step,
    bug: str,
    ob: str,
    ops: tuple[str, ...],
    n: int,
    timeout_ms: int,
    split: bool = False,
) -> ObligationResult:
    """Refute ``ob`` on the buggy step; a refutation the spec does not confirm is retried
    (up to 3 times) with that call excluded, as a counterexample search would."""
    tried: list[z3.BoolRef] = []
    row = ObligationResult(
        f"{ob} [{bug}]", "mutant", FIXEDN_TECHNIQUE, _inv_of(ob), _fixedn_bounds(n), "", 0.0
    )
    for _ in range(3):
        gs: list[Goal] = []
        for op in ops:
            # (by default the whole step, not split into conjuncts: split, the first
            # conjunct refuted for unpin-append-always gave a call the buggy spec does not
            # break INV-FREE on, three times over; whole, z3's first model is confirmed)
            gs += fixedn.step_goals(
                st, (ob,), timeout_ms, (op,), direct=True, extra=tuple(tried), split=split
            )
            if gs[-1].status == "refuted":
                break
        row.seconds += sum(g.seconds for g in gs)
        hit = gs[-1] if gs and gs[-1].status == "refuted" else None
        if hit is None or hit.model is None:
            if not row.status:
                row.status = "NOT-refuted" if all(g.status == "proved" for g in gs) else "unknown"
            return row
        ps, op = fixedn.decode(st, hit.model)
        row.trace = [f"state: {ps.describe()}", repr(op)]
        pre = check_pool(ps)
        if pre:
            row.status, row.replay = "NOT-confirmed", f"decoded state breaks {pre[0]}"
        else:
            row.replay = _replay_ops(world_class(bug).from_state(bug, ps), ob, [op])
            row.status = (
                "expected-refuted" if row.replay.startswith("confirmed") else "NOT-confirmed"
            )
        if row.status == "expected-refuted":
            return row
        a, mdl = st.a, hit.model
        tried.append(
            z3.Not(z3.And([x == mdl.eval(x, model_completion=True) for x in [a.m, *a.e, a.n]]))
        )
    return row


# -- refinement ------------------------------------------------------------------------------


def run_refinement(timeout_ms: int) -> list[ObligationResult]:
    rows = []
    for r in refinement.single_ops(timeout_ms=timeout_ms) + refinement.n_block_ops(
        timeout_ms=timeout_ms
    ):
        tech = "every list" if r.step == "whole" else f"loop invariant: {r.step}"
        rows.append(
            ObligationResult(
                f"{r.op} refines seq ({r.step})",
                "refinement",
                "refinement",
                ("INV-LIST",),
                tech,
                r.status,
                r.seconds,
            )
        )
    return rows


def run_refinement_mutants(timeout_ms: int) -> list[ObligationResult]:
    rows = []
    for bug, (op, idea) in refinement.REF_MUTANTS.items():
        st, dt, why, chosen = refinement.concrete_refute(bug, timeout_ms)
        # z3's counterexample, replayed without z3 on a Python list with the same bug.
        replayed = listreplay.confirm(bug, chosen) if st == "refuted" else ""
        status = (
            ("expected-refuted" if replayed.startswith("confirmed") else "NOT-confirmed")
            if st == "refuted"
            else ("NOT-refuted" if st == "proved" else "unknown")
        )
        rows.append(
            ObligationResult(
                f"{op} refines seq [{bug}]",
                "mutant",
                "refinement",
                ("INV-LIST",),
                idea,
                status,
                dt,
                trace=[why] if why else [],
                replay=replayed,
            )
        )
    return rows


# -- the free queue's own source --------------------------------------------------------------

SOURCE_TECHNIQUE = "refinement (from source)"

SourceReplay = Callable[[pyrefine.Case, tuple[pyrefine.Patch, ...]], str]
"""Runs a decoded counterexample on the patched queue class and on the real one; returns
"confirmed: ..." when the patched class disagrees with the spec and the real one agrees.
The proofs import no ``impl``: the caller that may (``kvpool.verify``, the tests) passes it."""


def run_source(
    timeout_ms: int = 30000,
    mutants: dict[str, tuple[str, tuple[pyrefine.Patch, ...]]] | None = None,
    replay: SourceReplay | None = None,
    source: str | None = None,
) -> list[ObligationResult]:
    """``impl/free_queue.py`` refines the spec's sequence, proved from its source text: one
    row per method (labelled with the lists and groups it is proved for), and one mutant
    row per source mutant (default: :data:`pyrefine.SOURCE_MUTANTS`), each of which must
    make the proof fail on a small concrete list; with ``replay`` the counterexample must
    also be confirmed on the patched class. ``source`` replaces the real file (a test's
    seeded bug)."""
    rows: list[ObligationResult] = []
    src = pyrefine.real_source() if source is None else source
    try:
        what = {
            m: ch.what
            for m, ch in pyrefine.checks(Translation(src, "FreeKVCacheBlockQueue")).items()
        }
        results = pyrefine.prove(src, timeout_ms=timeout_ms)
    except Unsupported as exc:
        return [
            ObligationResult(
                "impl/free_queue.py refines seq",
                "refinement",
                SOURCE_TECHNIQUE,
                ("INV-LIST",),
                "the source does not translate",
                "unknown",
                0.0,
                replay=str(exc),
            )
        ]
    for meth in pyrefine.METHODS:
        rs = [r for r in results if r.op == meth]
        status, bad = goals_status(rs)
        rows.append(
            ObligationResult(
                f"FreeKVCacheBlockQueue.{meth} refines seq",
                "refinement",
                SOURCE_TECHNIQUE,
                ("INV-LIST",),
                f"{what[meth]} ({len(rs)} obligations)",
                status,
                sum(r.seconds for r in rs),
                replay="; ".join(f"not proved: {r.step} ({r.status})" for r in bad),
            )
        )
    for name, (idea, patches) in (pyrefine.SOURCE_MUTANTS if mutants is None else mutants).items():
        rows.append(_source_mutant_row(name, idea, patches, timeout_ms, replay))
    return rows


def _source_mutant_row(
    name: str,
    idea: str,
    patches: tuple[pyrefine.Patch, ...],
    timeout_ms: int,
    replay: SourceReplay | None,
) -> ObligationResult:
    row = ObligationResult(
        f"free_queue.py refines seq [{name}]",
        "mutant",
        SOURCE_TECHNIQUE,
        ("INV-LIST",),
        idea,
        "",
        0.0,
    )
    t0 = time.perf_counter()
    try:
        with named(f"mutant: {name}"):
            hit, case = pyrefine.refute(patches, timeout_ms)
    except pyrefine.PatchDoesNotApply as exc:
        row.status, row.replay = "not-run", f"the mutant does not apply: {exc}"
        return row
    row.seconds = time.perf_counter() - t0
    if hit is None or case is None:
        row.status = "NOT-refuted"
        return row
    row.trace = [str(case)]
    if replay is None:
        row.status = "expected-refuted"
        row.replay = "refuted by z3 (not replayed here: proofs import no impl)"
        return row
    row.replay = replay(case, patches)
    row.status = "expected-refuted" if row.replay.startswith("confirmed") else "NOT-confirmed"
    return row


# -- lists of symbolic length ------------------------------------------------------------------


def run_symlists(what: tuple[str, ...], timeout_ms: int) -> list[ObligationResult]:
    """The list-taking calls as loops over a list of symbolic length (:mod:`symlists`):
    ``what`` names the pieces run ("proofs", "agreement", "witnesses", "long-list
    mutant", "mutants": the every-N induction's mutants of a list call)."""
    out: list[dict[str, Any]] = []
    if "proofs" in what:
        out += symlists.proof_rows(timeout_ms)
        out += symsorts.rows(timeout_ms, "mutants" in what, "sorted-state" in what)
    if "agreement" in what:
        out.append(symlists.agreement_row(timeout_ms))
    if "witnesses" in what:
        out.append(symlists.witness_row())
    bugs = [b for b in symlists.LIST_MUTANTS if "mutants" in what or b == symlists.LONG_LIST_MUTANT]
    if "mutants" in what or "long-list mutant" in what:
        out += symlists.mutant_rows(timeout_ms // 4, tuple(bugs))
    if "mutants" in what:
        out += symlists.rule_mutant_rows(timeout_ms // 4)
        out.append(symlists.watch_mutant_row(timeout_ms // 4))
        out.append(symlists.atomic_mutant_row(timeout_ms // 4))
    return [ObligationResult(**r) for r in out]


# -- witnesses: no proof rests on a hypothesis nothing satisfies ------------------------------


def witness_row(
    label: str, records: list[Record], replay: witnesses.Replay | None
) -> ObligationResult:
    """A model of every distinct hypothesis of the proved queries in ``records`` (one
    part's), decoded and checked without z3 (:mod:`kvpool.proofs.witnesses`); a
    hypothesis with no model (a vacuous proof) fails the row."""
    if label == "every-N induction":
        decode, bounds = witnesses.induction_decoder()
        on = "the spec"
    elif label == "refinement (transcribed)":
        decode, bounds = witnesses.transcribed_decoder(replay)
        on = "the queue class"
    else:
        decode, bounds = witnesses.source_decoder(replay)
        on = "the queue class"
    return ObligationResult(
        **witnesses.summary(label, witnesses.witness_all(records, bounds, decode), on)
    )


# -- everything ------------------------------------------------------------------------------


PARTS = (
    "bmc-induction",
    "refinement",
    "source",
    "differential",
    "fixedn",
    "spacer",
    "twopool",
    "multikey",
    "symlists",
    "pool-source",
)
"""The pieces of a profile that can run in separate processes (``make verify`` runs
them side by side). BMC and the every-N induction share one: the induction's quantified
queries were measured after BMC in the same process, and they are sensitive to what the
process built before them."""


def run(
    profile: str = "default",
    part: str | None = None,
    source_mutants: dict[str, tuple[str, tuple[pyrefine.Patch, ...]]] | None = None,
    source_replay: SourceReplay | None = None,
    queue_replay: witnesses.Replay | None = None,
    pool_replay: PoolReplay | None = None,
) -> list[ObligationResult]:
    """Every obligation of ``profile`` ("fast", "default" or "deep"), or of one of its
    :data:`PARTS` (the same rows, in the same order within the part). ``source_mutants``
    and ``source_replay``: the "source" part's mutants (default: the proof's own) and the
    replay of their counterexamples (see :func:`run_source`). ``queue_replay`` runs a
    refinement hypothesis's decoded witness on the real queue class (the proofs import
    no ``impl``: without it the witnesses are decoded and checked, not replayed)."""
    if part is not None and part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    p = PROFILES[profile]

    def want(name: str) -> bool:
        return part is None or part == name

    rows: list[ObligationResult] = []
    n, k, M = p["bmc"]
    if want("bmc-induction"):
        rows += run_bmc(n, k, M)
        # the every-N induction's quantified queries are sensitive to what the process
        # built before them (z3 orders terms by id): they run before the fixed-N ones, as
        # they did when they were measured (S => INV-FREE went unknown at 60 s when run
        # after them)
        with recording() as rec:
            rows += run_induction(p["ind_timeout"])
        rows.append(witness_row("every-N induction", rec, None))
        if p["cvc5_quantified"]:
            rows.append(
                cvc5_recorded_row(
                    "the every-N induction",
                    rec,
                    split="bmc-induction" in p["cvc5_split"],
                    cases=p["cvc5_cases"],
                    # (make verify: PERM's FreeBlocks step, unknown whole and split, is
                    # asked to leaves; deep asks it by cvc5cases' atoms first)
                    leaves=p["cvc5_leaves"],
                )
            )
    if want("refinement"):
        with recording() as rec:
            rows += run_refinement(p["ind_timeout"] // 2)
        rows.append(witness_row("refinement (transcribed)", rec, queue_replay))
        if p["cvc5_quantified"]:
            rows.append(
                cvc5_recorded_row(
                    "the list refinement (transcribed)",
                    rec,
                    split="refinement" in p["cvc5_split"],
                )
            )
    if want("differential"):
        rows += [ObligationResult(**r) for r in differential.rows(p["diff"])]
        if p["diff_mutants"]:
            rows += [ObligationResult(**r) for r in differential.mutant_rows(p["diff"])]
    if want("bmc-induction"):
        mn, mk, mM = p["mut_bmc"]
        which = (
            None
            if p["all_mutants"]
            else ("no-underflow-check", "touch-null", "lifo-handout", "watcher-kept")
        )
        rows += run_bmc_mutants(mn, mk, mM, which)
        rows += run_induction_mutants(p["ind_timeout"] // 2)
        rows += run_every_n_counts_and_rules(
            p["ind_timeout"], p["cvc5_quantified"] and p["cvc5_counts"]
        )
        if p["bmc_cvc5"]:  # (BMC's unrolled queries, in a child: cvc5certs.py)
            rows.append(ObligationResult(**cvc5certs.bmc_isolated(*p["bmc_cvc5"])))
    if want("refinement"):
        rows += run_refinement_mutants(p["ind_timeout"] // 4)
    if want("source"):
        with recording() as rec:
            rows += run_source(p["ind_timeout"] // 2, source_mutants, source_replay)
        # (the mutants' queries are not proofs: only the real source's proved ones)
        proofs = [r for r in rec if not r[0].startswith("mutant:")]
        rows.append(witness_row("free_queue.py from source", proofs, queue_replay))
        if p["cvc5_quantified"]:
            rows.append(
                cvc5_recorded_row(
                    "free_queue.py from source",
                    proofs,
                    split="source" in p["cvc5_split"],
                    cases=p["cvc5_cases"],
                    leaves=p["cvc5_leaves"],
                    deep_leaves=True,
                )
            )
    if want("fixedn"):
        rows += run_fixedn(p["fixedn"], p["fixedn_timeout"], p["cvc5"])
        rows += run_fixedn_mutants(4, p["fixedn_mutants"])
        top = max(p["fixedn"])
        if top > 4:
            # the largest N's proof, split as it is proved, refutes a mutant too
            rows += run_fixedn_mutants(top, ("lifo-handout",), ("ORD-HANDOUT",), split=True)
        rows += run_eventseq(
            p["eventseq"],
            p["fixedn_timeout"],
            p["eventseq_mutants"],
            p["eventseq_nested"],
            p["cvc5_eventseq"],
        )
    if want("spacer") and p["spacer"]:
        rows += run_spacer(p["spacer"], p["spacer_timeout"], certify=p["spacer_cvc5"])
    if want("twopool"):
        with cvc5more.recorder("twopool" in p["cvc5_more"], "two pools") as rec:
            rows += [
                ObligationResult(**r)
                for r in twopool.all_rows(
                    p["twopool"],
                    p["fixedn_timeout"] // 2,
                    p["twopool_bmc"],
                    p["twopool_diff"],
                    p["twopool_bmc_proofs"],
                    p["twopool_every_n"],
                )
            ]
        # (as multikey's below: a query cvc5 leaves unknown alone, at every limit or after
        # every step, is asked case by case on its goal's branches, cvc5leaves.confirm; the
        # first whole deep run (12-06) left INV-WATCH / UnpinBlocks at 6+6 and the every-N PERM /
        # FreeBlocks so, the latter in up to 335 cases)
        two = functools.partial(cvc5leaves.confirm, max_leaves=cvc5leaves.TWO_POOL_LEAVES)
        more = cvc5more.rows("twopool", rec, p["cvc5_more"], two)
        rows += [ObligationResult(**r) for r in more]
        if p["twopool_n"]:  # (twopooln.py: two pools' counts and rules, for every N)
            with cvc5more.recorder("twopooln" in p["cvc5_more"], "two pools, every N") as rec:
                rows += [
                    ObligationResult(**r)
                    for r in twopooln.all_rows(p["ind_timeout"], p["twopool_n"])
                ]
            more = cvc5more.rows("twopooln", rec, p["cvc5_more"], two)
            rows += [ObligationResult(**r) for r in more]
        if p["twopool_lists"]:  # (twolists.py: the POOL_RULES with lists of any length)
            with cvc5more.recorder("twolists" in p["cvc5_more"], "two pools, list loops") as rec:
                rows += [
                    ObligationResult(**r)
                    for r in twolists.all_rows(p["ind_timeout"], p["twopool_lists"])
                ]
            more = cvc5more.rows("twolists", rec, p["cvc5_more"], two)
            rows += [ObligationResult(**r) for r in more]
    if want("multikey"):  # blocks with several keys (multikey.py)
        with cvc5more.recorder("multikey" in p["cvc5_more"], "multi-key") as rec:
            rows += [ObligationResult(**r) for r in multikey.part_rows(p["multikey"])]
        # (a query cvc5 leaves unknown alone, at every limit: case by case on its goal's
        # branches, cvc5leaves.confirm; the deep run at 042c16b left INV-WATCH's step for
        # UnpinBlocks at N=6 so, unsat in 50 cases)
        more = cvc5more.rows("multikey", rec, p["cvc5_more"], cvc5leaves.confirm)
        rows += [ObligationResult(**r) for r in more]
    if want("symlists") and p["symlists"]:
        on = "symlists" in p["cvc5_more"] or "symsorts" in p["cvc5_more"]
        with cvc5more.recorder(on, "symlists") as rec:
            rows += run_symlists(p["symlists"], p["ind_timeout"])
        # (symsorts.py's queries, run inside symlists' part, are a cvc5 row of their own)
        for fam, recs in cvc5more.split_symsorts(rec).items():
            rows += [ObligationResult(**r) for r in cvc5more.rows(fam, recs, p["cvc5_more"])]
    if want("pool-source") and p["pool_source"]:
        with cvc5more.recorder("pool-source" in p["cvc5_more"], "pool source") as rec:
            rows += run_pool_source(2 * p["ind_timeout"], pool_replay=pool_replay)
        # (cvc5hot: the quantifier-free part, the relevant hypotheses, the list's shape)
        more = cvc5hot.rows("pool-source", rec, p["cvc5_more"], p["cvc5_jobs"])
        rows += [ObligationResult(**r) for r in more]
    if want("pool-source") and p["hot_source"]:
        with cvc5more.recorder("hot-source" in p["cvc5_more"], "hot source") as rec:
            rows += run_hot_source(p["hot_source"], 2 * p["ind_timeout"], pool_replay=pool_replay)
        rows += [
            ObligationResult(**r)
            for r in cvc5hot.rows("hot-source", rec, p["cvc5_more"], p["cvc5_jobs"])
        ]
    return rows


# -- impl/pool.py's hot paths, from their source ----------------------------------------------

POOL_SOURCE_KIND = "pool-source"

PoolReplay = Callable[[pypool.Case | pyhot.HotCase, tuple[pyrefine.Patch, ...]], str]
"""Runs a decoded counterexample on the patched pool class and on the real one (the
caller that may import ``impl`` passes it): "confirmed: ..." when only the patched one
disagrees with the spec."""


def _judge_pool_mutant(
    mrow: ObligationResult,
    case: Any,
    patches: tuple[pyrefine.Patch, ...],
    pool_replay: PoolReplay | None,
) -> None:
    """A pool-source mutant's row from z3's counterexample ``case`` (None: not refuted),
    replayed on the patched pool class when the caller can import ``impl``."""
    if case is None:
        mrow.status = "NOT-refuted"
    elif pool_replay is None:
        mrow.trace, mrow.status = [str(case)], "expected-refuted"
        mrow.replay = "refuted by z3 (not replayed here: proofs import no impl)"
    else:
        mrow.trace, mrow.replay = [str(case)], pool_replay(case, patches)
        ok = mrow.replay.startswith("confirmed")
        mrow.status = "expected-refuted" if ok else "NOT-confirmed"


def run_pool_source(
    timeout_ms: int = 120000,
    mutants: dict[str, tuple[str, tuple[pyrefine.Patch, ...]]] | None = None,
    pool_replay: PoolReplay | None = None,
    source: str | None = None,
) -> list[ObligationResult]:
    """``impl/pool.py``'s ``touch`` does the spec's step, proved from its source text
    (:mod:`kvpool.proofs.pypool`): one row for the queue contract it uses, one per
    method, one per mutant (default: :data:`pypool.POOL_MUTANTS`), which must be refuted
    on a small concrete pool (and, with ``pool_replay``, confirmed on the patched class).
    Its rows fill no column of the matrix: their kind is :data:`POOL_SOURCE_KIND`."""
    rows: list[ObligationResult] = []

    def row(name: str, bounds: str, status: str, dt: float, **kw: Any) -> ObligationResult:
        return ObligationResult(
            name,
            POOL_SOURCE_KIND,
            SOURCE_TECHNIQUE,
            ("INV-LIST", "INV-REF", "INV-FREE", "ERR-ATOMIC"),
            bounds,
            status,
            dt,
            **kw,
        )

    for r in pypool.prove_contracts(timeout_ms):
        rows.append(
            row("FreeKVCacheBlockQueue._remove meets touch's contract", r.step, r.status, r.seconds)
        )
    try:
        results = pypool.prove(source, timeout_ms)
    except Unsupported as exc:
        return [
            *rows,
            row(
                "BlockPool.touch does the spec's step",
                "the source does not translate",
                "unknown",
                0.0,
                replay=str(exc),
            ),
        ]
    for meth in pypool.METHODS:
        rs = [r for r in results if r.op == meth]
        status, bad = goals_status(rs)
        rows.append(
            row(
                f"BlockPool.{meth} does the spec's step, from source",
                f"{pypool.bounds_label()} ({len(rs)} obligations)",
                status,
                sum(r.seconds for r in rs),
                replay="; ".join(f"not proved: L={r.bound} {r.step} ({r.status})" for r in bad),
            )
        )
    for name, (idea, patches) in (pypool.POOL_MUTANTS if mutants is None else mutants).items():
        t0 = time.perf_counter()
        mrow = row(f"pool.py touch [{name}]", idea, "", 0.0)
        try:
            with named(f"mutant: {name}"):
                hit, case = pypool.refute(patches, timeout_ms // 4)
        except pyrefine.PatchDoesNotApply as exc:
            mrow.status, mrow.replay = "not-run", f"the mutant does not apply: {exc}"
            rows.append(mrow)
            continue
        mrow.seconds = time.perf_counter() - t0
        _judge_pool_mutant(mrow, None if hit is None else case, patches, pool_replay)
        rows.append(mrow)
    return rows


HOT_SOURCE_KIND = "hot-source"


def run_hot_source(
    methods: tuple[str, ...] = pyhot.METHODS,
    timeout_ms: int = 120000,
    mutants: dict[str, tuple[str, str, tuple[pyrefine.Patch, ...]]] | None = None,
    pool_replay: PoolReplay | None = None,
    source: str | None = None,
) -> list[ObligationResult]:
    """``impl/pool.py``'s ``methods`` (of :data:`pyhot.METHODS`) do the spec's step,
    proved from their source text (:mod:`kvpool.proofs.pyhot`): one row per method, one
    per mutant of those methods (default: :data:`pyhot.HOT_MUTANTS`), which must be
    refuted on a small concrete pool (and, with ``pool_replay``, confirmed on the patched
    class). Kind :data:`HOT_SOURCE_KIND`: a line of its own, no matrix column."""
    rows: list[ObligationResult] = []

    def row(name: str, bounds: str, status: str, dt: float, **kw: Any) -> ObligationResult:
        inv = ("INV-LIST", "INV-REF", "INV-FREE", "ERR-ATOMIC")
        return ObligationResult(
            name, HOT_SOURCE_KIND, SOURCE_TECHNIQUE, inv, bounds, status, dt, **kw
        )

    for meth in methods:
        try:
            rs = pyhot.prove((meth,), source, timeout_ms)
        except Unsupported as exc:
            rows.append(
                row(
                    f"BlockPool.{meth} does the spec's step, from source",
                    "the source does not translate",
                    "unknown",
                    0.0,
                    replay=str(exc),
                )
            )
            continue
        status, bad = goals_status(rs)
        rows.append(
            row(
                f"BlockPool.{meth} does the spec's step, from source",
                f"{pyhot.bounds_label(meth)} ({len(rs)} obligations)",
                status,
                sum(r.seconds for r in rs),
                replay="; ".join(f"not proved: L={r.bound} {r.step} ({r.status})" for r in bad),
            )
        )
    for name, (meth, idea, patches) in (pyhot.HOT_MUTANTS if mutants is None else mutants).items():
        if meth not in methods:
            continue
        t0 = time.perf_counter()
        mrow = row(f"pool.py {meth} [{name}]", idea, "", 0.0)
        try:
            with named(f"mutant: {name}"):
                _, case = pyhot.refute(meth, patches, timeout_ms // 4)
        except pyrefine.PatchDoesNotApply as exc:
            mrow.status, mrow.replay = "not-run", f"the mutant does not apply: {exc}"
            rows.append(mrow)
            continue
        mrow.seconds = time.perf_counter() - t0
        _judge_pool_mutant(mrow, case, patches, pool_replay)
        rows.append(mrow)
    return rows
