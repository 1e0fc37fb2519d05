"""Two pools (kvpool/proofs/twopool.py): forwarded frees and DropPool, proved for every k at a
fixed N per pool; each seeded bug refuted and replayed on the spec; the differential."""

from __future__ import annotations

import random

import pytest
import z3  # type: ignore[import-untyped]

from kvpool.proofs import twopool
from kvpool.spec import BlockRef, DropPool, FreeBlocks, GetNewBlocks, Touch, World
from kvpool.spec.rules import POOL_RULES


def test_every_invariant_of_each_pool_and_every_pool_rule_is_proved_for_every_k() -> None:
    rows = twopool.rows(((2, 2),), 60000)
    proved = {r["invariants"][0] for r in rows if r["kind"] == "fixed-N"}
    assert all(r["status"] == "proved" for r in rows if r["kind"] == "fixed-N"), rows
    # each pool's every INV-* (and fixedn's own helper parts), and each rule of POOL_RULES
    assert proved == set(twopool.STATE_NAMES) | set(POOL_RULES)
    (witness,) = [r for r in rows if r["kind"] == "witness"]
    assert witness["status"] == "witnessed", witness
    assert "26/26" in witness["bounds"]  # every call kind on each pool


@pytest.mark.parametrize("bug", sorted(twopool.BUGS))
def test_each_bug_breaks_the_induction_step_and_the_spec_confirms_it(bug: str) -> None:
    claims, _ = twopool.BUGS[bug]
    rows = [
        r
        for r in twopool.induction_mutant_rows((2, 2), 60000)
        if r["obligation"].endswith(f"[{bug}]")
    ]
    assert [r["invariants"][0] for r in rows] == list(claims)
    for r in rows:
        assert r["status"] == "expected-refuted", r
        assert r["replay"].startswith("confirmed"), r


def test_bmc_refutes_each_bug_with_a_trace_the_buggy_spec_replays() -> None:
    rows = twopool.mutant_rows((2, 2), 3, 60000)
    assert {r["obligation"].rsplit("[", 1)[1].rstrip("]") for r in rows} == set(twopool.BUGS)
    for r in rows:
        assert r["status"] == "expected-refuted", r
        assert r["trace"] and r["replay"].startswith("confirmed"), r


def test_the_correct_encoding_is_not_refuted_by_bmc() -> None:
    u = twopool.unroll((2, 2), 2)
    for name in ("INV-REF", "FREE-FORWARD", "DROP-GONE", "POOL-FRAME"):
        status, _, trace, _ = twopool.bmc_check(u, name, 60000)
        assert (status, trace) == ("proved", []), name


def test_a_goal_after_a_refuted_conjunct_is_never_counted_as_proved() -> None:
    # step_goals asks a case's conjuncts in one context and stops at the first refuted
    # one: the goals it did not reach are "unknown", not "proved"
    st = twopool.build((2, 2), frozenset(["forward-unchecked"]))
    gs = twopool.step_goals(st, ("INV-REF", "LO-HI"), 60000, ("FreeBlocks",), (0,))
    by = {g.name: g.status for g in gs}
    assert by == {"INV-REF": "refuted", "LO-HI": "unknown"}


def test_replay_tells_the_buggy_spec_from_the_spec() -> None:
    world = World.of(*[World.single(3).pools[0] for _ in range(2)])
    trace = [
        GetNewBlocks(1, pool=1),
        FreeBlocks((BlockRef(1, 1),), pool=0),  # forwarded to pool 1
    ]
    assert twopool._replay("forward-to-caller", world, "INV-REF", trace).startswith("confirmed")
    # the spec itself: the same trace breaks nothing
    fine = twopool.BuggyWorld2.of_bug("", world)
    for op in trace:
        fine.apply(op)
    assert fine.pools[0].ref == [0, 0, 0] and fine.pools[1].ref == [0, 0, 0]
    dropped = [Touch((BlockRef(1, 1),), pool=1), DropPool(pool=1), *trace[1:]]
    assert twopool._replay("drop-frees-dropped", world, "DROP-GONE", dropped).startswith(
        "confirmed"
    )
    assert twopool._replay("drop-frees-dropped", world, "DROP-GONE", trace) == (
        "NOT confirmed by replay"
    )


def test_the_encoding_agrees_with_the_spec_on_reachable_two_pool_worlds() -> None:
    done, bad = twopool.diff_run(60, seed=3)
    assert done == 60 and bad == [], bad[:1]


@pytest.mark.parametrize("bug", sorted(twopool.BUGS))
def test_the_differential_catches_each_bug(bug: str) -> None:
    done, bad = twopool.diff_run(150, frozenset([bug]), stop_at_first=True)
    assert bad, f"[{bug}] not caught in {done} pairs"


def test_random_calls_reach_forwarded_and_dropped_frees() -> None:
    # the differential sees the paths the two-pool rules speak of, not only refusals
    rng = random.Random(1)
    seen: set[str] = set()
    for _ in range(400):
        worlds = twopool.reachable_worlds(rng, (3, 3))
        world = worlds[rng.randrange(len(worlds))]
        c = twopool.random_call(rng, world)
        op = twopool.to_op2(c)
        if not isinstance(op, FreeBlocks) or world.copy().apply(op).error:
            continue
        for b in op.blocks:
            assert isinstance(b, BlockRef)
            if b.pool != op.pool and b.block:
                seen.add("forwarded" if world.alive[b.pool] else "dropped")
    assert seen == {"forwarded", "dropped"}


def test_an_unknown_bug_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a two-pool bug"):
        twopool.config2((2, 2), bugs=frozenset(["no-such-bug"]))


def test_a_decoded_call_names_its_pool_and_its_entries_pools() -> None:
    c = twopool.ConcreteArgs2(
        twopool.ConcreteArgs(1, 0, 2, (1, 3), True, 0, 0, (1, 1), 1, 0), 1, (0, 1), 0
    )
    op = twopool.to_op2(c)
    assert op == FreeBlocks((BlockRef(0, 1), BlockRef(1, 3)), evict_first=True, pool=1)
    drop = twopool.ConcreteArgs2(
        twopool.ConcreteArgs(twopool.OPK2["DropPool"], 0, 0, (0, 0), False, 0, 0, (1, 1), 1, 0),
        0,
        (0, 0),
        0,
    )
    assert twopool.to_op2(drop) == DropPool(pool=0)
    assert z3.is_bool(twopool.initial_world(twopool.config2((2, 2))).alive[0])


def test_the_dashboard_names_two_pool_sizes_and_fails_on_a_rule_not_proved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpool import verify
    from kvpool.proofs import runner as proofs
    from kvpool.proofs.runner import ObligationResult as R
    from kvpool.verify import Cell

    fixed = proofs.FIXEDN_TECHNIQUE

    def row(name: str, status: str) -> R:
        b = f"{twopool.bounds((3, 3))} (26 cases): {twopool.label((3, 3))}"
        return R(f"{name} (two pools)", "fixed-N", fixed, (name,), b, status, 0.0)

    good = [
        R("INV-FREE", "fixed-N", fixed, ("INV-FREE",), "N=3, every k, lists<=2", "proved", 0.0),
        row("INV-FREE", "proved"),
        row("FREE-FORWARD", "proved"),
    ]
    monkeypatch.setattr(proofs, "run", lambda profile, **kw: good)
    check = {c.name: c for c in verify.run_proofs("fast")}[fixed]
    assert check.cells["INV-FREE"] == Cell("proved every k", "N=3..3, two pools N=3+3")
    assert "two pools (N=3+3): each pool's INV-* and FREE-FORWARD proved every k" in check.summary
    # a rule has no row of the matrix: its failure must still fail the column
    bad = [*good[:2], row("FREE-FORWARD", "unknown")]
    monkeypatch.setattr(proofs, "run", lambda profile, **kw: bad)
    check = {c.name: c for c in verify.run_proofs("fast")}[fixed]
    assert not check.ok and "NOT proved: FREE-FORWARD (two pools)" in check.summary


def test_every_n_a_step_case_is_proved_and_a_bug_refutes_it() -> None:
    # (the whole every-N run is the deep profile's: twopool.every_n_rows)
    st = twopool.build_every_n()
    gs = twopool.every_n_case(st, "Touch", 0, 0, ("INV-REF", "PERM", "INV-NULL"), 60000)
    assert [g.status for g in gs] == ["proved"] * 3
    gs = twopool.every_n_case(st, "Touch", 0, 1, ("PERM",), 60000)  # the other pool
    assert [g.status for g in gs] == ["proved"]
    assert twopool.every_n_mutant_row(60000)["status"] == "expected-refuted"
