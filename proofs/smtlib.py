"""A second solver: every proved query, exported as SMT-LIB 2 text and re-checked by cvc5.

z3's ``unsat`` is the proof; here the same query, written out with z3's own
``Solver.to_smt2()`` (declarations, assertions, ``(check-sat)``), is parsed by cvc5
(the ``cvc5`` package's own SMT-LIB parser, in-process, with a time limit) and must
come back ``unsat`` too. ``sat`` from cvc5 on a query z3 proved is a disagreement,
and fails the run; ``unknown`` (cvc5's time limit) is reported as not confirmed.
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
from collections.abc import Callable, Sequence
from typing import Any

import z3  # type: ignore[import-untyped]

from .rewrite import simplify


def to_smt2(query: list[z3.BoolRef], ctx: z3.Context | None = None) -> str:
    """The query as SMT-LIB 2 text, in a context of its own (or ``ctx``, one kept for
    exports only: making a context costs about 20 ms).

    Each assertion goes through :func:`rewrite.simplify` first (an equivalent formula): z3
    writes a one-term sum as ``(+ x)``, which SMT-LIB does not allow and cvc5 rejects.
    """
    ctx = z3.Context() if ctx is None else ctx
    sol = z3.Solver(ctx=ctx)
    for q in query:
        sol.add(simplify(q.translate(ctx)))
    text: str = sol.to_smt2()
    return text


def _has_loose_var(e: z3.ExprRef, depth: int, memo: dict[tuple[int, int], bool]) -> bool:
    """Does ``e`` (under ``depth`` binders) use a variable bound outside it?"""
    key = (e.get_id(), depth)
    if key not in memo:
        if z3.is_var(e):
            memo[key] = z3.get_var_index(e) >= depth
        elif z3.is_quantifier(e):
            memo[key] = _has_loose_var(e.body(), depth + e.num_vars(), memo)
        else:
            memo[key] = any(_has_loose_var(c, depth, memo) for c in e.children())
    return memo[key]


def _has_lambda(e: z3.ExprRef, memo: dict[int, bool]) -> bool:
    if e.get_id() not in memo:
        if z3.is_quantifier(e):
            memo[e.get_id()] = e.is_lambda() or _has_lambda(e.body(), memo)
        else:
            memo[e.get_id()] = any(_has_lambda(c, memo) for c in e.children())
    return memo[e.get_id()]


def _innermost_lambdas(
    e: z3.ExprRef,
    found: dict[int, z3.QuantifierRef],
    seen: set[int],
    has: dict[int, bool],
    loose: dict[tuple[int, int], bool],
) -> None:
    """Collect into ``found`` the closed lambdas of ``e`` with no lambda in their body."""
    if e.get_id() in seen:
        return
    seen.add(e.get_id())
    if z3.is_quantifier(e):
        _innermost_lambdas(e.body(), found, seen, has, loose)
        if e.is_lambda() and not _has_lambda(_chain(e)[1], has) and not _has_loose_var(e, 0, loose):
            found[e.get_id()] = e
    else:
        for c in e.children():
            _innermost_lambdas(c, found, seen, has, loose)


def _chain(lam: z3.QuantifierRef) -> tuple[list[z3.QuantifierRef], z3.ExprRef]:
    """A lambda whose body is a lambda, and so on (``lambda x. lambda y. t``, an array of
    arrays): the lambdas from the outside in, and the body of the innermost."""
    chain = [lam]
    while z3.is_quantifier(chain[-1].body()) and chain[-1].body().is_lambda():
        chain.append(chain[-1].body())
    return chain, chain[-1].body()


def lift_lambdas(query: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """``query`` without lambdas, equisatisfiable: each closed lambda becomes a fresh
    array constant ``A`` with the axiom ``forall x. A[x] == body(x)``.

    z3 reads ``(lambda ((x Int)) t)`` as an array, cvc5 as a function (an ``ite`` of a
    lambda and an array does not type-check there), so a query of the unbounded reading
    is written out this way for cvc5. Innermost lambdas first, all of a round at once.
    A lambda that uses a variable bound outside it is left alone (then the text still
    has a lambda, and :func:`cvc5_check` refuses it rather than guess), except inside a
    closed chain of lambdas ``lambda x. lambda y. t`` (an array of arrays, ``t`` with no
    lambda): the chain becomes one fresh ``A`` with ``forall x y. A[x][y] == t``.
    Equisatisfiable as a single lambda is: a model of the query gives ``A`` the chain's
    value; a model of the result has ``A[x]`` equal to ``lambda y. t`` at every ``y``,
    so (arrays are extensional) ``A`` is the chain's value. The hot paths' ``unpin_blocks``
    posts from source read the pending watchers as ``lambda wb. lambda wi.
    tuple_get(_pending[wb], wi)``: cvc5 refused those four queries before.
    """
    qs = list(query)
    axioms: list[z3.BoolRef] = []
    k = 0
    while True:
        # (memos by term id, per round: ids of terms freed by a substitution are reused)
        loose: dict[tuple[int, int], bool] = {}
        found: dict[int, z3.QuantifierRef] = {}
        seen: set[int] = set()
        has: dict[int, bool] = {}
        for q in [*qs, *axioms]:
            _innermost_lambdas(q, found, seen, has, loose)
        if not found:
            return [*qs, *axioms]
        pairs = []
        for lam in found.values():
            arr = z3.Const(f"lam!{k}", lam.sort())
            chain, inner = _chain(lam)
            groups = [
                [
                    z3.Const(f"lam!{k}!{len(chain) - 1 - j}!{i}", b.var_sort(i))
                    for i in range(b.num_vars())
                ]
                for j, b in enumerate(chain)
            ]
            k += 1
            xs = [x for g in groups for x in g]  # (de Bruijn: the innermost's last is 0)
            body = z3.substitute_vars(inner, *reversed(xs))
            app: z3.ExprRef = arr
            for g in groups:
                app = z3.Select(app, *g)
            axioms.append(z3.ForAll(xs, app == body))
            pairs.append((lam, arr))
        qs = [z3.substitute(q, *pairs) for q in qs]
        axioms = [z3.substitute(a, *pairs) for a in axioms]


def to_smt2_lifted(query: list[z3.BoolRef]) -> str:
    """:func:`to_smt2` of the query with its lambdas lifted (:func:`lift_lambdas`)."""
    ctx = z3.Context()
    return to_smt2(lift_lambdas([simplify(q.translate(ctx)) for q in query]))


def cvc5_load(
    text: str,
    timeout_ms: int,
    options: dict[str, str] | None = None,
    incremental: bool = False,
) -> tuple[Any, Any]:
    """A cvc5 solver with ``text``'s declarations and assertions read in (its
    ``(check-sat)`` left out), each check limited to ``timeout_ms`` (``tlimit-per``), and
    the parser's symbol manager (for the declared terms): the one place that sets cvc5
    up, for one check (:func:`cvc5_check`) or many (``incremental``)."""
    import cvc5  # type: ignore[import-untyped]

    slv = cvc5.Solver(cvc5.TermManager())
    if incremental:
        slv.setOption("incremental", "true")
    slv.setOption("tlimit-per", str(timeout_ms))
    for k, v in (options or {}).items():
        slv.setOption(k, v)
    if "(as const" in text:
        slv.setOption("arrays-exp", "true")  # constant arrays (z3's K)
    slv.setLogic("ALL")
    parser = cvc5.InputParser(slv)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text.replace("(check-sat)", ""), "kvpool")
    sm = parser.getSymbolManager()
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        cmd.invoke(slv, sm)
    return slv, sm


def cvc5_check(
    text: str, timeout_ms: int = 60000, options: dict[str, str] | None = None
) -> tuple[str, float]:
    """cvc5's verdict on an SMT-LIB 2 script: "unsat", "sat" or "unknown", and its time.
    ``options``: cvc5 options by name (e.g. ``{"full-saturate-quant": "true"}``)."""
    if "(lambda (" in text:
        # (z3 reads a lambda as an array, cvc5 as a function: :func:`lift_lambdas` first)
        raise ValueError("the query has a lambda; export it with lift_lambdas")
    slv, _ = cvc5_load(text, timeout_ms, options)
    t0 = time.perf_counter()
    res = slv.checkSat()
    dt = time.perf_counter() - t0
    if res.isUnsat():
        return "unsat", dt
    if res.isSat():
        return "sat", dt
    return "unknown", dt


def _cvc5_child(text: str, timeout_ms: int, out: Any, options: dict[str, str] | None) -> None:
    try:
        out.send(cvc5_check(text, timeout_ms, options))
    except (ValueError, RuntimeError) as exc:  # cvc5 does not read the text
        out.send((f"refused ({str(exc)[:60]})", 0.0))


def cvc5_check_bounded(
    text: str,
    timeout_ms: int = 5000,
    grace_s: float = 5.0,
    options: dict[str, str] | None = None,
) -> tuple[str, float]:
    """:func:`cvc5_check` in a forked child, stopped ``grace_s`` after cvc5's own limit.

    On some quantified queries (the source refinement's ``append_n`` post) cvc5 1.4.2
    overruns both ``tlimit-per`` and ``tlimit`` without end; a child it runs in can be
    killed. A stopped child's answer is "unknown": never confirmed."""
    mp = multiprocessing.get_context("fork")
    recv, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=_cvc5_child, args=(text, timeout_ms, send, options), daemon=True)
    t0 = time.perf_counter()
    proc.start()
    send.close()
    try:
        if recv.poll(timeout_ms / 1000 + grace_s):
            verdict, dt = recv.recv()
            return str(verdict), float(dt)
        return "unknown", time.perf_counter() - t0
    except EOFError:  # the child died without an answer
        return "unknown", time.perf_counter() - t0
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        recv.close()


def z3_check(text: str, timeout_ms: int = 60000) -> tuple[str, float]:
    """z3's verdict on the exported text itself (so both solvers read the same bytes)."""
    ctx = z3.Context()
    sol = z3.Solver(ctx=ctx)
    sol.set("timeout", timeout_ms)
    sol.from_string(text)
    t0 = time.perf_counter()
    res = sol.check()
    return str(res), time.perf_counter() - t0


# -- a second export of the same query, for the quantified ones cvc5 leaves unknown ---------


def _fixed_constants(hyp: list[z3.BoolRef]) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    """``(x, c)`` for each hypothesis ``x == c``: an uninterpreted integer constant set
    to a value (the call's kind, in a case split on it)."""
    out = []
    for h in hyp:
        if z3.is_eq(h):
            x, c = h.arg(0), h.arg(1)
            if z3.is_int_value(x):
                x, c = c, x
            uninterpreted = z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED
            if uninterpreted and z3.is_int_value(c):
                out.append((x, c))
    return out


_FRESH = itertools.count()

SPLIT_MAX = 64
"""A goal is split into at most this many parts (past it, what is left stays whole)."""


def split_goal(goal: z3.BoolRef, budget: int = SPLIT_MAX) -> list[z3.BoolRef]:
    """``goal`` as formulas whose conjunction is equivalent to it, each as small as the
    shapes below allow (at most ``budget`` of them):

    * ``a and b``: the parts of a, then of b;
    * ``p implies q``: ``p implies x`` for each part x of q;
    * ``r or q`` with q splitting: ``r or x`` for each part x of q;
    * ``if c then a else b`` (a formula): the parts of ``c implies a`` and ``not c implies b``;
    * ``not (a or b)``: the parts of ``not a`` and of ``not b``;
    * ``forall x. q``: ``forall x. y`` for each part y of q.
    """
    if budget <= 1:
        return [goal]
    parts: list[z3.BoolRef] = []
    if z3.is_and(goal):
        subs: list[z3.BoolRef] = list(goal.children())
    elif z3.is_implies(goal):
        p, q = goal.children()
        return [z3.Implies(p, x) for x in split_goal(q, budget)]
    elif z3.is_or(goal):
        ch = goal.children()
        for i, c in enumerate(ch):
            xs = split_goal(c, budget)
            if len(xs) > 1:
                rest = ch[:i] + ch[i + 1 :]
                subs = [z3.Or(*rest, x) for x in xs]
                break
        else:
            return [goal]
    elif z3.is_app_of(goal, z3.Z3_OP_ITE):
        c, a, b = goal.children()
        subs = [z3.Implies(c, a), z3.Implies(z3.Not(c), b)]
    elif z3.is_not(goal) and z3.is_or(goal.arg(0)):
        subs = [z3.Not(c) for c in goal.arg(0).children()]
    elif z3.is_not(goal) and z3.is_implies(goal.arg(0)):
        p, q = goal.arg(0).children()
        subs = [p, z3.Not(q)]
    elif z3.is_quantifier(goal) and goal.is_forall():
        # (a fresh name each time: a nested binder of the same name is not captured)
        xs = [
            z3.Const(f"{goal.var_name(i)}!s{next(_FRESH)}", goal.var_sort(i))
            for i in range(goal.num_vars())
        ]
        body = z3.substitute_vars(goal.body(), *reversed(xs))
        inner = split_goal(body, budget)
        if len(inner) == 1:
            return [goal]
        return [z3.ForAll(xs, y) for y in inner]
    else:
        return [goal]
    for k, s in enumerate(subs):
        left = budget - len(parts) - (len(subs) - k - 1)
        parts += split_goal(s, max(1, left))
    return parts


def split_queries(hyp: list[z3.BoolRef], goal: z3.BoolRef) -> list[list[z3.BoolRef]]:
    """The query ``hyp and not goal`` as queries that are all unsat iff it is: the
    constants the hypothesis fixes (``x == c``) substituted everywhere (the equations
    kept), then one query per formula of :func:`split_goal`. (A model of one of them is
    a model of the whole query: each part follows from the goal.)"""
    pairs = _fixed_constants(hyp)
    if pairs:
        hyp = [simplify(z3.substitute(h, *pairs)) for h in hyp] + [x == c for x, c in pairs]
        goal = simplify(z3.substitute(goal, *pairs))
    else:
        goal = simplify(goal)
    return [[*hyp, z3.Not(g)] for g in split_goal(goal)]


SPLIT_OPTIONS: tuple[dict[str, str], ...] = ({}, {"full-saturate-quant": "true"})
"""cvc5's settings tried in turn on each part of a split query (the second, cvc5's
exhaustive instantiation, settles parts where its default gives up as incomplete)."""


def cvc5_confirm(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int = 5000, split: bool = True
) -> tuple[str, str]:
    """cvc5's verdict on a query z3 proved, and how it was reached.

    The whole query first (lambdas lifted); if cvc5 leaves it unknown, the same query
    split (:func:`split_queries`), each part with each of :data:`SPLIT_OPTIONS` until one
    says unsat (not when ``split`` is false). "unsat" only if every part is unsat; "sat"
    if any part is sat (a disagreement); else the first part's other answer."""
    v, _ = cvc5_check_bounded(to_smt2_lifted([*hyp, z3.Not(goal)]), timeout_ms)
    if v in ("unsat", "sat") or not split:
        return v, "whole"
    parts = split_queries(hyp, goal)
    for i, q in enumerate(parts):
        text = to_smt2_lifted(q)
        pv = "unknown"
        for opts in SPLIT_OPTIONS:
            pv, _ = cvc5_check_bounded(text, timeout_ms, options=opts)
            if pv in ("unsat", "sat"):
                break
        if pv != "unsat":
            return pv, f"split into {len(parts)}: part {i + 1} {pv}"
    return "unsat", f"split into {len(parts)}"


# -- a case split on atoms the obligation names (for the queries even the split leaves open) --

CASE_OPTIONS: tuple[dict[str, str], ...] = (
    {},
    {"full-saturate-quant": "true"},
    {"enum-inst": "true"},
    {"mbqi": "true"},
)
"""cvc5's settings tried in turn on each part of a case (:func:`cvc5_confirm_cases`)."""


def _uninterpreted(e: z3.ExprRef) -> bool:
    return bool(z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED)


def assume(
    hyp: list[z3.BoolRef], goal: z3.BoolRef, fact: z3.BoolRef
) -> tuple[list[z3.BoolRef], z3.BoolRef]:
    """``hyp and fact``, ``goal`` with ``fact`` used everywhere (an equivalent query:
    ``fact`` is kept among the hypotheses). ``fact`` is ``x == c`` (``x`` a constant, ``c``
    a value or another constant: x replaced by c), ``not t`` (t by false) or ``t`` (by
    true)."""
    sub = _pairs(fact)
    if sub:
        pair = sub[0]
    elif z3.is_not(fact):
        pair = (fact.arg(0), z3.BoolVal(False))
    else:
        pair = (fact, z3.BoolVal(True))
    new_hyp = [simplify(z3.substitute(h, pair)) for h in hyp]
    return [*new_hyp, fact], simplify(z3.substitute(goal, pair))


def parts_unsat(
    parts: Sequence[list[z3.BoolRef]],
    timeout_ms: int,
    options: Sequence[dict[str, str]] = CASE_OPTIONS,
    export: Callable[[list[z3.BoolRef]], str] = to_smt2_lifted,
) -> str:
    """Each query of ``parts`` (written by ``export``) asked of cvc5 under each of
    ``options`` in turn until one answers: "unsat" if every part is, else the first
    part's answer that is not ("sat": a model of that part; "unknown"), and no part after
    it is asked."""
    for q in parts:
        text = export(q)
        pv = "unknown"
        for opts in options:
            pv, _ = cvc5_check_bounded(text, timeout_ms, options=opts)
            if pv in ("unsat", "sat"):
                break
        if pv != "unsat":
            return pv
    return "unsat"


def _confirm_parts(hyp: list[z3.BoolRef], goal: z3.BoolRef, timeout_ms: int) -> str:
    """Every part of the goal (:func:`split_queries`) under each of :data:`CASE_OPTIONS`
    until one says unsat: "unsat" if all are, "sat" if any is, else "unknown"."""
    return parts_unsat(split_queries(hyp, goal), timeout_ms)


def cvc5_confirm_cases(
    hyp: list[z3.BoolRef],
    goal: z3.BoolRef,
    atoms: list[z3.BoolRef],
    timeout_ms: int = 5000,
    whole_ms: int = 2000,
) -> tuple[str, int]:
    """cvc5's verdict on ``hyp and not goal``, asked case by case: the query whole
    (``whole_ms``); if cvc5 leaves it unknown, split on the first atom (``a`` and ``not a``,
    each with :func:`assume`, both must be unsat) and so on down ``atoms``; where no atom
    is left, the goal's parts with every one of :data:`CASE_OPTIONS`. The cases of one
    split cover every model (an atom holds or not), so the query is unsat iff every leaf
    is. A leaf's model is a model of the query: "sat" anywhere is a disagreement.
    Returns the verdict and how many leaves were asked."""
    v, _ = cvc5_check_bounded(to_smt2_lifted([*hyp, z3.Not(goal)]), whole_ms)
    if v in ("unsat", "sat"):
        return v, 1
    if not atoms:
        return _confirm_parts(hyp, goal, timeout_ms), 1
    leaves = 0
    for fact in (atoms[0], z3.Not(atoms[0])):
        h, g = assume(hyp, goal, fact)
        rest = [simplify(z3.substitute(a, *_pairs(fact))) for a in atoms[1:]]
        # (an atom the case decides is no split: drop it)
        rest = [a for a in rest if not (z3.is_true(a) or z3.is_false(a))]
        v, n = cvc5_confirm_cases(h, g, rest, timeout_ms, whole_ms)
        leaves += n
        if v != "unsat":
            return v, leaves
    return "unsat", leaves


def _pairs(fact: z3.BoolRef) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    """The substitution :func:`assume` makes for ``fact``, for the atoms still to split on."""
    if z3.is_eq(fact):
        x, c = fact.arg(0), fact.arg(1)
        if z3.is_int_value(x) or z3.is_true(x) or z3.is_false(x):
            x, c = c, x
        value = z3.is_int_value(c) or z3.is_true(c) or z3.is_false(c)
        if _uninterpreted(x) and (value or _uninterpreted(c)) and x.get_id() != c.get_id():
            return [(x, c)]
    return []


# -- the event log's fold, for cvc5 (which has no seq.foldl) ---------------------------------


def find_folds(query: list[z3.BoolRef]) -> list[z3.ExprRef]:
    """The ``seq.foldl`` terms of ``query`` that use no bound variable."""
    found: dict[int, z3.ExprRef] = {}
    seen: set[int] = set()
    loose: dict[tuple[int, int], bool] = {}
    todo: list[z3.ExprRef] = list(query)
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        fold = z3.is_app_of(e, z3.Z3_OP_SEQ_FOLDL) or z3.is_app_of(e, z3.Z3_OP_SEQ_FOLDLI)
        if fold and not _has_loose_var(e, 0, loose):  # (one under a binder stays: refused)
            found.setdefault(e.get_id(), e)
        elif z3.is_quantifier(e):
            todo.append(e.body())
        else:
            todo.extend(e.children())
    return list(found.values())


def abstract_terms(query: list[z3.BoolRef], terms: list[z3.ExprRef]) -> list[z3.BoolRef]:
    """``query`` with each of ``terms`` (closed terms) replaced by a fresh constant, the
    same term by the same constant throughout the query."""
    pairs = [(t, z3.FreshConst(t.sort(), "fold")) for t in terms]
    return [z3.substitute(q, *pairs) for q in query] if pairs else list(query)


def abstract_folds(query: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """``query`` with each ``seq.foldl`` term replaced by a fresh constant
    (:func:`abstract_terms` of :func:`find_folds`).

    cvc5 1.4.2 has no ``seq.foldl``. The event log's queries (:mod:`.eventseq`) fold only
    the log the step starts from, and the very same term stands in the hypothesis and the
    goal (``model._fold`` unfolds what the step appends). A constant in its place may take
    any value, so the result has every model of ``query`` and more: its unsat proves
    ``query`` unsat (a stronger obligation, never a weaker one); a model of it need not be
    a model of ``query``, and cvc5 ``sat`` on it is still counted a failure."""
    return abstract_terms(query, find_folds(query))
