"""An isolated obligation is the same in any process (kvpool.proofs.model.isolate).

What z3 sees of an obligation asked through :func:`model.isolated_check`: the formulas in
its context, printed, and the context's counter of fresh names (z3 names the constants
it makes while solving from it; ``translate`` lifted it to the main context's). Both
must be the same in a fresh process and in one that made many fresh names and solved
other obligations first; the old path (``translate``) fails that comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import model
from kvpool.proofs.model import RenamedModel, canonical_text, isolate, isolated_check

# The obligation, built by the same code here and in a fresh process: an Unbounded
# queue step (quantified, lambdas) whose pool size is a fresh constant (a name taken
# from the main context's counter: "N!0" in a fresh process, "N!10001" after pollution).
BUILD = """
import z3
from kvpool.proofs import model as M
d = M.Unbounded(z3.FreshInt("N"))
cfg = M.Config(d)
s = M.fresh_state(cfg, "s")
x = z3.Int("x")
t = M.q_append(d, s, x)
EXPRS = [d.N >= 2, s.L < d.N - 1, z3.Not(z3.Select(t.q, s.L) == x)]
"""


# What z3 gets, computed by the same code here and in the fresh process: the formulas
# (printed), the next name the context would make, and the term numbers in a walk of
# the formulas (z3's search is ordered by them). Three ways to isolate: the new one,
# the old translation (the seeded bug), and the text parsed without the renumbering.
SEEN = """
import z3
from kvpool.proofs import model as M


def numbers(exprs):
    out, todo, done = [], list(reversed(exprs)), set()
    while todo:
        e = todo.pop()
        if e.get_id() in done:
            continue
        done.add(e.get_id())
        out.append(e.get_id())
        kids = [e.body()] if z3.is_quantifier(e) else e.children() if z3.is_app(e) else []
        todo.extend(reversed(kids))
    return out


def seen(ctx, exprs):
    sol = z3.Solver(ctx=ctx)
    sol.add(exprs)
    return [sol.sexpr(), str(z3.FreshInt("k", ctx=ctx)), numbers(exprs)]


def paths(exprs):
    iso = M.isolate(exprs)
    old = z3.Context()
    parsed = z3.Context()
    return {
        "new": seen(iso.ctx, iso.exprs),
        "old": seen(old, [e.translate(old) for e in exprs]),
        "parsed": seen(parsed, M._parse(M.canonical_text(M._smt2(exprs))[0], parsed)),
    }
"""


def _obligation() -> list[Any]:
    ns: dict[str, Any] = {}
    exec(BUILD, ns)  # the very text the fresh process runs
    return list(ns["EXPRS"])


def _paths(exprs: list[Any]) -> dict[str, list[Any]]:
    ns: dict[str, Any] = {}
    exec(SEEN, ns)
    got: dict[str, list[Any]] = ns["paths"](exprs)
    return got


@pytest.fixture(scope="module")
def fresh() -> dict[str, list[Any]]:
    """What each path gives in a fresh process."""
    script = BUILD + SEEN + "import json\nprint(json.dumps(paths(EXPRS)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    got: dict[str, list[Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


@pytest.fixture(scope="module")
def polluted() -> dict[str, list[Any]]:
    """What each path gives here, after 10,000 fresh names, a refutation whose model came
    back into the main context (both lift its counter), and with a copy of the obligation
    kept alive (more references to its terms: the printer names other terms with lets)."""
    for _ in range(10000):
        z3.FreshInt()
    y = z3.Int("y")
    status, _, m = isolated_check([y > 0], y > 1, 5000)
    assert status == "refuted" and m is not None
    keep = _obligation()
    got = _paths(_obligation())
    del keep
    return got


def test_an_obligation_is_the_same_in_a_polluted_process_as_in_a_fresh_one(
    fresh: dict[str, list[Any]], polluted: dict[str, list[Any]]
) -> None:
    assert polluted["new"] == fresh["new"]
    assert "N!" not in polluted["new"][0] and "kv!0" in polluted["new"][0]  # renamed


def test_the_translating_path_fails_that_comparison(
    fresh: dict[str, list[Any]], polluted: dict[str, list[Any]]
) -> None:
    # the seeded bug: the isolation isolated_check used before (names, counter)
    assert polluted["old"][:2] != fresh["old"][:2]


def test_the_text_parsed_without_renumbering_fails_it_too(
    fresh: dict[str, list[Any]], polluted: dict[str, list[Any]]
) -> None:
    # the same formulas, numbered as the text lists them (lets first): only the numbers
    # differ, and they order z3's search
    assert polluted["parsed"][:2] == fresh["parsed"][:2]
    assert polluted["parsed"][2] != fresh["parsed"][2]


def test_a_refutations_model_is_read_with_the_callers_names() -> None:
    f = z3.Function("f!7", z3.IntSort(), z3.BoolSort(), z3.IntSort())  # a fresh-form name
    n, b = z3.FreshInt("n"), z3.Bool("b")
    key = z3.DeclareSort("Key")
    k1, k2 = z3.Const("k1", key), z3.Const("k2", key)
    status, _, m = isolated_check([f(n, b) == n + 3, n > 5, k1 != k2], f(n, b) > 100, 5000)
    assert status == "refuted" and isinstance(m, RenamedModel)
    v = m.eval(n, model_completion=True).as_long()
    assert v > 5 and m.eval(f(n, b), model_completion=True).as_long() == v + 3
    assert z3.is_false(m.eval(k1 == k2, model_completion=True))
    assert len(m.get_universe(key)) >= 2  # the caller's uninterpreted sort


def test_a_name_declared_twice_is_left_as_printed() -> None:
    text = "(declare-fun a () Int)\n(declare-fun a () Bool)\n(assert (= a 1))\n"
    assert canonical_text(text) == (text, {})
    # a prefix already in the text is lengthened
    renamed, names = canonical_text("(declare-fun kv!0 () Int)\n(assert (= kv!0 1))\n")
    assert names == {"kv!0": "kv!!0"} and "(= kv!!0 1)" in renamed


def test_the_ladder_asks_again_at_the_next_seed_with_twice_the_time(monkeypatch: Any) -> None:
    asked: list[tuple[int, int]] = []

    def fake(hyp: Any, goal: Any, timeout_ms: int, seed: int = 0) -> tuple[str, float, None]:
        asked.append((timeout_ms, seed))
        return ("unknown" if len(asked) < 3 else "proved"), 0.5, None

    monkeypatch.setattr(model, "isolated_check", fake)
    x = z3.Int("x")
    assert model.robust_check([x > 1], x > 0, 1000, seeds=4)[:2] == ("proved", 1.5)
    assert asked == [(1000, 0), (2000, 1), (4000, 2)]
    asked.clear()
    assert model.robust_check([], x > 0, 100, seeds=2)[0] == "unknown"
    assert asked == [(100, 0), (200, 1)]


def test_the_ladder_keeps_to_its_cap_and_total(monkeypatch: Any) -> None:
    asked: list[tuple[int, int]] = []

    def fake(hyp: Any, goal: Any, timeout_ms: int, seed: int = 0) -> tuple[str, float, None]:
        asked.append((timeout_ms, seed))
        return "unknown", timeout_ms / 1000, None

    monkeypatch.setattr(model, "isolated_check", fake)
    x = z3.Int("x")
    model.robust_check([], x > 0, 1000, seeds=4, first_seed=5, cap_ms=3000)
    assert asked == [(1000, 5), (2000, 6), (3000, 7), (3000, 8)]
    asked.clear()
    model.robust_check([], x > 0, 2000, seeds=8, cap_ms=2000, total_ms=5000)
    assert asked == [(2000, 0), (2000, 1), (1000, 2)]


def test_an_obligation_with_a_sort_of_its_own_is_still_read_right() -> None:
    # a sort outside model.USER_SORTS: isolated by translate (not canonical), model readable
    colour = z3.DeclareSort("Colour")
    c1, c2 = z3.Const("c1", colour), z3.Const("c2", colour)
    assert isolate([c1 != c2]).names == {}
    status, _, m = isolated_check([c1 != c2], z3.BoolVal(False), 5000)
    assert status == "refuted" and m is not None
    assert len(m.get_universe(colour)) == 2 and z3.is_false(m.eval(c1 == c2))


def test_the_text_parses_into_the_formulas_translate_gives() -> None:
    # the printer's own forms (distinct written as "(and (distinct ..) true)") are undone:
    # re-made from the text, the formulas are the translated ones, term for term
    x, y = z3.Ints("x y")
    key = z3.DeclareSort("Key")
    k = z3.Const("k", key)
    arr = z3.Array("arr", z3.IntSort(), key)
    exprs = [
        z3.Distinct(x, y, z3.IntVal(-2)),
        z3.And(z3.Distinct(x, y), z3.BoolVal(True)),  # the form the printer uses, for real
        z3.ForAll([x], z3.Implies(x > 0, z3.Select(arr, x) != k)),
        z3.Lambda([x], x + y)[3] == z3.RealVal("1/3") * 0 + 4,
    ]
    printed = model._smt2(exprs)
    ctx, other = z3.Context(), z3.Context()
    a, b = z3.Solver(ctx=ctx), z3.Solver(ctx=other)
    a.add(model._parse(printed, ctx))
    b.add([e.translate(other) for e in exprs])
    assert a.sexpr() == b.sexpr()
