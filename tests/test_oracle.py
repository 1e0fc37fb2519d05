"""The conformance oracle: targets, levels, the CLI, traces, trace validation, check()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvpool.impl import BlockPool
from kvpool.oracle import check, check_log, record
from kvpool.oracle.cli import main
from kvpool.oracle.conformance import conform
from kvpool.oracle.pytest_plugin import NonConformance
from kvpool.oracle.target_base import TargetError
from kvpool.oracle.targets import resolve
from kvpool.oracle.traceformat import SavedTrace, op_from_json, op_to_json
from kvpool.oracle.tracereplay import replay
from kvpool.spec.ops import BlockRef, CacheBlocks, FreeBlocks, GetNewBlocks, UnpinBlocks

MUTANT = "python:oracle_targets:LifoFifoSwapped"


@pytest.mark.parametrize("name", ["reference", "spec"])
@pytest.mark.parametrize("level", ["safety", "exact", "robust"])
def test_reference_and_spec_conform_at_every_level(name: str, level: str) -> None:
    report = conform(resolve(name), level, examples=25, steps=20)
    assert report.conforms, report.message


def test_a_mutant_fails_with_a_short_trace_that_replays() -> None:
    target = resolve(MUTANT)
    report = conform(target, "exact", examples=50, steps=15, max_blocks=6)
    assert not report.conforms and report.rule == "state differs"
    assert report.trace is not None
    assert len([s for s in report.trace.steps if "call" in s]) <= 6  # shrunk
    again = replay(report.trace, resolve(MUTANT))
    assert again.divergence is not None and again.divergence.rule == "state differs"
    assert replay(report.trace, resolve("reference")).divergence is None


def test_capabilities_are_detected_and_skips_reported() -> None:
    target = resolve("python:oracle_targets:MinimalPool")
    assert "UnpinBlocks" not in target.capabilities
    assert "CacheBlocks" not in target.capabilities
    assert "evict_first" not in target.capabilities
    assert any("unpin_blocks" in s for s in target.skipped)
    assert any("exposes no state" in s for s in target.skipped)
    assert conform(target, "exact", examples=25).conforms


def test_unknown_targets_are_usage_errors() -> None:
    for bad in ["nonsense", "python:nosuchmodule:X", "python:oracle_targets:Nope", "python:x"]:
        with pytest.raises(TargetError):
            resolve(bad)
    result = CliRunner().invoke(main, ["conform", "--target", "nonsense"])
    assert result.exit_code == 2


def test_cli_conform_report_trace_replay_show(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["conform", "-t", "reference", "-n", "20"])
    assert ok.exit_code == 0, ok.output
    report = tmp_path / "r.json"
    bad = runner.invoke(
        main,
        [
            "conform",
            "-t",
            MUTANT,
            "-n",
            "50",
            "--steps",
            "15",
            "--max-blocks",
            "6",
            "--json",
            str(report),
            "--save-trace",
            str(tmp_path / "traces"),
        ],
    )
    assert bad.exit_code == 1, bad.output
    data = json.loads(report.read_text())
    assert data["conforms"] is False and data["violated"] == "state differs"
    (trace,) = (tmp_path / "traces").iterdir()
    assert runner.invoke(main, ["replay", str(trace), "-t", MUTANT]).exit_code == 1
    assert runner.invoke(main, ["replay", str(trace), "-t", "reference"]).exit_code == 0
    # without --target, a trace recorded on a python: target runs nothing: exit 2
    unnamed = runner.invoke(main, ["replay", str(trace)])
    assert unnamed.exit_code == 2 and "--target" in unnamed.output, unnamed.output
    # --skip takes capability names only, and --max-pools 1 is accepted
    assert runner.invoke(main, ["conform", "-t", "reference", "--skip", "Nope"]).exit_code == 2
    one = ["conform", "-t", "reference", "-n", "5", "--max-pools", "1", "--skip", "Touch"]
    assert runner.invoke(main, one).exit_code == 0
    shown = runner.invoke(main, ["show", str(trace)])
    calls = [s["call"]["op"] for s in json.loads(trace.read_text())["steps"] if "call" in s]
    assert shown.exit_code == 0 and calls and all(c in shown.output for c in calls)


def test_a_narrow_terminal_folds_a_long_call_and_elides_nothing() -> None:
    import io

    from rich.console import Console

    from kvpool.oracle.cli import render

    ops = [
        GetNewBlocks(3),
        CacheBlocks([1, 2, 3], ["alpha", "beta", "gamma"]),
        FreeBlocks([3, 2, 1]),
    ]
    trace = SavedTrace([(4, True, False)], [{"call": op_to_json(op)} for op in ops])
    out = io.StringIO()
    Console(file=out, width=60, no_color=True).print(render(replay(trace, resolve(MUTANT)), "t"))
    text = out.getvalue()
    assert "\u2026" not in text, text  # rich's ellipsis: part of a call would be hidden
    assert "gamma" in text and "CacheBlocks" in text


def test_trace_json_round_trips_odd_values() -> None:
    ops = [
        GetNewBlocks(True),
        GetNewBlocks(1.5),
        FreeBlocks((1, "x", None), evict_first=None),
        UnpinBlocks((BlockRef(1, 2),), "w"),
        CacheBlocks((1,), (["unhashable"],)),
    ]
    for op in ops:
        assert op_from_json(json.loads(json.dumps(op_to_json(op)))) == op
    saved = SavedTrace([(4, True, False)], [{"call": op_to_json(ops[0])}])
    assert SavedTrace.from_json(json.loads(json.dumps(saved.to_json()))) == saved


def _workload(pool: object) -> None:
    blocks = pool.get_new_blocks(3)  # type: ignore[attr-defined]
    pool.cache_blocks(blocks[:2], ["a", "ab"])  # type: ignore[attr-defined]
    pool.touch(blocks[:1])  # type: ignore[attr-defined]
    pool.unpin_blocks(blocks[:1], lambda b: None)  # type: ignore[attr-defined]
    pool.unpin_blocks(blocks[:1], lambda b: None)  # type: ignore[attr-defined]
    pool.free_blocks(blocks[1:])  # type: ignore[attr-defined]
    pool.get_cached_block("ab")  # type: ignore[attr-defined]
    pool.get_new_blocks(7)  # type: ignore[attr-defined]
    pool.take_events()  # type: ignore[attr-defined]


def test_record_and_check_log(tmp_path: Path) -> None:
    from kvpool import mutants

    good = tmp_path / "good.log"
    rec = record(BlockPool(8, True, enable_kv_cache_events=True), good)
    _workload(rec)
    rec.close()
    assert check_log(good).divergence is None
    bad = tmp_path / "bad.log"
    rec = record(
        mutants.get("watcher-only-last").pool_class()(8, True, enable_kv_cache_events=True), bad
    )
    _workload(rec)
    rec.close()
    result = check_log(bad)
    assert result.divergence is not None and result.divergence.rule == "fired differs"
    assert CliRunner().invoke(main, ["check-log", str(bad)]).exit_code == 1
    assert CliRunner().invoke(main, ["check-log", str(good)]).exit_code == 0


def test_check_for_users_suites() -> None:
    assert check(BlockPool, level="exact", examples=20).conforms
    with pytest.raises(NonConformance, match="state differs"):
        check(resolve(MUTANT), level="exact", examples=50, steps=15, max_blocks=6)


def test_a_failing_check_in_a_users_suite_points_at_their_line(tmp_path: Path) -> None:

    here = Path(__file__).resolve().parent
    (tmp_path / "test_mine.py").write_text(
        "from kvpool.oracle import check\n"
        "from oracle_targets import LifoFifoSwapped\n\n"
        "def test_my_pool():\n"
        "    check(LifoFifoSwapped, examples=50, steps=15, max_blocks=6)\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(here)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "does not conform at exact: state differs" in run.stdout
    assert "test_mine.py:5" in run.stdout  # the user's own line
    assert "pytest_plugin.py" not in run.stdout  # none of ours


def test_soak_runs_long_workloads_from_the_command_line() -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["soak", "-t", "reference", "--ops", "3000", "--blocks", "500"])
    assert ok.exit_code == 0 and "conforms at exact: 3,000 calls" in ok.output, ok.output
    bad = runner.invoke(main, ["soak", "-t", MUTANT, "--ops", "3000", "--blocks", "500"])
    assert bad.exit_code == 1 and "VIOLATION call" in bad.output, bad.output
    # a pool without the API the workload needs is told to use conform: a usage error
    lacking = runner.invoke(main, ["soak", "-t", "python:oracle_targets:MinimalPool"])
    assert lacking.exit_code == 2 and "use kvpool conform" in lacking.output


def test_fast_incremental_check_passes_reference_and_catches_a_mutant() -> None:
    from kvpool.oracle.fastcheck import run_random

    good = run_random(resolve("reference"), ops=5000, num_blocks=200, check_every=100)
    assert good.divergence is None and good.ops == 5000
    bad = run_random(resolve(MUTANT), ops=5000, num_blocks=200, check_every=100)
    assert bad.divergence is not None


@pytest.mark.parametrize(
    ("subject", "caught_at"),
    [
        ("reference", ()),
        ("lifo-fifo-swapped", ("exact", "robust")),  # reorders on purpose: safety allows it
        ("prepend-counter-stale", ("safety", "exact", "robust")),  # breaks INV-FREE
        ("double-free-clamped", ("robust",)),  # bad input only
        ("watcher-only-last", ("robust",)),  # watchers only
    ],
)
def test_fast_check_at_each_level(subject: str, caught_at: tuple[str, ...]) -> None:
    from kvpool import mutants
    from kvpool.oracle.fastcheck import run_random
    from kvpool.oracle.pytest_plugin import as_target

    target = (
        resolve(subject) if subject == "reference" else as_target(mutants.get(subject).pool_class())
    )
    for level in ("safety", "exact", "robust"):
        result = run_random(target, ops=4000, num_blocks=200, check_every=100, level=level)
        assert (result.divergence is not None) == (level in caught_at), (level, result)
        if result.divergence is None:
            assert result.ops >= 4000


def test_throughput_benchmark_returns_rows() -> None:
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "oracle_throughput.py"
    spec = importlib.util.spec_from_file_location("oracle_throughput", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["oracle_throughput"] = bench  # its dataclass looks the module up
    spec.loader.exec_module(bench)
    rows = bench.measure(2000, ("reference", MUTANT), ("safety", "exact"), (200,), repeats=1)
    assert [(r.target, r.level) for r in rows] == [
        ("reference", "safety"),
        ("reference", "exact"),
        (MUTANT, "safety"),
        (MUTANT, "exact"),
    ]
    assert all(r.calls_per_second > 0 and r.divergence is None for r in rows[:3])
    assert rows[3].divergence is not None and rows[3].calls_per_second == 0.0
    assert "diverges" in rows[3].line() and "checked calls/s" in rows[0].line()


def test_golden_vectors_match_the_spec_and_judge_targets(tmp_path: Path) -> None:
    import shutil

    from kvpool.oracle.vectors import DEFAULT_DIR, check_vectors, run_vectors

    assert check_vectors() == []
    assert all(d is None for _, d in run_vectors(resolve("reference")))
    assert any(d is not None for _, d in run_vectors(resolve(MUTANT)))
    # a vector whose recorded result is wrong is reported
    copy = tmp_path / "golden"
    shutil.copytree(DEFAULT_DIR, copy)
    victim = copy / "kind-InsufficientFreeBlocks.json"
    data = json.loads(victim.read_text())
    data["steps"][0]["expected"]["error"] = None
    victim.write_text(json.dumps(data))
    assert [name for name, _ in check_vectors(copy)] == ["kind-InsufficientFreeBlocks.json"]
    runner = CliRunner()
    assert runner.invoke(main, ["vectors", "check"]).exit_code == 0
    assert runner.invoke(main, ["vectors", "check", "--dir", str(copy)]).exit_code == 1
    assert runner.invoke(main, ["vectors", "run", "-t", "reference"]).exit_code == 0


def test_safety_allows_any_eviction_order_but_not_broken_invariants() -> None:
    from kvpool import mutants
    from kvpool.oracle.pytest_plugin import as_target

    # reorders on purpose (like a tiered queue): fails exact, passes safety
    assert conform(resolve(MUTANT), "safety", examples=60, steps=20).conforms
    broken = as_target(mutants.get("prepend-counter-stale").pool_class())
    report = conform(broken, "safety", examples=60, steps=20)
    assert not report.conforms and report.rule == "INV-FREE"


def test_robust_can_skip_its_valid_call_stage_and_finds_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The catalogue's invalid_calls_only mutants are searched without robust's first
    # stage; the stage left must make the same examples, so it finds the same trace.
    from kvpool import mutants
    from kvpool.oracle import conformance
    from kvpool.oracle.machine import MUTANT_FOCUS
    from kvpool.oracle.targets import as_target

    stages: list[str] = []
    real = conformance._search

    def spy(target: Any, config: Any, *args: Any) -> Any:
        stages.append(config.level)
        return real(target, config, *args)

    monkeypatch.setattr(conformance, "_search", spy)
    m = mutants.get("double-free-clamped")
    assert m.invalid_calls_only
    target = as_target(m.pool_class())
    hints = {k: v for k, v in MUTANT_FOCUS.items() if k != "max_blocks"}
    both = conform(target, "robust", examples=40, max_blocks=8, **hints)
    assert stages == ["exact", "robust"]
    stages.clear()
    one = conform(target, "robust", examples=40, max_blocks=8, valid_stage=False, **hints)
    assert stages == ["robust"]
    assert not both.conforms and not one.conforms
    assert (one.rule, one.trace) == (both.rule, both.trace)
    with pytest.raises(ValueError, match="valid-call stage"):
        conform(target, "exact", examples=1, valid_stage=False)


def _exact_at_catalogue_budget(name: str) -> bool:
    """Does ``kvpool conform --level exact`` pass the catalogue mutant ``name`` at the
    catalogue's budget (its hints, 500 examples)?"""
    from kvpool import mutants
    from kvpool.oracle.catalogue import search_args
    from kvpool.oracle.targets import as_target
    from kvpool.verify import CATALOGUE_EXAMPLES

    m = mutants.get(name)
    _, max_blocks, hints = search_args(m)
    target = as_target(m.pool_class())
    return conform(target, "exact", CATALOGUE_EXAMPLES, max_blocks=max_blocks, **hints).conforms


@pytest.mark.deep
def test_every_invalid_calls_only_tag_is_true() -> None:
    # The tag is a measurement: the valid-call stage the catalogue check skips for it
    # finds nothing. The seeded wrong tag, a mutant valid calls show, is caught the same way.
    from kvpool import mutants

    tagged = [m.name for m in mutants.MUTANTS if m.invalid_calls_only]
    assert len(tagged) == 15
    assert not _exact_at_catalogue_budget("lifo-fifo-swapped")  # the seeded wrong tag
    shown = [n for n in tagged if not _exact_at_catalogue_budget(n)]
    assert shown == []
