"""A second engine with no hand lemma: z3's Spacer (IC3/PDR over Horn clauses).

The finite reading's transition at a fixed N, unchanged, becomes Horn clauses over an
unknown relation ``Reach`` of states (``enable_caching`` and ``enable_kv_cache_events``
are part of the state: they never change):

* ``Reach(init)``;
* ``Reach(s) and domain(a) ==> Reach(T(s, a))``;
* a query: ``Reach(s) and not P(s)`` for a state obligation P (every INV-* in the spec's
  counting form, and RANK-BOUNDS), or ``Reach(s) and domain(a) and not P(s, a, r, T(s, a))``
  for a step rule P (ORD-*, WATCH-FIRE, ERR-ATOMIC, RES-*): the rule on one call from any
  reachable state.

Spacer answers ``unsat`` when it finds an inductive invariant that implies P on its own
(no LO-HI, no WATCH-PER-BLOCK: nothing from :mod:`kvpool.proofs.fixedn`), which proves P
for every k at that N; ``sat`` is a run that breaks P. Every obligation of the fixed-N
induction is stated here, except the induction's own two ghost conjuncts (LO-HI and
WATCH-PER-BLOCK), which are part of its hypothesis, not of the spec.

:func:`check` asks in the calling process; :func:`check_isolated` asks in a child process
that is killed at a hard timeout (Spacer's own ``timeout`` is checked only between its
steps, and one step can run for minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import z3  # type: ignore[import-untyped]

from . import cvc5certs, fixedn, props
from .model import (
    OPS,
    Args,
    Config,
    Finite,
    State,
    args_domain,
    fresh_args,
    fresh_state,
    initial,
    int_sort,
    transition,
)

HAND_LEMMAS = ("LO-HI", "WATCH-PER-BLOCK")
"""The fixed-N induction's own ghost conjuncts: Spacer is not given them (no hand lemma)."""

STATE_OBLIGATIONS = tuple(o for o in fixedn.STATE_OBLIGATIONS if o not in HAND_LEMMAS)
"""Queried on a reachable state: the fixed-N induction's, less its hand lemmas."""

STEP_OBLIGATIONS = fixedn.STEP_RULES
"""Queried on one call from a reachable state."""

OBLIGATIONS = STATE_OBLIGATIONS + STEP_OBLIGATIONS


def group_name(names: tuple[str, ...]) -> str:
    """How a dashboard or a report names a group of obligations asked together."""
    known = {
        OBLIGATIONS: "every obligation",
        STATE_OBLIGATIONS: "every state obligation",
        STEP_OBLIGATIONS: "every step rule",
    }
    return known.get(tuple(names), ", ".join(names))


ALL = "all"
"""The name of the one query on the conjunction of every obligation asked."""

OPTIONS: dict[str, Any] = {}
"""Spacer's and the rule transformer's options, as measured best (see docs/06-z3.md)."""


@dataclass(frozen=True)
class Answer:
    """Spacer's verdict on one obligation at one N."""

    name: str
    n: int
    status: str  # "proved" (unsat), "refuted" (sat), "unknown", "timeout" (killed)
    seconds: float
    detail: str = ""
    cpu: float = 0.0
    """The query's CPU seconds in its process (wall ``seconds`` grows with the machine's
    load; this much less)."""
    cert: list[list[str]] = field(default_factory=list)
    """With ``certify``: the invariant Spacer found, checked as three plain queries by z3
    and cvc5 (:mod:`.cvc5certs`; one :data:`cvc5certs.Verdict` each)."""


def _flat(s: State, flags: tuple[z3.BoolRef, z3.BoolRef]) -> list[z3.ExprRef]:
    out: list[z3.ExprRef] = []
    for f in fields(s):
        v = getattr(s, f.name)
        if v is None:
            continue
        if isinstance(v, list) and v and isinstance(v[0], list):
            for row in v:
                out += row
        elif isinstance(v, list):
            out += v
        else:
            out.append(v)
    return [*out, *flags]


def _args_vars(a: object) -> list[z3.ExprRef]:
    out: list[z3.ExprRef] = []
    for f in fields(a):  # type: ignore[arg-type]
        v = getattr(a, f.name)
        out += v if isinstance(v, list) else [v]
    return out


def check(
    n: int,
    names: tuple[str, ...] | None = None,
    bugs: frozenset[str] = frozenset(),
    timeout_ms: int = 150000,
    together: bool = False,
    options: dict[str, Any] | None = None,
    certify: bool = False,
    lose_invariant: bool = False,
    before_certs: Callable[[dict[str, Answer]], None] | None = None,
    drop_lemma: int | None = None,
) -> dict[str, Answer]:
    """Spacer's verdict on each obligation in ``names`` (default: :data:`OBLIGATIONS`) at
    N=n, one query each; with ``together``, one query on their conjunction (key
    :data:`ALL`). ``options``: Fixedpoint parameters (default :data:`OPTIONS`). With
    ``certify``, each proved answer's ``cert``: the invariant Spacer found, written out
    and checked by z3 and cvc5 (:mod:`.cvc5certs`), after every query was asked
    (``before_certs`` gets the answers then, and again with each certificate's verdicts
    so far as they come: :func:`cvc5certs.confirm_clauses`, conjuncts it leaves unknown
    asked case by case on the call's kind, :func:`call_cases`); ``lose_invariant`` is
    the seeded bug of that check's test (the invariant written out as ``true``),
    ``drop_lemma`` another (the invariant's lemma of that index left out: no longer
    inductive when the others need it, and then ``Inv and T => Inv'`` is sat)."""
    if n < 1:
        raise ValueError(f"N must be >= 1, got {n}")
    wanted = names or OBLIGATIONS
    unknown = [x for x in wanted if x not in OBLIGATIONS]
    if unknown:
        raise ValueError(f"not a Spacer obligation: {unknown}; known: {OBLIGATIONS}")
    out: dict[str, Answer] = {}
    # (certificates still to check: their queries, and the case facts of those with a call)
    pending: dict[str, tuple[dict[str, cvc5certs.Query], dict[str, list[z3.BoolRef]]]] = {}
    with int_sort(None):
        caching, events = z3.Bool("caching"), z3.Bool("events")
        cfg = Config(Finite(n), caching=caching, events=events, bugs=bugs)
        s = fresh_state(cfg, "s")
        a = fresh_args(cfg, "a")
        t, r = transition(cfg, s, a)
        vs = _flat(s, (caching, events))
        avars = _args_vars(a)
        sorts = [v.sort() for v in vs]
        state = {**props.literal(cfg, s), **props.ghost(cfg, s)}
        step = props.step_props(cfg, s, a, r, t)
        goals = {x: state[x] if x in state else step[x] for x in wanted}
        uses_step = {x: x in STEP_OBLIGATIONS for x in wanted}
        if together:
            goals = {ALL: z3.And(list(goals.values()))}
            uses_step = {ALL: any(uses_step.values())}
        dom = args_domain(cfg, a)
        for name, goal in goals.items():
            fp = z3.Fixedpoint()
            fp.set(engine="spacer")
            fp.set("timeout", timeout_ms)
            for k, v in (OPTIONS if options is None else options).items():
                fp.set(k, v)
            reach = z3.Function("Reach", *sorts, z3.BoolSort())
            fp.register_relation(reach)
            fp.declare_var(*vs, *avars)
            fp.rule(reach(*_flat(initial(cfg), (caching, events))))
            fp.rule(reach(*_flat(t, (caching, events))), [reach(*vs), dom])
            bad = [reach(*vs), dom, z3.Not(goal)] if uses_step[name] else [reach(*vs), z3.Not(goal)]
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                res = fp.query(z3.And(bad))
            except z3.Z3Exception as e:  # its own timeout ends the query with an exception
                res, why = z3.unknown, str(e)
            else:
                why = fp.reason_unknown() if res == z3.unknown else ""
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            if res == z3.unsat:
                if certify:
                    inv = z3.BoolVal(True) if lose_invariant else fp.get_cover_delta(-1, reach)
                    if drop_lemma is not None and z3.is_and(inv):
                        lemmas = list(inv.children())
                        inv = z3.And(lemmas[:drop_lemma] + lemmas[drop_lemma + 1 :])
                    init = _flat(initial(cfg), (caching, events))
                    post = _flat(t, (caching, events))
                    qs = cvc5certs.spacer_queries(inv, vs, init, post, dom, goal, uses_step[name])
                    pending[name] = (qs, call_cases(a, uses_step[name]))
                out[name] = Answer(name, n, "proved", dt, cpu=cpu)
            elif res == z3.sat:
                out[name] = Answer(name, n, "refuted", dt, cpu=cpu)
            else:
                out[name] = Answer(name, n, "unknown", dt, why, cpu)
    if pending and before_certs is not None:
        before_certs(dict(out))
    for name, (qs, cases) in pending.items():

        def report(cert: list[list[str]], name: str = name) -> None:
            out[name] = replace(out[name], cert=cert)
            if before_certs is not None:
                before_certs(dict(out))

        cert = cvc5certs.confirm_clauses(qs, progress=report, cases=cases)
        out[name] = replace(out[name], cert=cert)
    return out


def call_cases(a: Args, uses_step: bool) -> dict[str, list[z3.BoolRef]]:
    """The case facts a certificate's queries with a call are asked on where cvc5
    leaves a conjunct unknown (:func:`cvc5certs.confirm_clauses`): the call's kind, one
    case per operation (``a.kind == k``, k in ``0..len(OPS) - 1``). Their disjunction
    follows from the calls' domain (``0 <= a.kind < len(OPS)``, in the hypothesis of
    ``Inv and T => Inv'``, and of ``Inv => P`` for a step rule); cvc5 checks that it does
    (:func:`cvc5certs.covers`) before any case is asked."""
    kinds = [a.kind == k for k in range(len(OPS))]
    step, prop = cvc5certs.SPACER_CHECKS[1:]
    return {step: kinds, **({prop: kinds} if uses_step else {})}


def check_isolated(
    n: int,
    names: tuple[str, ...],
    bugs: frozenset[str] = frozenset(),
    timeout_s: float = 150.0,
    together: bool = False,
    options: dict[str, Any] | None = None,
    certify: bool = False,
    lose_invariant: bool = False,
) -> dict[str, Answer]:
    """:func:`check` in a child interpreter (``python -m kvpool.proofs.spacer``), killed
    after ``timeout_s`` seconds of wall time plus its start-up (plus, with ``certify``,
    :data:`CERT_S`): every name then answers ``timeout`` (never proved). The answer
    depends on the query alone, not on what this process built. Names asked together in
    one child share the deadline."""
    if n < 1:
        raise ValueError(f"N must be >= 1, got {n}")
    keys = (ALL,) if together else names
    req = {
        "n": n,
        "names": list(names),
        "bugs": sorted(bugs),
        "timeout_ms": int(timeout_s * 1000),
        "together": together,
        "options": options,
        "certify": certify,
        "lose_invariant": lose_invariant,
    }
    cmd = [sys.executable, "-m", "kvpool.proofs.spacer", json.dumps(req)]
    t0 = time.perf_counter()
    deadline = timeout_s + STARTUP_S + (CERT_S * len(keys) if certify else 0.0)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, check=False)
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
        dt = time.perf_counter() - t0
        early = _answers(exc.stdout, keys)  # (killed while checking the certificates)
        if early is not None:
            why = f"certificate not (fully) checked: killed after {dt:.0f} s"
            return {k: replace(a, detail=a.detail or why) for k, a in early.items()}
        return {k: Answer(k, n, "timeout", dt, f"killed after {dt:.0f} s") for k in keys}
    dt = time.perf_counter() - t0
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        return {k: Answer(**got[k]) for k in keys}
    except (ValueError, IndexError, KeyError, TypeError):
        why = f"child exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
        return {k: Answer(k, n, "unknown", dt, why) for k in keys}


def _answers(out: str | bytes | None, keys: tuple[str, ...]) -> dict[str, Answer] | None:
    """The answers a killed child printed before it was killed (None: none)."""
    text = out.decode(errors="replace") if isinstance(out, bytes) else out or ""
    try:
        got = json.loads(text.strip().splitlines()[-1])
        return {k: Answer(**got[k]) for k in keys}
    except (ValueError, IndexError, KeyError, TypeError):
        return None


STARTUP_S = 30.0
"""The child's allowance, on top of the query's timeout, to start and build the encoding."""

CERT_S = 6 * cvc5certs.TIMEOUT_MS / 1000
"""The child's allowance per answer for its certificate (three queries, z3 and cvc5 on
each at their limit)."""


def main(argv: list[str]) -> int:
    """The child of :func:`check_isolated`: one JSON request in, one JSON line out."""
    req = json.loads(argv[0])
    got = check(
        req["n"],
        tuple(req["names"]),
        frozenset(req["bugs"]),
        req["timeout_ms"],
        req["together"],
        req["options"],
        bool(req.get("certify", False)),
        bool(req.get("lose_invariant", False)),
        lambda early: print(json.dumps({k: asdict(v) for k, v in early.items()}), flush=True),
    )
    print(json.dumps({k: asdict(v) for k, v in got.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
