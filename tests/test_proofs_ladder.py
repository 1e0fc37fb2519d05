"""The one ladder every retry of the proofs goes through (kvpool.proofs.model.ladder), and
the one row-per-obligation-name builder (model.name_rows): fakes, no solver."""

from __future__ import annotations

from typing import Any

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import model
from kvpool.proofs.model import Goal, goal_row, ladder, name_rows, replay_ladder


def test_the_ladder_asks_until_the_callers_acceptance() -> None:
    asked: list[tuple[int, int]] = []
    answers = ["unknown", "refuted-not-replayed", "refuted", "refuted"]

    def ask(limit: int, seed: int) -> tuple[str, float]:
        asked.append((limit, seed))
        return answers[len(asked) - 1], 0.25

    got, dt = ladder(ask, lambda a: a == "refuted", 1000, seeds=4)
    assert got == ["unknown", "refuted-not-replayed", "refuted"] and dt == 0.75
    assert asked == [(1000, 0), (2000, 1), (4000, 2)]
    # nothing accepted: every rung asked, every answer returned
    asked.clear()
    got, _ = ladder(ask, lambda a: False, 1000, seeds=2, cap_ms=1000)
    assert got == ["unknown", "refuted-not-replayed"] and asked == [(1000, 0), (1000, 1)]
    with pytest.raises(ValueError):
        ladder(ask, lambda a: True, 0)


def test_robust_check_until_asks_again_for_a_model_it_rejects(monkeypatch: Any) -> None:
    asked: list[int] = []

    def fake(hyp: Any, goal: Any, timeout_ms: int, seed: int = 0) -> tuple[str, float, Any]:
        asked.append(seed)
        return "refuted", 0.5, f"model {seed}"

    monkeypatch.setattr(model, "isolated_check", fake)
    x = z3.Int("x")
    # without ``until`` the first answer that is not unknown ends it
    assert model.robust_check([], x > 0, 100)[2] == "model 0" and asked == [0]
    asked.clear()
    st, dt, m = model.robust_check([], x > 0, 100, until=lambda st, m: m == "model 2")
    assert (st, dt, m) == ("refuted", 1.5, "model 2") and asked == [0, 1, 2]


def _g(status: str, name: str = "P", case: str = "c", model_: Any = "m") -> Goal:
    return Goal(name, case, status, 1.0, model_ if status == "refuted" else None)


def test_replay_ladder_keeps_the_last_counterexample_judged() -> None:
    script = [
        _g("refuted", case="a"),
        _g("refuted", case="b", model_=None),
        _g("refuted", "P", "c"),
    ]
    script += [_g("unknown", case="d")]
    judged: list[str] = []

    def judge(g: Goal) -> tuple[list[str], str]:
        judged.append(g.case)
        return [g.case], "NOT confirmed by replay"

    found, last, dt = replay_ladder(lambda limit, seed: script[seed], judge, 500, 4)
    # a refutation without a model is not judged; the last one judged is what is kept
    assert judged == ["a", "c"] and found is not None and found.trace == ["c"]
    assert not found.confirmed and last.goal.case == "d" and dt == 4.0
    # a confirmed replay ends the ladder
    judged.clear()
    found, _, dt = replay_ladder(
        lambda limit, seed: _g("refuted", case=str(seed)),
        lambda g: ([g.case], "confirmed: it breaks" if g.case == "1" else "NOT confirmed"),
        500,
        3,
    )
    assert found is not None and found.confirmed and found.trace == ["1"] and dt == 2.0


def test_replay_ladder_stops_at_a_proof_only_when_told() -> None:
    seeds: list[int] = []

    def ask(limit: int, seed: int) -> Goal:
        seeds.append(seed)
        return _g("proved")

    found, last, _ = replay_ladder(ask, lambda g: ([], ""), 500, 3, stop_proved=True)
    assert found is None and last.goal.status == "proved" and seeds == [0]
    seeds.clear()
    replay_ladder(ask, lambda g: ([], ""), 500, 3)
    assert seeds == [0, 1, 2]


def test_name_rows_one_row_per_name() -> None:
    gs = [_g("proved", "A", "x"), _g("unknown", "B", "y"), _g("proved", "A", "z")]
    gs += [_g("refuted", "B", "w")]
    rows = name_rows(gs, ("A", "B", "C"), lambda n: f"T => {n}", lambda n, mine: f"{len(mine)}")
    assert [(r["obligation"], r["status"], r["bounds"]) for r in rows] == [
        ("T => A", "proved", "2"),
        ("T => B", "refuted", "2"),
        ("T => C", "unknown", "0"),  # a row with no goals proves nothing
    ]
    assert rows[1]["replay"] == "not proved: y (unknown); not proved: w (refuted)"
    assert rows[0]["seconds"] == 2.0 and rows[0]["invariants"] == ("A",)
    one = goal_row("o", gs[1:], "b", (), most=1)
    assert one["replay"] == "not proved: y (unknown)" and one["kind"] == "inductive"
