"""CrossHair itself, on the real pool (no counterexample) and on mutants (a counterexample each).

Runs in ``make test`` with the fast budget (5 s of CrossHair CPU per contract);
``make contracts`` runs every entry point with the full budget.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kvpool.contracts import ContractResult, run
from kvpool.contracts.bugs import BOUNDED_FINDS, CROSSHAIR_FINDS
from kvpool.contracts.runner import BOUNDED, ENTRY_POINTS, check_one

BITES = CROSSHAIR_FINDS


@pytest.fixture(scope="module")
def mutant_results() -> dict[str, ContractResult]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda kv: check_one(kv[1], "fast", kv[0]), BITES.items())
        return dict(zip(BITES, results, strict=True))


@pytest.mark.parametrize("mutant", sorted(BITES))
def test_crosshair_finds_a_counterexample_in_each_mutant(
    mutant: str, mutant_results: dict[str, ContractResult]
) -> None:
    result = mutant_results[mutant]
    assert result.status == "counterexample", (result.status, result.detail, result.messages)
    assert "when calling" in result.detail  # CrossHair's own message, with the inputs


def test_crosshair_finds_no_counterexample_in_the_real_pool() -> None:
    results = run("fast", names=["get_new_blocks", "free_blocks"])
    assert [r.name for r in results] == ["get_new_blocks", "free_blocks"]
    for r in results:
        assert r.status in ("confirmed", "no counterexample within budget"), r.detail
        assert set(r.invariants) >= {"INV-LIST", "INV-FREE", "INV-REF", "INV-NULL"}
        assert r.invariants == ENTRY_POINTS[r.name]


def test_crosshair_confirms_every_path_of_the_bounded_queue_entry_points() -> None:
    # Exhaustive within the bound (every queue of at most 3 blocks in `make test`):
    # CrossHair's own "Confirmed over all paths", never inferred from a quiet run.
    results = run("fast", names=sorted(BOUNDED), jobs=2)
    for r in results:
        assert r.status == "confirmed", (r.name, r.status, r.detail, r.messages)
        assert "Confirmed over all paths." in " ".join(r.messages)


@pytest.mark.parametrize("mutant", sorted(BOUNDED_FINDS))
def test_each_queue_mutant_breaks_its_bounded_entry_point(mutant: str) -> None:
    result = check_one(BOUNDED_FINDS[mutant], "fast", mutant)
    assert result.status == "counterexample", (result.status, result.detail)
    assert "when calling" in result.detail
