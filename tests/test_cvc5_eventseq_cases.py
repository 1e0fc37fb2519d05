"""cvc5 on the event log's queries it leaves unknown at the row's limit
(proofs/eventseq.py: ``_Export.confirm``): asked again at a longer limit, then case by
case on ``events`` and the call's count. The cases cover every model, a real query is
confirmed through them, and a false one is still sat through them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import eventseq, fixedn, runner
from kvpool.proofs.model import Goal


@pytest.mark.parametrize("n", [1, 2, 3, 6, 7])
def test_the_cases_cover_every_model(n: int) -> None:
    events, an = z3.Bool("events"), z3.Int("a.n")
    facts = eventseq.case_facts([z3.Or(events, an > 0)], n)
    assert len(facts) == max(n + 1, 3)  # events off; a.n <= 1, 2..n-1, >= n
    s = z3.Solver()
    s.add(z3.Not(z3.Or(*facts)))  # (no model escapes every case)
    assert s.check() == z3.unsat


def test_no_split_on_a_query_that_names_neither() -> None:
    assert eventseq.case_facts([z3.Int("x") > 0], 6) == []


def _unknown_twice(ex: eventseq._Export) -> Callable[[list[z3.BoolRef], int], str]:
    """``ex.verdict`` with its first two answers "unknown" (the whole query and its retry
    run out of time), so that the cases are asked."""
    real, calls = ex.verdict, []

    def verdict(query: list[z3.BoolRef], timeout_ms: int) -> str:
        calls.append(timeout_ms)
        return "unknown" if len(calls) <= 2 else real(query, timeout_ms)

    return verdict


def _goal(n: int, name: str, op: str, bugs: frozenset[str] = frozenset()) -> Goal:
    st = fixedn.build(n, bugs=bugs, seq=True)
    (g,) = fixedn.step_goals(st, (name,), 60000, (op,), direct=True)
    return g


def test_a_real_query_is_confirmed_case_by_case(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _goal(3, "INV-EVENTS", "GetNewBlocks")
    assert g.status == "proved"
    ex = eventseq._Export()
    monkeypatch.setattr(ex, "verdict", _unknown_twice(ex))
    assert ex.confirm(g.query, 5000, 3) == ("unsat", "cases: 4")


@pytest.mark.deep
def test_a_false_query_is_still_sat_case_by_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded bug: event-out-of-order's refuted step, passed off as proved, asked
    case by case (the whole query forced unknown): a case is sat, a disagreement, and
    the row fails."""
    g = _goal(2, "INV-EVENTS", "CacheBlocks", frozenset(["event-out-of-order"]))
    assert g.status == "refuted"
    ex = eventseq._Export()
    monkeypatch.setattr(ex, "verdict", _unknown_twice(ex))
    assert ex.confirm(g.query, 5000, 2) == ("sat", "cases: 3")
    g.status = "proved"
    monkeypatch.setattr(eventseq._Export, "verdict", _always_unknown_first_two())
    row = eventseq.cvc5_row({2: [g]}, 5000)
    assert row["status"] == "disagree", row
    assert not runner.ObligationResult(**row).ok


def _always_unknown_first_two() -> Callable[..., str]:
    real, calls = eventseq._Export.verdict, []

    def verdict(self: eventseq._Export, query: list[z3.BoolRef], timeout_ms: int) -> str:
        calls.append(timeout_ms)
        return "unknown" if len(calls) <= 2 else real(self, query, timeout_ms)

    return verdict
