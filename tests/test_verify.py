"""``make verify`` must never show green for a check that did not run or did not hold.

The dashboard is driven here with stand-in runners, so each way a check can go
wrong is shown to turn the run red; one real runner (the golden vectors, the
cheapest) is run for real to show the catalogue attribution is data, not text.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from kvpool import verify
from kvpool.proofs.runner import ObligationResult
from kvpool.verify import ROWS, Cell, Check, Profile


def _everything_checked(profile: Profile) -> Check:
    return Check(
        "stand-in",
        "hypothesis lockstep",
        True,
        "fine",
        0.0,
        cells={row: Cell("tested", "5 runs") for row in ROWS},
        caught={"some-bug": True},
        evidence={"some-bug": "INV-FREE"},
    )


def _run(monkeypatch: pytest.MonkeyPatch, *runners: verify.Runner, tmp: Path) -> tuple[int, str]:
    monkeypatch.setattr(verify, "RUNNERS", list(runners))
    out = io.StringIO()
    monkeypatch.setattr(verify, "_console", lambda: Console(file=out, width=300))
    code = verify.main(["--profile", "fast", "--jobs", "0", "--json", str(tmp / "v.json")])
    return code, out.getvalue()


def test_all_good_is_green_and_moves_shared_bounds_into_the_header(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, text = _run(monkeypatch, _everything_checked, tmp=tmp_path)
    assert code == 0, text
    assert "all 1 checks passed" in text
    assert "5 runs" in text and "(5 runs)" not in text  # said once, in the header
    assert "INV-FREE" in text  # the catalogue says what the technique reported
    assert json.loads((tmp_path / "v.json").read_text())["ok"] is True


def test_a_crashing_check_is_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def crashes(profile: Profile) -> Check:
        raise RuntimeError("solver went away")

    code, text = _run(monkeypatch, _everything_checked, crashes, tmp=tmp_path)
    assert code == 1
    assert "crashed: RuntimeError: solver went away" in text
    assert json.loads((tmp_path / "v.json").read_text())["ok"] is False


def test_a_failed_cell_is_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def one_bad_cell(profile: Profile) -> Check:
        return Check("z3", "z3 BMC", True, "", 0.0, cells={"INV-REF": Cell("failed", "unknown")})

    code, text = _run(monkeypatch, _everything_checked, one_bad_cell, tmp=tmp_path)
    assert code == 1
    assert "INV-REF unknown" in text


def test_a_row_no_technique_covers_is_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def all_but_one(profile: Profile) -> Check:
        check = _everything_checked(profile)
        del check.cells["ORD-UNPIN"]
        return check

    code, text = _run(monkeypatch, all_but_one, tmp=tmp_path)
    assert code == 1
    assert "nothing proved or tested ORD-UNPIN" in text


def _covers_one_row(profile: Profile) -> Check:
    return Check("proofs", "z3 BMC", True, "fine", 0.0, cells={"INV-REF": Cell("bounded", "k<=2")})


def test_only_runs_the_named_runners_and_does_not_ask_the_others_rows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(verify, "RUNNERS", [verify.single(_covers_one_row)])
    out = io.StringIO()
    monkeypatch.setattr(verify, "_console", lambda: Console(file=out, width=300))
    argv = ["--profile", "fast", "--jobs", "0", "--json", str(tmp_path / "v.json")]
    # every runner: the rows it leaves are failures
    assert verify.main(argv) == 1
    assert "nothing proved or tested ORD-UNPIN" in out.getvalue()
    # --only: the runner alone, its column alone, and its rows are all that is asked
    out.seek(0), out.truncate()
    assert verify.main([*argv, "--only", "_covers_one_row"]) == 0, out.getvalue()
    assert "nothing proved" not in out.getvalue()
    assert "hypothesis lockstep" not in out.getvalue()  # a column of a runner not run
    assert json.loads((tmp_path / "v.json").read_text())["only"] == ["_covers_one_row"]


def test_only_refuses_a_runner_that_does_not_exist(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        verify.main(["--only", "proofs,prooofs"])
    assert exc.value.code == 2
    assert "no runner named prooofs" in capsys.readouterr().err


def test_the_deep_profile_runs_the_proofs_deep_parts() -> None:
    from kvpool.proofs import runner as proofs

    deep = dict(verify._proof_parts("deep"))
    assert set(deep) == set(proofs.PARTS)  # pool-source and Spacer included
    # ordered by the deep parts' own measured costs, not make verify's
    assert deep == {p: verify.DEEP_PROOF_COSTS[p] for p in proofs.PARTS}
    assert deep != dict(verify._proof_parts("full"))
    assert verify._proof_level("deep") == "deep" and verify._proof_level("full") == "default"


def test_a_mutant_nobody_caught_is_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def misses(profile: Profile) -> Check:
        return Check("vectors", "golden vectors", True, "", 0.0, caught={"sneaky": False})

    code, text = _run(monkeypatch, _everything_checked, misses, tmp=tmp_path)
    assert code == 1
    assert "mutant sneaky was caught by no technique" in text
    assert "nobody" in text


def test_a_mutant_one_technique_misses_is_shown_but_not_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def misses(profile: Profile) -> Check:
        return Check("vectors", "golden vectors", True, "", 0.0, caught={"some-bug": False})

    code, text = _run(monkeypatch, _everything_checked, misses, tmp=tmp_path)
    assert code == 0, text
    row = next(line for line in text.splitlines() if "some-bug" in line)
    assert "golden vectors" in row  # in the "missed by" column


def test_the_golden_vectors_runner_reports_real_catalogue_results() -> None:
    check = verify.run_vectors("fast")
    assert check.ok, check.summary
    assert check.caught["lifo-fifo-swapped"] is True
    assert "state differs" in check.evidence["lifo-fifo-swapped"]
    # Fixed vectors cannot see everything: the catalogue says so rather than hiding it.
    assert not all(check.caught.values())


def test_crosshair_cells_are_as_strong_as_the_weakest_entry_point_of_the_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpool.contracts import runner as contracts
    from kvpool.contracts.runner import ContractResult

    def fake(statuses: dict[str, str]) -> dict[str, Cell]:
        results = [
            ContractResult(name, inv, status, 0.0)  # type: ignore[arg-type]
            for name, (inv, status) in {
                "queue_remove": (("INV-LIST",), statuses["queue"]),
                "touch": (("INV-LIST", "INV-REF"), statuses["pool"]),
            }.items()
        ]
        monkeypatch.setattr(contracts, "run", lambda *a, **k: results)
        return verify.run_contracts("fast").cells

    both = fake({"queue": "confirmed", "pool": "confirmed"})
    assert both["INV-LIST"] == Cell("exhaustive", "exhaustive, <= 3 blocks")
    mixed = fake({"queue": "confirmed", "pool": "no counterexample within budget"})
    assert (mixed["INV-LIST"].status, mixed["INV-LIST"].detail) == (
        "tested",
        "1/2 exhaustive (<= 3 blocks)",
    )
    assert mixed["INV-REF"] == Cell("tested", "no counterexample within budget")
    broken = fake({"queue": "counterexample", "pool": "confirmed"})
    assert broken["INV-LIST"] == Cell("failed", "queue_remove")


def test_proof_cells_say_which_bound_they_hold_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvpool.proofs import runner as proofs
    from kvpool.proofs.runner import ObligationResult as R

    fixed = proofs.FIXEDN_TECHNIQUE
    rows = [
        R("INV-FREE", "BMC", "z3 BMC", ("INV-FREE",), "N=4 k=4 lists<=2 keys=2", "proved", 0.0),
        R("INV-FREE", "fixed-N", fixed, ("INV-FREE",), "N=3, every k, lists<=2", "proved", 0.0),
        R("INV-FREE", "fixed-N", fixed, ("INV-FREE",), "N=5, every k, lists<=2", "proved", 0.0),
        R("S => INV-FREE", "inductive", "z3 induction", ("INV-FREE",), "every N", "proved", 0.0),
        R(
            "S and T => PERM",
            "inductive",
            "z3 induction",
            ("INV-FREE", "INV-CONSERVE"),
            "every N",
            "proved",
            0.0,
        ),
        R("H satisfiable at N=3", "witness", fixed, (), "N=3", "witnessed", 0.0),
        R("z3 == spec", "differential", "differential", (), "60 states", "agree", 0.0),
    ]
    monkeypatch.setattr(proofs, "run", lambda profile, **kw: rows)
    checks = {c.name: c for c in verify.run_proofs("fast")}
    assert checks["z3 BMC"].cells["INV-FREE"] == Cell("bounded", "N=4 k=4 lists<=2")
    assert checks[fixed].cells["INV-FREE"] == Cell("proved every k", "N=3..5")
    every_n = checks["z3 induction"].cells
    assert every_n["INV-FREE"].status == "proved every N"
    # a counting invariant whose strengthening alone is proved is not "proved every N"
    assert every_n["INV-CONSERVE"].status == "partial"
    # the second solver was not run in this stand-in: that is a failure, never a pass
    cvc5 = checks["cvc5 re-checks z3's proofs (SMT-LIB 2)"]
    assert (cvc5.ok, cvc5.summary) == (False, "not run")
    assert checks["every hypothesis satisfiable: witnesses decoded and replayed"].ok


def test_a_counting_invariant_is_proved_every_n_only_by_its_own_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpool.proofs import runner as proofs
    from kvpool.proofs.runner import ObligationResult as R

    perm = R(
        "S and T => PERM",
        "inductive",
        "z3 induction",
        ("INV-FREE", "INV-CONSERVE"),
        "every N",
        "proved",
        0.0,
    )
    own = R(
        "init, S and T => INV-CONSERVE (ghost sums)",
        "inductive",
        "z3 induction",
        ("INV-CONSERVE",),
        "every N",
        "proved",
        0.0,
    )
    for rows in ([perm, own], [own, perm]):  # in either order
        monkeypatch.setattr(proofs, "run", lambda profile, rows=rows, **kw: rows)
        cells = {c.name: c for c in verify.run_proofs("fast")}["z3 induction"].cells
        assert cells["INV-CONSERVE"].status == "proved every N"
    # its own row not proved: failed, never proved
    bad = R(
        own.obligation, "inductive", "z3 induction", ("INV-CONSERVE",), "every N", "unknown", 0.0
    )
    monkeypatch.setattr(proofs, "run", lambda profile, **kw: [perm, bad])
    cells = {c.name: c for c in verify.run_proofs("fast")}["z3 induction"].cells
    assert cells["INV-CONSERVE"].status == "failed"


def test_a_rule_proved_every_n_is_marked_so_and_a_fixed_n_only_rule_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpool.proofs import runner as proofs
    from kvpool.proofs.runner import ObligationResult as R

    rows = [
        R(
            "S and T => ORD-UNPIN",
            "inductive",
            "z3 induction",
            ("ORD-UNPIN",),
            "every N",
            "proved",
            0.0,
        ),
        R(
            "RES-CACHED for every N",
            "scope",
            "z3 induction",
            ("RES-CACHED",),
            "why",
            "fixed-N-only",
            0.0,
        ),
    ]
    monkeypatch.setattr(proofs, "run", lambda profile, **kw: rows)
    check = {c.name: c for c in verify.run_proofs("fast")}["z3 induction"]
    assert check.cells["ORD-UNPIN"] == Cell(
        "proved every N", "every N, lists <= 2, 2 keys, 2 watcher ids, one step"
    )
    assert "RES-CACHED: fixed-N-only" in check.summary
    assert "ORD-HANDOUT" not in check.cells  # no row, no cell


def test_a_failed_row_with_no_matrix_cell_still_fails_its_check() -> None:
    """RES-* and RANK-BOUNDS have no row in the matrix, and a technique the table does
    not know has no column: their failures must still fail the run (seeded: before this
    check such rows were skipped, and the check stayed green)."""
    from kvpool.proofs.runner import FIXEDN_TECHNIQUE as FIXEDN
    from kvpool.proofs.runner import ObligationResult as R

    proved = R("RES-RESET at N=3", "fixed-N", FIXEDN, ("RES-RESET",), "N=3", "proved", 0.0)
    failed = R("RES-RESET at N=4", "fixed-N", FIXEDN, ("RES-RESET",), "N=4", "unknown", 0.0)
    checks = {c.name: c for c in verify.proof_checks([proved])}
    assert checks[FIXEDN].ok
    checks = {c.name: c for c in verify.proof_checks([proved, failed])}
    assert not checks[FIXEDN].ok
    assert "NOT ok: RES-RESET at N=4: unknown" in checks[FIXEDN].summary
    stranger = R("X holds", "fixed-N", "z3 something new", ("INV-REF",), "N=2", "refuted", 0.0)
    (new,) = [c for c in verify.proof_checks([proved, stranger]) if c.name == "z3 something new"]
    assert not new.ok and "NOT ok: X holds: refuted" in new.summary


# -- the parts, run side by side in fresh interpreters ------------------------------------------


def _parallel(monkeypatch: pytest.MonkeyPatch, *runners: verify.Runner) -> tuple[list[Check], str]:
    monkeypatch.setattr(verify, "RUNNERS", list(runners))
    out = io.StringIO()
    checks = verify.run_all("fast", Console(file=out, width=300), jobs=2)
    return checks, out.getvalue()


def test_a_part_runs_in_a_child_and_its_checks_come_back_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the child looks the runner up by name in the real RUNNERS: the golden vectors
    vectors = verify.single(verify.run_vectors)
    (check,), _ = _parallel(monkeypatch, vectors)
    assert check.ok, check.summary
    assert check.caught["lifo-fifo-swapped"] is True
    assert check.cells["INV-REF"].status == "tested"


def test_a_part_that_crashes_in_its_child_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = verify.Runner(
        "no-such-runner", "x", lambda p: [("all", 1.0)], lambda p, q: None, lambda p, x: []
    )
    (check,), text = _parallel(monkeypatch, ghost)
    assert not check.ok
    assert "crashed: KeyError" in check.summary
    assert "Traceback" in text  # the child's traceback is shown


def _hangs(monkeypatch: pytest.MonkeyPatch) -> verify.Runner:
    """A runner whose one part sleeps for two minutes in its child."""
    import subprocess
    import sys

    def spawn_sleeper(task: verify._Task, profile: str) -> None:
        task.started = verify.time.perf_counter()
        task.proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
        )

    monkeypatch.setattr(verify, "_spawn", spawn_sleeper)
    return verify.Runner("hangs", "x", lambda p: [("all", 1.0)], lambda p, q: None, lambda p, x: [])


def test_a_part_that_hangs_is_stopped_and_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "TASK_TIMEOUT", 1.0)
    (check,), _ = _parallel(monkeypatch, _hangs(monkeypatch))
    assert not check.ok
    assert "timed out" in check.summary


def test_a_deep_part_that_hangs_is_stopped_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(verify, "DEEP_TASK_TIMEOUT", 1.0)
    monkeypatch.setattr(verify, "RUNNERS", [_hangs(monkeypatch)])
    out = io.StringIO()
    (check,) = verify.run_all("deep", Console(file=out, width=300), jobs=1, keep=tmp_path)
    assert not check.ok and "timed out after 1s" in check.summary


def test_keep_keeps_each_parts_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    vectors = verify.single(verify.run_vectors)
    monkeypatch.setattr(verify, "RUNNERS", [vectors])
    out = io.StringIO()
    (check,) = verify.run_all("fast", Console(file=out, width=300), jobs=1, keep=tmp_path)
    assert check.ok, check.summary
    (kept,) = tmp_path.iterdir()
    assert "payload" in json.loads(kept.read_text())


def _inv_free_proved(seconds: float) -> ObligationResult:
    from kvpool.proofs import runner as proofs

    return ObligationResult(
        "INV-FREE",
        "fixed-N",
        proofs.FIXEDN_TECHNIQUE,
        ("INV-FREE",),
        "N=3, every k",
        "proved",
        seconds,
    )


def _lifo_mutant(bounds: str, seconds: float) -> ObligationResult:
    return ObligationResult(
        "x [lifo-handout]",
        "mutant",
        "z3 BMC",
        ("ORD-HANDOUT",),
        bounds,
        "expected-refuted",
        seconds,
    )


def test_proof_rows_survive_the_trip_through_json() -> None:

    rows = [_inv_free_proved(1.0), _lifo_mutant("N=4", 1.0)]
    payload = json.loads(json.dumps([verify.asdict(r) for r in rows]))
    direct = {c.name: c for c in verify.proof_checks(rows)}
    via_json = {c.name: c for c in verify._proof_combine("fast", [payload])}
    assert direct == via_json
    assert via_json["z3 BMC"].caught == {"spec:lifo-handout": True}


def test_a_mutant_the_differential_misses_fails_its_check() -> None:
    from kvpool.proofs.runner import ObligationResult as R

    def row(bug: str, reading: str, status: str) -> R:
        return R(
            f"differential ({reading} reading) catches [{bug}]",
            "differential",
            "differential",
            (),
            f"{reading}: [{bug}] ...",
            status,
            0.1,
        )

    agree = R(
        "z3 transition (finite reading) == spec",
        "differential",
        "differential",
        (),
        "b",
        "agree",
        0.1,
    )
    caught = [row("lifo-handout", "finite", "caught"), row("lifo-handout", "unbounded", "caught")]
    checks = {c.name: c for c in verify.proof_checks([agree, *caught])}
    diff = checks["z3 encoding vs spec (differential)"]
    assert diff.ok and diff.caught == {"spec:lifo-handout": True}
    assert "2 of" not in diff.summary and "1/1 on the finite reading" in diff.summary
    missed = [*caught, row("front-reversed", "finite", "missed")]
    diff = {c.name: c for c in verify.proof_checks([agree, *missed])}[
        "z3 encoding vs spec (differential)"
    ]
    assert not diff.ok
    assert diff.caught["spec:front-reversed"] is False
    assert "NOT caught on the finite reading: front-reversed" in diff.summary
    assert "1/2 on the finite reading" in diff.summary


def test_a_mutant_row_is_named_without_its_brackets() -> None:
    # A multi-key every-N row reads "INV-CACHE [bug] (every N)": the dashboard showed
    # "spec:bug] (every N)" when it cut at the last "[" and stripped a trailing "]".
    assert verify._mutant_name("INV-CACHE [mk-x] (every N)") == "mk-x (every N)"
    assert verify._mutant_name("INV-REF [no-underflow-check]") == "no-underflow-check"


def test_obligations_lists_every_proof_row_with_technique_bounds_status_and_seconds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--obligations FILE`` is the per-obligation account (technique, bounds, solver
    time) issue 16 asks a note to give; ``--json`` carries the same rows. Seeded: a run
    whose proof rows never reach the table (or reach it without their bounds or status)
    fails here."""
    from kvpool.proofs import runner as proofs
    from kvpool.proofs.runner import ObligationResult as R

    rows = [
        _inv_free_proved(1.25),
        R("RES-RESET", "fixed-N", proofs.FIXEDN_TECHNIQUE, ("RES-RESET",), "N=4", "unknown", 2.5),
        _lifo_mutant("N=4, k<=8", 0.5),
    ]

    def proofs_stand_in(profile: Profile) -> list[Check]:
        return verify.proof_checks(rows)

    monkeypatch.setattr(verify, "RUNNERS", [proofs_stand_in])
    monkeypatch.setattr(verify, "_console", lambda: Console(file=io.StringIO(), width=300))
    table_file, json_file = tmp_path / "o.md", tmp_path / "v.json"
    code = verify.main(
        [
            "--profile",
            "fast",
            "--jobs",
            "0",
            "--json",
            str(json_file),
            "--obligations",
            str(table_file),
        ]
    )
    assert code == 1  # the unknown row fails the run; the table still says what happened
    table = table_file.read_text(encoding="utf-8")
    assert f"| {proofs.FIXEDN_TECHNIQUE} | INV-FREE | N=3, every k | proved | 1.25 |" in table
    assert f"| {proofs.FIXEDN_TECHNIQUE} | RES-RESET | N=4 | unknown | 2.50 |" in table
    assert "| z3 BMC | x [lifo-handout] | N=4, k<=8 | expected-refuted | 0.50 |" in table
    assert f"| {proofs.FIXEDN_TECHNIQUE} | 2 | 1 proved, 1 unknown | 3.8 |" in table
    written = json.loads(json_file.read_text())["obligations"]
    assert [(r["obligation"], r["bounds"], r["status"]) for r in written] == [
        (r.obligation, r.bounds, r.status) for r in rows
    ]
