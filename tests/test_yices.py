"""Yices 2 as the solver of quantifier-free instance queries (proofs/yices.py).

Each rule has a seeded bug it must catch: a satisfiable query is not "unsat"; a
constant array is generalized, so a query that needs its values is not confirmed; a
quantified query is not asked; a missing, silent or hanging program confirms nothing.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import yices


def _arrays() -> tuple[z3.ArrayRef, z3.ArithRef, z3.ArithRef]:
    return z3.Array("a", z3.IntSort(), z3.IntSort()), z3.Int("i"), z3.Int("j")


def test_the_program_is_installed_with_the_proofs() -> None:
    assert yices.binary() is not None


def test_yices_decides_a_quantifier_free_array_query_both_ways() -> None:
    """A read past a write at another index sees the old value (unsat to deny it); the
    seeded bug, the same at a possibly equal index, is sat."""
    a, i, j = _arrays()
    b = z3.Store(a, j, 2)
    assert yices.ask([a[i] == 1, i != j, b[i] != 1], 10000) == "unsat"
    assert yices.ask([a[i] == 1, b[i] != 1], 10000) == "sat"


def test_a_constant_array_becomes_a_fresh_array_everywhere() -> None:
    """``K(-3)`` is replaced by one fresh array in every formula. A query unsat whatever
    the array holds stays unsat; one that needs its values (``K(-3)[i] == -3``) is then
    sat: the generalization's sat counts for nothing, and nothing false is confirmed."""
    _, i, _ = _arrays()
    k = z3.K(z3.IntSort(), z3.IntVal(-3))
    x = z3.Int("x")
    q = [z3.Store(k, 0, x)[0] != x]
    g = yices.generalized([*q, k[i] == 5])
    assert not any(z3.is_const_array(t) for f in g for t in _subterms(f))
    assert (
        len({str(c) for f in g for c in _subterms(f) if c.decl().name().startswith("kconst")}) == 1
    )
    assert yices.ask(q, 10000) == "unsat"
    assert yices.ask([k[i] != -3], 10000) == "sat"  # (z3 says unsat; Yices sees any array)


def _subterms(f: z3.ExprRef) -> list[z3.ExprRef]:
    from kvpool.proofs.model import subterms

    return list(subterms([f]))


def test_a_quantified_query_is_refused_and_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quantifier, or a lambda under an equation, anywhere: not asked."""
    a, i, _ = _arrays()
    x = z3.Int("x")
    asked: list[str] = []
    monkeypatch.setattr(yices, "ask_text", lambda t, ms, program=None: asked.append(t) or "unsat")
    v = yices.ask([z3.ForAll([x], a[x] > 0), a[i] <= 0], 10000)
    assert v.startswith("refused (a quantifier") and asked == []
    lam = z3.Lambda([x], x + 1)
    assert yices.ask([z3.Or(i > 0, a == lam)], 10000).startswith("refused (a quantifier")
    assert not yices.quantifier_free([z3.Or(i > 0, a == lam)]) and yices.quantifier_free([i > 0])


def _program(tmp_path: Path, body: str) -> str:
    p = tmp_path / "fake-yices"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_a_missing_silent_or_hanging_program_confirms_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "(set-logic QF_LIA)\n(declare-fun x () Int)\n(assert (< x x))\n(check-sat)\n"
    assert yices.ask_text(text, 5000) == "unsat"  # (the real one)
    assert yices.ask_text(text, 5000, str(tmp_path / "none")).startswith("refused")
    assert yices.ask_text(text, 5000, _program(tmp_path, "exit 0")) == "unknown"
    assert yices.ask_text(text, 5000, _program(tmp_path, "echo '(error x)'")).startswith(
        "refused ((error x)"
    )
    monkeypatch.setattr(yices, "GRACE_S", 0.2)
    assert yices.ask_text(text, 500, _program(tmp_path, "exec sleep 30")) == "unknown"
    monkeypatch.setattr(yices, "binary", lambda: None)
    assert yices.ask_text(text, 5000).startswith("refused (yices-smt2 not found")
