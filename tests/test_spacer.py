"""Spacer (z3's IC3/PDR engine) at a small N: it proves with no hand lemma, refutes seeded
bugs, and its child process is killed at its deadline; its place on the dashboard."""

from __future__ import annotations

import pytest

from kvpool import verify
from kvpool.proofs import runner, spacer
from kvpool.proofs.runner import ObligationResult


def test_every_obligation_proved_at_n2_in_one_query() -> None:
    (ans,) = spacer.check(2, together=True, timeout_ms=60000).values()
    assert (ans.name, ans.status) == (spacer.ALL, "proved")


def test_state_and_step_obligations_each_proved_at_n2() -> None:
    got = spacer.check(2, ("INV-FREE", "ORD-RELEASE"), timeout_ms=60000)
    assert {k: a.status for k, a in got.items()} == {"INV-FREE": "proved", "ORD-RELEASE": "proved"}


@pytest.mark.parametrize(("bug", "name"), runner.SPACER_MUTANTS)
def test_seeded_bug_refuted(bug: str, name: str) -> None:
    (ans,) = spacer.check(3, (name,), frozenset([bug]), timeout_ms=60000).values()
    assert ans.status == "refuted"


def test_a_refuted_conjunct_refutes_the_joint_query() -> None:
    (ans,) = spacer.check(3, None, frozenset(["lifo-handout"]), 60000, together=True).values()
    assert ans.status == "refuted"


def test_isolated_child_answers_and_is_killed_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (ans,) = spacer.check_isolated(2, ("INV-NULL",), timeout_s=60.0).values()
    assert ans.status == "proved"
    monkeypatch.setattr(spacer, "STARTUP_S", 0.0)
    (late,) = spacer.check_isolated(2, ("INV-NULL",), timeout_s=0.05).values()
    assert late.status == "timeout"


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Spacer obligation"):
        spacer.check(2, ("LO-HI",))
    with pytest.raises(ValueError, match="N must be"):
        spacer.check(0)
    with pytest.raises(ValueError, match="N must be"):
        spacer.check_isolated(0, ("INV-REF",))


def _rows(status: str) -> list[ObligationResult]:
    rows = [
        ObligationResult(
            f"{name} (Spacer, N=6)",
            "spacer",
            runner.SPACER_TECHNIQUE,
            (name,),
            "N=6, every k, lists<=2 keys=2 watchers=2, no hand lemma",
            status if name == "RES-NUMFREE" else "proved",
            1.0,
        )
        for name in spacer.OBLIGATIONS
    ]
    rows.append(
        ObligationResult(
            "INV-FREE [touch-no-remove]",
            "mutant",
            runner.SPACER_TECHNIQUE,
            ("INV-FREE",),
            "N=3",
            "expected-refuted",
            1.0,
        )
    )
    return rows


def test_dashboard_labels_spacer_cells() -> None:
    checks = {c.name: c for c in verify.proof_checks(_rows("proved"))}
    check = checks[runner.SPACER_TECHNIQUE]
    assert check.ok
    assert check.summary == (
        "proved for every k at fixed N, Spacer, no hand lemma: N=6 16/16 obligations; "
        "1/1 mutants refuted"
    )
    assert check.cells["INV-WATCH"] == verify.Cell("proved every k", "N=6, Spacer, no hand lemma")
    assert check.caught == {"spec:touch-no-remove": True}


def test_dashboard_fails_on_an_obligation_without_a_row() -> None:
    # RES-NUMFREE has no row in the matrix: its failure must still fail the check
    checks = {c.name: c for c in verify.proof_checks(_rows("timeout"))}
    check = checks[runner.SPACER_TECHNIQUE]
    assert not check.ok
    assert "NOT proved: RES-NUMFREE (Spacer, N=6): timeout" in check.summary


def test_spacer_column_only_when_it_ran() -> None:
    without = verify.matrix(verify.proof_checks(_rows("proved")[:0]))
    assert runner.SPACER_TECHNIQUE not in [str(c.header) for c in without.columns]
    shown = verify.matrix(verify.proof_checks(_rows("proved")))
    assert any(runner.SPACER_TECHNIQUE in str(c.header) for c in shown.columns)


def test_one_switch_puts_spacer_in_make_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [p for p, _ in verify._proof_parts("full")]
    assert ("spacer" in parts) == bool(runner.PROFILES["default"]["spacer"])
    monkeypatch.setitem(runner.PROFILES["default"], "spacer", ((4, spacer.OBLIGATIONS),))
    assert "spacer" in [p for p, _ in verify._proof_parts("full")]
    monkeypatch.setitem(runner.PROFILES["default"], "spacer", ())
    assert "spacer" not in [p for p, _ in verify._proof_parts("full")]


def test_runner_rows_at_n2_fill_the_dashboard() -> None:
    rows = runner.run_spacer(((2, spacer.OBLIGATIONS),), 60.0)
    assert [(r.kind, r.status) for r in rows] == [
        ("spacer", "proved"),
        ("mutant", "expected-refuted"),
        ("mutant", "expected-refuted"),
    ]
    assert rows[0].invariants == spacer.OBLIGATIONS
    checks = {c.name: c for c in verify.proof_checks(rows)}
    check = checks[runner.SPACER_TECHNIQUE]
    assert check.ok, check.summary
    assert check.summary.startswith(
        "proved for every k at fixed N, Spacer, no hand lemma: N=2 16/16 obligations"
    )
    assert check.caught == {"spec:touch-no-remove": True, "spec:lifo-handout": True}


def test_every_profile_asks_every_obligation_at_each_n_it_names() -> None:
    # the docs and README say "every obligation at N = ...": each N's groups cover them all
    for profile in runner.PROFILES.values():
        asked: dict[int, set[str]] = {}
        for n, names in profile["spacer"]:
            assert set(names) <= set(spacer.OBLIGATIONS)
            asked.setdefault(n, set()).update(names)
        for n, names_at_n in asked.items():
            assert names_at_n == set(spacer.OBLIGATIONS), n


def test_the_spacer_part_runs_from_a_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(runner.PROFILES["fast"], "spacer", ((2, spacer.STATE_OBLIGATIONS),))
    rows = runner.run("fast", "spacer")
    assert [r.obligation for r in rows] == [
        "every state obligation (Spacer, N=2)",
        "INV-FREE [touch-no-remove]",
        "ORD-HANDOUT [lifo-handout]",
    ]
    assert all(r.ok for r in rows)
