"""``kvpool conform`` says what a "conforms" is worth (issue 15, item 3).

Under "conforms" it prints the runs and calls the search made, each operation's count
with its refusals by kind, and the spec's operations it never made (so never
compared). The JSON report carries the same. Each test shows a figure that moves when
the search changes, so a summary stuck at a constant would fail.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kvpool.oracle.cli import main
from kvpool.oracle.conformance import Coverage, conform
from kvpool.oracle.targets import resolve
from kvpool.spec import GetNewBlocks, Outcome
from kvpool.spec.errors import ErrorKind
from kvpool.spec.ops import OP_CLASSES, VLLM_OP_CLASSES


def test_the_counts_add_up_to_the_calls_made() -> None:
    report = conform(resolve("reference"), "exact", examples=10, steps=8)
    cov = report.coverage
    assert report.conforms and cov.runs >= 10 and cov.calls > 10
    assert sum(cov.outcomes.values()) == cov.calls
    names = {c.__name__ for c in (*OP_CLASSES, *VLLM_OP_CLASSES)}
    assert set(cov.by_op()) <= names and "GetNewBlocks" in cov.by_op()
    # vLLM's multi-key calls are made too (issue 13, item 4)
    multikey = {"CacheFullBlocks", "CachePartialBlock", "MoveBlockHashes", "GetCachedBlockGroups"}
    assert multikey & set(cov.by_op())
    more = conform(resolve("reference"), "exact", examples=30, steps=8).coverage
    assert more.calls > cov.calls  # a bigger search counts more


def test_refusals_are_counted_by_kind_at_robust() -> None:
    cov = conform(resolve("reference"), "robust", examples=30, steps=10).coverage
    kinds = {k for ops in cov.by_op().values() for k in ops if k != "ok"}
    assert kinds and kinds <= {str(k) for k in ErrorKind}


def test_a_skipped_capability_shows_as_never_made() -> None:
    target = resolve("reference")
    target.capabilities = target.capabilities - {"UnpinBlocks"}
    cov = conform(target, "exact", examples=10, steps=8).coverage
    assert "UnpinBlocks" in cov.missing() and "UnpinBlocks" not in cov.by_op()
    assert (
        "UnpinBlocks" not in conform(resolve("reference"), "exact", 30, steps=8).coverage.missing()
    )


def test_the_summary_lines() -> None:
    cov = Coverage(runs=2)
    cov.add(GetNewBlocks(1), Outcome(value=(1,)))
    cov.add(GetNewBlocks(9), Outcome(error=ErrorKind.INSUFFICIENT_FREE_BLOCKS))
    lines = cov.lines()
    assert lines[0] == "2 calls in 2 runs; by operation (refusals in brackets):"
    assert lines[1] == "  GetNewBlocks 2 (InsufficientFreeBlocks 1)"
    assert lines[-1].startswith("never made (not compared): FreeBlocks, Touch")


def test_the_cli_prints_it_and_the_json_carries_it(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        main,
        [
            "conform",
            "--target",
            "reference",
            "-n",
            "5",
            "--steps",
            "5",
            "--skip",
            "CacheFullBlocks",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "calls in" in result.output and "never made (not compared):" in result.output
    data = json.loads(out.read_text())["coverage"]
    assert data["calls"] > 0 and data["by_op"]["GetNewBlocks"]["ok"] > 0
    assert "CacheFullBlocks" in data["never"]
