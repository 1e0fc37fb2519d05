"""The differential (kvpool.proofs.differential): both readings, reachable states, mutants."""

from __future__ import annotations

import random

import pytest

from kvpool.proofs import differential as D
from kvpool.spec import check_pool

# The catalogue's spec mutants (the 16 first, then those appended for ORD-UNPIN and
# ERR-ATOMIC, unpin-reversed among them), each an encoding bug switch too.
ENCODING_MUTANTS = list(D.ENCODING_MUTANTS)


@pytest.mark.parametrize("reading", D.READINGS)
def test_both_readings_agree_with_the_spec_on_reachable_states(reading: str) -> None:
    done, mism = D.run(48, seed=3, sizes=(1, 3, 4), reading=reading)
    assert done == 48
    assert mism == [], "\n".join(map(str, mism[:3]))


def test_the_seeds_are_reachable_states_of_the_spec() -> None:
    rng = random.Random(1)
    states = D.reachable_states(rng, 4, 2, 2, 2)
    assert len(states) >= 2
    assert all(check_pool(ps) == [] for ps in states)
    # runs reach states beyond the initial one: blocks in use, keys cached
    many = [ps for _ in range(20) for ps in D.reachable_states(rng, 4, 2, 2, 2)]
    assert any(any(r > 0 for r in ps.ref[1:]) for ps in many)
    assert any(ps.index for ps in many)


def test_every_encoding_mutant_is_counted() -> None:
    assert len(ENCODING_MUTANTS) == 18
    assert {"unpin-reversed", "free-partial-on-refusal"} <= set(ENCODING_MUTANTS)


@pytest.mark.parametrize("bug", ENCODING_MUTANTS)
def test_the_default_budget_catches_each_encoding_mutant_on_the_finite_reading(
    bug: str,
) -> None:
    done, mism = D.run(
        D.DEFAULT_BUDGET,
        seed=D.DEFAULT_SEED,
        sizes=D.DEFAULT_SIZES,
        bugs=frozenset([bug]),
        stop_at_first=True,
    )
    assert mism, f"{bug}: no mismatch in {done} pairs"


UNBOUNDED_BLIND = D.UNBOUNDED_BLIND


@pytest.mark.parametrize("bug", [b for b in ENCODING_MUTANTS if b not in UNBOUNDED_BLIND])
def test_the_default_budget_catches_each_encoding_mutant_on_the_unbounded_reading(
    bug: str,
) -> None:
    done, mism = D.run(
        D.DEFAULT_BUDGET,
        seed=D.DEFAULT_SEED,
        sizes=D.DEFAULT_SIZES,
        bugs=frozenset([bug]),
        reading="unbounded",
        stop_at_first=True,
    )
    assert mism, f"{bug}: no mismatch in {done} pairs"


def test_the_blind_spot_of_the_unbounded_reading_is_only_the_lookup_value() -> None:
    # cached-newest changes which holder a lookup returns, and nothing else
    done, mism = D.run(
        D.DEFAULT_BUDGET,
        seed=D.DEFAULT_SEED,
        sizes=D.DEFAULT_SIZES,
        bugs=frozenset(["cached-newest"]),
        reading="unbounded",
    )
    assert done == D.DEFAULT_BUDGET and mism == []


def test_an_unknown_reading_is_refused() -> None:
    with pytest.raises(ValueError, match="reading"):
        D.Stepper.build(2, reading="other")
