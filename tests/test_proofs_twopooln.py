"""Two pools for every N (kvpool/proofs/twopooln.py): each pool's INV-CONSERVE and INV-WATCH
as ghost sums, and FREE-FORWARD, DROP-GONE, POOL-FRAME, with N_0 and N_1 symbolic; each
hypothesis witnessed; each seeded bug refuted and confirmed on the spec."""

from __future__ import annotations

import pytest
import z3  # type: ignore[import-untyped]

from kvpool import verify
from kvpool.proofs import twopooln
from kvpool.proofs.runner import PROFILES, ObligationResult
from kvpool.proofs.twopool import Step2
from kvpool.spec import World
from kvpool.spec.rules import POOL_RULES


def test_the_gaps_listed_are_what_this_module_proves() -> None:
    assert set(twopooln.GAPS) == set(twopooln.NAMES)
    assert set(twopooln.RULE_NAMES) == set(POOL_RULES)
    assert {name for name, _, _ in twopooln.BUGS.values()} == set(twopooln.NAMES)


def test_every_rule_is_proved_for_every_n() -> None:
    gs = twopooln.prove(twopooln.obligations(names=twopooln.RULE_NAMES))
    assert {g.name for g in gs} == set(POOL_RULES)
    assert [g for g in gs if g.status != "proved"] == []


def test_the_counts_are_proved_on_forwarded_frees_and_each_pools_hand_out_loop() -> None:
    # (every case runs in make verify; here the cases where the two pools meet: a free
    # on one pool changing the other, and each pool's own get_new_blocks loop)
    obs = [
        o
        for o in twopooln.obligations(names=twopooln.PARTS)
        if o.case.startswith(("FreeBlocks@", "DropPool@", "loop", "init"))
    ]
    assert len(obs) == 2 * (2 + 2 * 2 + 2 * 2 + 2 * 3)  # init, free, drop, loop
    gs = twopooln.prove(obs)
    assert [(g.name, g.case, g.status) for g in gs if g.status != "proved"] == []


def test_every_obligation_is_exported_as_a_z3_query() -> None:
    obs = twopooln.obligations()
    assert {o.name for o in obs} == set(twopooln.NAMES)
    assert all(z3.is_bool(o.goal) and all(z3.is_bool(h) for h in o.hyp) for o in obs)
    # one case per (call kind, calling pool, pool) for each count, plus init and the loop
    counts = [o for o in obs if o.name == "INV-CONSERVE"]
    assert len(counts) == 2 * (1 + len(twopooln.OPS2) * 2 + 3)


@pytest.fixture(scope="module")
def shared() -> tuple[Step2, list[World]]:
    """The correct step and the worlds, built once for the tests that read them."""
    return twopooln.setting(), twopooln.witness_worlds()


# (drop-frees-dropped: test_the_part_runs_only_the_obligations_asked_for)
@pytest.mark.parametrize("bug", sorted(set(twopooln.BUGS) - {"drop-frees-dropped"}))
def test_each_bug_is_refuted_and_the_spec_confirms_it(
    bug: str, shared: tuple[Step2, list[World]]
) -> None:
    good, worlds = shared
    row = twopooln.mutant_row(bug, worlds=worlds, good=good)
    assert row["status"] == "expected-refuted", row
    assert row["replay"].startswith("confirmed"), row
    assert row["invariants"] == (twopooln.BUGS[bug][0],)


def test_a_correct_step_is_not_confirmed_as_a_bug() -> None:
    # the confirmation can fail: the refutation of forward-no-enqueue, replayed against
    # the correct step in the buggy one's place, is not confirmed
    good = twopooln.setting()
    bad = twopooln.setting(frozenset(["forward-no-enqueue"]))
    (ob,) = [
        o
        for o in twopooln.obligations_of(bad, ("INV-CONSERVE",))
        if o.case == "FreeBlocks@1 pool 0"
    ]
    world = twopooln.witness_worlds()[0]
    pins = twopooln.pin(bad, world, {0: ob.ghost} if ob.ghost is not None else {})
    status, _, m = twopooln.isolated_check([*ob.hyp, *pins], ob.goal, 30000)
    assert status == "refuted" and m is not None
    assert twopooln.confirm("INV-CONSERVE", m, good, bad)[1].startswith("confirmed")
    assert twopooln.confirm("INV-CONSERVE", m, good, good)[1] == "NOT confirmed by replay"


def test_every_hypothesis_of_the_counts_has_a_witness(
    shared: tuple[Step2, list[World]],
) -> None:
    # (the rules' hypotheses: make verify's own witness row)
    st, worlds = shared
    row = twopooln.witness_row(worlds=worlds, st=st, names=twopooln.PARTS)
    assert row["status"] == "witnessed", row
    n = row["bounds"].split(": ")[1].split()[0]
    assert n.split("/")[0] == n.split("/")[1] and int(n.split("/")[0]) > 60


def test_a_vacuous_hypothesis_is_not_witnessed() -> None:
    worlds = [twopooln.watched_world()]
    row = twopooln.witness_row(2000, frozenset(["hyp-false"]), worlds, names=("DROP-GONE",))
    assert row["status"] == "NOT-witnessed"
    assert "hypothesis unsat" in row["replay"]


def test_an_unknown_bug_is_refused() -> None:
    with pytest.raises(ValueError, match="not a bug"):
        twopooln.setting(frozenset(["no-such-bug"]))


def _row(name: str, status: str) -> ObligationResult:
    given = twopooln.GIVEN_TEXT if name in twopooln.GIVEN_S else ""
    return ObligationResult(
        f"S and T => {name} (two pools, every N)",
        "inductive",
        "z3 induction",
        (name,),
        f"{twopooln.BOUNDS}{given} (6 cases)",
        status,
        0.0,
    )


def _summary(rows: list[ObligationResult]) -> tuple[bool, str]:
    (c,) = [c for c in verify.proof_checks(rows) if c.technique == "z3 induction"]
    return c.ok, c.summary


def test_the_dashboard_says_every_n_for_two_pools_only_when_all_is_proved() -> None:
    assert verify.GIVEN_S in twopooln.GIVEN_TEXT
    ok, text = _summary([_row(n, "proved") for n in twopooln.NAMES])
    # (make verify: each pool's S is proved inductive for two pools in proofs-deep only)
    assert (
        ok
        and (
            "two pools, every N (lists <= 2): DROP-GONE, POOL-FRAME proved; INV-CONSERVE, "
            "INV-WATCH, FREE-FORWARD proved given each pool's S (S for two pools: make "
            "proofs-deep)"
        )
        in text
    )
    ok, text = _summary([_row(n, "proved") for n in ("PERM", *twopooln.NAMES)])
    assert (
        ok
        and "two pools, every N (lists <= 2): PERM, INV-CONSERVE, INV-WATCH, FREE-FORWARD, " in text
    )
    ok, text = _summary([_row("FREE-FORWARD", "refuted"), _row("DROP-GONE", "proved")])
    assert not ok and "two pools, every N (" not in text


def test_make_verify_runs_the_rules_and_proofs_deep_everything() -> None:
    assert PROFILES["default"]["twopool_n"] == twopooln.RULE_NAMES
    assert PROFILES["deep"]["twopool_n"] == twopooln.NAMES
    assert not PROFILES["fast"]["twopool_n"]


def test_the_part_runs_only_the_obligations_asked_for() -> None:
    rows = twopooln.all_rows(names=("DROP-GONE",))
    assert [(r["kind"], r["invariants"]) for r in rows] == [
        ("inductive", ("DROP-GONE",)),
        ("witness", ()),
        ("mutant", ("DROP-GONE",)),
    ]
    assert all(r["status"] in ("proved", "witnessed", "expected-refuted") for r in rows), rows
    assert rows[-1]["replay"].startswith("confirmed"), rows[-1]  # drop-frees-dropped
