"""``kvpool conform`` says what a "conforms" is worth (issue 15, item 3).

Under "conforms" it prints the runs and calls the search made, each operation's count
with its refusals by kind, and the spec's operations it never made (so never
compared). The JSON report carries the same. Each test shows a figure that moves when
the search changes, so a summary stuck at a constant would fail.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

from click.testing import CliRunner

from kvpool.oracle.cli import main
from kvpool.oracle.conformance import Coverage, conform
from kvpool.oracle.targets import resolve
from kvpool.spec import GetNewBlocks, Outcome
from kvpool.spec.errors import ErrorKind
from kvpool.spec.invariants import INVARIANT_NAMES
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
    assert lines[2].startswith("never made (not compared): FreeBlocks, Touch")
    assert lines[3] == "rules checked (times): none"  # no rule was counted by hand
    assert lines[4].startswith("never checked: INV-REF, INV-FREE,")
    cov.rules.update(["INV-REF", "INV-REF", "error kind differs"])
    assert cov.lines()[3] == "rules checked (times): INV-REF 2, error kind differs 1"
    assert "INV-REF" not in cov.lines()[4] and "ERR-ATOMIC" in cov.lines()[4]


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


# -- which rules were checked, and how often --------------------------------------------------


def test_every_rule_is_counted_and_the_counts_grow_with_the_search() -> None:
    small = conform(resolve("reference"), "exact", examples=10, steps=8).coverage
    big = conform(resolve("reference"), "exact", examples=30, steps=8).coverage
    for name in INVARIANT_NAMES:  # the reference's state is read: every INV-* on it
        assert small.rules[name] > small.runs, name
    for name in ("error kind differs", "result differs: ids", "fired differs", "state differs"):
        assert small.rules[name] > 0, name
    assert all(big.rules[r] > n for r, n in small.rules.items())
    # at exact every call is valid, so no refusal is checked for atomicity
    assert "ERR-ATOMIC" in small.rules_never()
    robust = conform(resolve("reference"), "robust", examples=200, steps=10).coverage
    assert robust.rules["ERR-ATOMIC"] > 0 and "ERR-ATOMIC" not in robust.rules_never()


def test_a_comparison_is_counted_once_per_call_compared() -> None:
    cov = conform(resolve("reference"), "exact", examples=10, steps=8).coverage
    assert cov.rules["error kind differs"] == cov.calls  # every call, nested ones included
    made = cov.by_op()
    assert cov.rules["result differs: ids"] == sum(made.get("GetNewBlocks", {}).values())
    assert cov.rules["result differs: events"] == sum(made.get("TakeEvents", {}).values())


def test_safety_compares_no_values_and_says_so() -> None:
    cov = conform(resolve("reference"), "safety", examples=10, steps=8).coverage
    never = cov.rules_never()
    for name in ("result differs: ids", "result differs: value", "fired differs", "state differs"):
        assert name in never and cov.rules[name] == 0
    assert cov.rules["INV-FREE"] > 0 and cov.rules["error kind differs"] == cov.calls


def test_a_target_without_a_state_reader_has_no_invariant_checked() -> None:
    """The seeded weakness: the same pool with its state hidden is compared call by call,
    and the summary says that no INV-* was ever checked on it."""
    target = resolve("reference")
    target.state_check = target.target_invariants = None
    cov = conform(target, "exact", examples=10, steps=8).coverage
    assert set(INVARIANT_NAMES) <= set(cov.rules_never())
    assert "state differs" in cov.rules_never()
    assert cov.rules["error kind differs"] == cov.calls


def test_own_invariant_checks_count_what_they_are_marked_with() -> None:
    """kvpool.impl's own check adds INV-LIST; a pool read through kvpool_state() does not."""
    ref = conform(resolve("reference"), "exact", examples=5, steps=5).coverage
    assert ref.rules["INV-LIST"] > 0
    plain = conform(resolve("python:forks.nano_loader:NanoPool"), "safety", 5, steps=5).coverage
    assert plain.rules["INV-CACHE"] > 0 and "INV-LIST" in plain.rules_never()


# -- the spec's branches taken -----------------------------------------------------------------


def _arcs_in(cov: Coverage, fn: object) -> set[str]:
    """The not-taken arcs of state.py that start inside the function ``fn``."""
    lines, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    inside = range(first, first + len(lines))
    assert cov.branches is not None
    missing = cov.branches.missing["state.py"]
    return {a for a in missing if int(a.split("->")[0]) in inside}


def test_spec_branches_are_measured_and_grow_with_the_search() -> None:
    small = conform(resolve("reference"), "exact", examples=5, steps=5).coverage.branches
    big = conform(resolve("reference"), "robust", examples=40, steps=10).coverage.branches
    assert small is not None and big is not None
    assert small.unmeasured is None and small.branches > 50
    assert 0 < small.taken < big.taken <= big.branches == small.branches
    assert set(big.files) == {"state.py", "events.py", "vllm_ops.py", "keys.py"}
    total = sum(len(v) for v in big.missing.values())
    assert total == big.branches - big.taken  # every branch not taken is listed


def test_an_operation_never_made_leaves_its_spec_branches_untaken() -> None:
    """The seeded weakness: without evict_blocks, the spec's EvictBlocks branches are never
    taken, and the report lists them; with it, they are."""
    from kvpool.spec.state import World

    target = resolve("reference")
    target.capabilities = target.capabilities - {"EvictBlocks"}
    without = conform(target, "exact", examples=20, steps=8).coverage
    with_it = conform(resolve("reference"), "exact", examples=20, steps=8).coverage
    gap = _arcs_in(without, World._op_evict_blocks)
    left = _arcs_in(with_it, World._op_evict_blocks)
    assert gap and left < gap


def test_refusal_branches_are_taken_only_at_robust() -> None:
    """exact makes valid calls only: the spec's refusal of a double free is never reached."""
    from kvpool.spec.state import World

    exact = conform(resolve("reference"), "exact", examples=30, steps=10).coverage
    robust = conform(resolve("reference"), "robust", examples=200, steps=10).coverage
    at_exact = _arcs_in(exact, World._check_multiplicity)
    at_robust = _arcs_in(robust, World._check_multiplicity)
    assert at_exact and not at_robust


def test_not_measured_when_turned_off_or_under_another_tracer() -> None:
    off = conform(resolve("reference"), "exact", examples=3, steps=3, spec_coverage=False)
    assert off.coverage.branches is not None
    assert off.coverage.branches.to_json() == {
        "measured": False,
        "why": "turned off (--no-spec-coverage)",
    }

    def outer(frame: object, event: str, arg: object) -> None:
        return None

    sys.settrace(outer)
    try:
        under = conform(resolve("reference"), "exact", examples=3, steps=3)
        assert sys.gettrace() is outer  # left in place
    finally:
        sys.settrace(None)
    assert under.coverage.branches is not None
    assert "another tracer" in under.coverage.branches.line()


def test_the_cli_prints_rules_and_branches_and_the_json_carries_them(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["conform", "--target", "reference", "-n", "5", "--steps", "5", "--json", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "rules checked (times): INV-REF " in result.output
    assert "never checked: " in result.output and "ERR-ATOMIC" in result.output
    assert "spec branches taken: " in result.output
    data = json.loads(out.read_text())["coverage"]
    assert data["rules"]["INV-REF"] > 0 and "ERR-ATOMIC" in data["rules_never"]
    sb = data["spec_branches"]
    assert sb["measured"] and 0 < sb["taken"] < sb["branches"]
    assert sum(len(v) for v in sb["not_taken"].values()) == sb["branches"] - sb["taken"]
    result = CliRunner().invoke(main, [*args, "--no-spec-coverage"])
    assert result.exit_code == 0, result.output
    assert "spec branches: not measured (turned off (--no-spec-coverage))" in result.output


def test_a_pool_with_only_some_read_only_calls_has_those_compared() -> None:
    """The list pool has get_num_free_blocks but none of the other read-only calls: its
    count is still compared, so a wrong count is found (the search used to make the
    read-only calls only on a pool that had all five, and this bug went unseen)."""
    import sys
    from pathlib import Path

    from kvpool.oracle.pytest_plugin import as_target

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "list-pool"))
    try:
        from list_pool import ListPool  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)

    class CountsOneMore(ListPool):  # type: ignore[misc]
        def get_num_free_blocks(self) -> int:
            return int(super().get_num_free_blocks()) + 1

    good = conform(as_target(ListPool), "exact", 40, max_blocks=6, max_pools=1)
    assert good.conforms, good.message
    assert "GetNumFreeBlocks" in good.coverage.by_op()
    bad = conform(as_target(CountsOneMore), "exact", 40, max_blocks=6, max_pools=1)
    assert bad.rule == "result differs: value", bad.message
    assert "GetNumFreeBlocks" in bad.message
