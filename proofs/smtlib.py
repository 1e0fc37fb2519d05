"""A second solver: every proved query, exported as SMT-LIB 2 text and re-checked by cvc5.

z3's ``unsat`` is the proof; here the same query, written out with z3's own
``Solver.to_smt2()`` (declarations, assertions, ``(check-sat)``), is parsed by cvc5
(the ``cvc5`` package's own SMT-LIB parser, in-process, with a time limit) and must
come back ``unsat`` too. ``sat`` from cvc5 on a query z3 proved is a disagreement,
and fails the run; ``unknown`` (cvc5's time limit) is reported as not confirmed.
"""

from __future__ import annotations

import time

import z3  # type: ignore[import-untyped]


def to_smt2(query: list[z3.BoolRef]) -> str:
    """The query as SMT-LIB 2 text, in a context of its own.

    Each assertion goes through ``z3.simplify`` first (an equivalent formula): z3 writes a
    one-term sum as ``(+ x)``, which SMT-LIB does not allow and cvc5 rejects.
    """
    ctx = z3.Context()
    sol = z3.Solver(ctx=ctx)
    for q in query:
        sol.add(z3.simplify(q.translate(ctx)))
    text: str = sol.to_smt2()
    return text


def cvc5_check(text: str, timeout_ms: int = 60000) -> tuple[str, float]:
    """cvc5's verdict on an SMT-LIB 2 script: "unsat", "sat" or "unknown", and its time."""
    import cvc5  # type: ignore[import-untyped]

    tm = cvc5.TermManager()
    slv = cvc5.Solver(tm)
    slv.setOption("tlimit-per", str(timeout_ms))
    if "(lambda" in text:
        # (z3 reads a lambda as an array, cvc5 as a function: :func:`lift_lambdas` first)
        raise ValueError("the query has a lambda; export it with lift_lambdas")
    if "(as const" in text:
        slv.setOption("arrays-exp", "true")  # constant arrays (z3's K)
    slv.setLogic("ALL")
    parser = cvc5.InputParser(slv)
    body = text.replace("(check-sat)", "")
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, body, "kvpool")
    sm = parser.getSymbolManager()
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        cmd.invoke(slv, sm)
    t0 = time.perf_counter()
    res = slv.checkSat()
    dt = time.perf_counter() - t0
    if res.isUnsat():
        return "unsat", dt
    if res.isSat():
        return "sat", dt
    return "unknown", dt


def z3_check(text: str, timeout_ms: int = 60000) -> tuple[str, float]:
    """z3's verdict on the exported text itself (so both solvers read the same bytes)."""
    ctx = z3.Context()
    sol = z3.Solver(ctx=ctx)
    sol.set("timeout", timeout_ms)
    sol.from_string(text)
    t0 = time.perf_counter()
    res = sol.check()
    return str(res), time.perf_counter() - t0
