"""``kvpool conform --all`` and ``--allow``: past each finding, each distinct one once.

A pool with two seeded bugs (two calls that return wrong values) must yield both
findings, each with its own minimal trace that fails on replay; allowing one leaves
the other; allowing both (or their rule) leaves a pool that conforms. The search at
``robust`` runs the ``exact`` search first, so it finds what ``exact`` finds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvpool.impl import BlockPool
from kvpool.oracle.cli import main
from kvpool.oracle.conformance import conform, signature
from kvpool.oracle.exits import BAD_INPUT, CONFORMS, VIOLATION, BadInput
from kvpool.oracle.targets import as_target
from kvpool.oracle.tracereplay import replay
from kvpool.spec.ops import FreeBlocks, GetUsage

USAGE = "result differs: value at GetUsage"
FREE = "result differs: value at GetNumFreeBlocks"
SMALL: dict[str, Any] = {"examples": 60, "steps": 10, "max_blocks": 6, "max_pools": 1}


class TwoBugs(BlockPool):
    """Two seeded bugs: usage is reported as 0.0 once anything is in use, and the free
    count is one too many once anything is in use."""

    def get_usage(self) -> float:
        return 0.0

    def get_num_free_blocks(self) -> int:
        n = super().get_num_free_blocks()
        return n + 1 if n < self.num_gpu_blocks - 1 else n


def test_all_reports_each_distinct_finding_once_with_its_own_trace() -> None:
    target = as_target(TwoBugs)
    one = conform(target, "exact", **SMALL)
    assert not one.conforms and len(one.findings) == 1
    every = conform(target, "exact", keep_going=True, **SMALL)
    assert sorted(d.signature for d in every.findings) == sorted([FREE, USAGE])
    for d in every.findings:
        assert d.trace is not None
        found = replay(d.trace, as_target(TwoBugs), "exact").divergence
        assert found is not None and found.rule == d.rule
    assert every.rule == every.findings[0].rule and not every.conforms
    # the reference pool passes both traces
    for d in every.findings:
        assert replay(d.trace, as_target(BlockPool), "exact").divergence is None


def test_allow_accepts_one_finding_and_the_search_goes_on() -> None:
    target = as_target(TwoBugs)
    rest = conform(target, "exact", keep_going=True, allow=[USAGE], **SMALL)
    assert [d.signature for d in rest.findings] == [FREE] and rest.allowed == [USAGE]
    none = conform(target, "exact", keep_going=True, allow=[USAGE, FREE], **SMALL)
    assert none.conforms and none.findings == []
    by_rule = conform(target, "exact", allow=["result differs: value"], **SMALL)
    assert by_rule.conforms


def test_robust_finds_what_exact_finds() -> None:
    target = as_target(TwoBugs)
    exact = conform(target, "exact", seed=3, **SMALL)
    robust = conform(target, "robust", seed=3, **SMALL)
    assert exact.findings[0].signature == robust.findings[0].signature


def test_signature_ignores_values_but_not_the_cause() -> None:
    a = signature("result differs: value", "GetUsage(pool=0): spec 0.5, target 0.0", GetUsage())
    b = signature("result differs: value", "GetUsage(pool=0): spec 0.2, target 0.0", GetUsage())
    assert a == b == USAGE
    detail = "FreeBlocks(...): spec RefCountUnderflow, target success"
    once = signature("error kind differs", detail, FreeBlocks((1,)))
    twice = signature("error kind differs", detail, FreeBlocks((1, 1)))
    assert once != twice and twice.endswith("(a block listed twice)")


def test_cli_all_and_allow(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["conform", "-t", "python:test_conform_all:TwoBugs", "--level", "exact", "-n", "60"]
    base += ["--steps", "10", "--max-blocks", "6", "--max-pools", "1"]
    out = tmp_path / "r.json"
    res = runner.invoke(main, [*base, "--all", "--json", str(out)])
    assert res.exit_code == VIOLATION, res.output
    assert "2 distinct finding(s)" in res.output and USAGE in res.output and FREE in res.output
    report = json.loads(out.read_text())
    assert report["all"] and sorted(f["signature"] for f in report["findings"]) == sorted(
        [FREE, USAGE]
    )
    assert all(f["trace"]["steps"] for f in report["findings"])
    res = runner.invoke(main, [*base, "--all", "--allow", USAGE, "--allow", FREE])
    assert res.exit_code == CONFORMS, res.output
    res = runner.invoke(main, [*base, "--allow", "no-such-erratum"])
    assert res.exit_code == BAD_INPUT and "--allow 'no-such-erratum'" in res.output


def test_cli_max_findings_caps_distinct_findings_and_says_so(tmp_path: Path) -> None:
    """``--all --max-findings N``: the run stops after N distinct findings and the report
    says it stopped at the cap (the text and the JSON); a run under its cap does not."""
    runner = CliRunner()
    base = ["conform", "-t", "python:test_conform_all:TwoBugs", "--level", "exact", "-n", "60"]
    base += ["--steps", "10", "--max-blocks", "6", "--max-pools", "1", "--all"]
    capped, free = tmp_path / "capped.json", tmp_path / "free.json"
    res = runner.invoke(main, [*base, "--max-findings", "1", "--json", str(capped)])
    assert res.exit_code == VIOLATION, res.output
    assert "1 distinct finding(s)" in res.output
    assert "stopped at the cap of 1 distinct findings" in res.output
    report = json.loads(capped.read_text())
    assert len(report["findings"]) == 1
    assert report["stopped_at_cap"] is True and report["max_findings"] == 1
    res = runner.invoke(main, [*base, "--max-findings", "2", "--json", str(free)])
    assert "2 distinct finding(s)" in res.output and "stopped at the cap" in res.output
    res = runner.invoke(main, [*base, "--json", str(free)])
    assert "2 distinct finding(s)" in res.output and "stopped at the cap" not in res.output
    assert json.loads(free.read_text())["stopped_at_cap"] is False
    res = runner.invoke(main, [*base, "--max-findings", "0"])
    assert res.exit_code == BAD_INPUT, res.output
    with pytest.raises(ValueError):
        conform(as_target(TwoBugs), "exact", keep_going=True, max_findings=0, **SMALL)


@pytest.mark.parametrize("name", ["unpin-one-watcher", "INV-EVENTS"])
def test_allow_names_an_erratum_or_a_rule(name: str) -> None:
    from kvpool.oracle.conformance import acceptance

    got = acceptance(as_target(BlockPool), "exact", [name])
    # the reference pool passes every erratum's trace: an erratum names no signature there
    assert (got.signatures, got.rules) == (
        (frozenset(), frozenset({name})) if name.startswith("INV") else (frozenset(), frozenset())
    )


@pytest.mark.deep
def test_robust_finds_the_one_watcher_bug_exact_finds() -> None:
    """vLLM's unpin-one-watcher, seeded into kvpool's pool (mutant watcher-only-last):
    ``robust`` reports the valid-use difference ``exact`` reports, not first a refused
    call it happens to break too (before the two stages: ``ERR-ATOMIC`` on an unpin)."""
    from kvpool import mutants

    target = as_target(mutants.get("watcher-only-last").pool_class())
    exact = conform(target, "exact", examples=100, max_blocks=8, max_pools=1)
    robust = conform(target, "robust", examples=100, max_blocks=8, max_pools=1)
    assert not exact.conforms and not robust.conforms
    assert robust.findings[0].signature == exact.findings[0].signature
    # the same bug, named by its erratum (shown as INV-WATCH or as the pending watchers
    # that differ, depending on which check meets it first)
    assert exact.findings[0].erratum == "unpin-one-watcher", exact.findings[0].signature


def test_allow_takes_signatures_as_all_prints_them() -> None:
    from kvpool.oracle.conformance import acceptance

    target = as_target(BlockPool)
    for sig in (USAGE, "target crashed (WatcherRaised)"):
        assert acceptance(target, "exact", [sig]).signatures == frozenset({sig})
    with pytest.raises(BadInput):
        acceptance(target, "exact", ["usage is wrong"])


class CrashesOnBadCounts(BlockPool):
    """Seeded: ``get_new_blocks`` refuses no bad count with a typed error; it crashes with
    whatever exception the bad value makes it raise (a non-int: TypeError, a negative
    count: ValueError), as vLLM's multi-key calls do on their bad arguments."""

    def get_new_blocks(self, num_blocks: int) -> list[Any]:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int):
            raise TypeError(f"count {num_blocks!r} is not an int")
        if num_blocks < 0:
            raise ValueError(f"count {num_blocks} is negative")
        return super().get_new_blocks(num_blocks)


def test_a_crash_on_bad_input_is_one_finding_whichever_exception() -> None:
    """One call that crashes on every bad value the spec refuses with one kind is one
    finding (``target crashed at OP: spec KIND``), not one per exception type; a crash on
    a call the spec accepts still names its exception."""
    from kvpool.oracle.exits import TargetCrashed
    from kvpool.oracle.machine import crash_detail
    from kvpool.spec.errors import ErrorKind
    from kvpool.spec.ops import GetNewBlocks, Outcome

    refused = Outcome(error=ErrorKind.INVALID_ARGUMENT)
    sigs = {
        signature(
            "target crashed",
            crash_detail(GetNewBlocks(n), refused, TargetCrashed("get_new_blocks", exc)),
            GetNewBlocks(n),
        )
        for n, exc in (("2", TypeError("x")), (-1, ValueError("y")), (None, TypeError("z")))
    }
    assert sigs == {"target crashed at GetNewBlocks: spec InvalidArgument"}
    valid = crash_detail(GetNewBlocks(1), Outcome(value=(1,)), TargetCrashed("g", KeyError(1)))
    assert signature("target crashed", valid, GetNewBlocks(1)) == (
        "target crashed at GetNewBlocks (KeyError)"
    )
    report = conform(as_target(CrashesOnBadCounts), "robust", keep_going=True, patience=3, **SMALL)
    crashes = [d.signature for d in report.findings if d.rule == "target crashed"]
    assert crashes == ["target crashed at GetNewBlocks: spec InvalidArgument"], crashes
    for d in report.findings:
        assert (
            d.trace is not None
            and replay(d.trace, as_target(BlockPool), "robust").divergence is None
        )


def test_all_searches_fresh_examples_after_each_finding() -> None:
    """``--all`` searches again on examples of a seed of its own: the same seed would
    make the same examples, stopped where the accepted difference now lets them go
    spec-only, and find nothing behind it."""
    from kvpool.oracle.conformance import search_seed

    assert search_seed(None, 0) is None and search_seed(7, 0) == 7
    seeds = [search_seed(s, k) for s in (None, 0, 1, 7) for k in range(1, 6)]
    assert len(set(seeds)) == len(seeds) and None not in seeds


def test_event_log_errata_are_told_apart_by_the_difference() -> None:
    """A finding of the event log is named after the erratum its difference shows,
    whichever rule it shows as: more ``BlockRemoved`` than the spec's events (a key
    announced removed while another block holds it), or the same events reordered."""
    from kvpool.oracle.findings import log_erratum
    from kvpool.spec.events import BlockRemoved, BlockStored

    a, b = BlockRemoved("a"), BlockRemoved("b")
    assert log_erratum((), (a,)) == "removed-while-held"
    assert log_erratum((b,), (a, b)) == "removed-while-held"
    assert log_erratum((a, b), (b, a)) == "further-entries-unordered"
    assert log_erratum((a,), ()) is None  # a missing event is neither
    assert log_erratum((), (BlockStored(("a",)),)) is None  # an extra store is neither
    assert log_erratum((a,), (b,)) is None


class UsageWrongAtThree(BlockPool):
    """Seeded: ``get_usage`` is wrong only when exactly three blocks are in use."""

    def get_usage(self) -> float:
        used = self.num_gpu_blocks - 1 - super().get_num_free_blocks()
        return 0.0 if used == 3 else super().get_usage()


def test_patience_searches_fresh_examples_before_it_says_conforms() -> None:
    """``patience``: a stage ends after that many searches in a row found nothing, each
    on fresh examples; a bug one small search misses is found by a later one, and a
    "conforms" says how many searches it rests on."""
    tiny: dict[str, Any] = {"examples": 3, "steps": 4, "max_blocks": 6, "max_pools": 1}
    ok = conform(as_target(BlockPool), "exact", patience=3, **tiny)
    assert ok.conforms and ok.searches == 3
    assert conform(as_target(BlockPool), "robust", patience=2, **tiny).searches == 4
    target = as_target(UsageWrongAtThree)
    small: dict[str, Any] = {"examples": 20, "steps": 8, "max_blocks": 6, "max_pools": 1}
    once = conform(target, "exact", **small)
    assert once.conforms and once.searches == 1  # the derandomized search misses it
    patient = conform(target, "exact", patience=10, **small)
    assert not patient.conforms and patient.findings[0].signature == USAGE
    assert 1 < patient.searches < 10
    with pytest.raises(ValueError):
        conform(target, "exact", patience=0, **tiny)
