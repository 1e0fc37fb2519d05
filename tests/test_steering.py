"""``--all`` steers invalid calls away from shapes that already showed an accepted difference.

The unit tests pin :class:`~kvpool.oracle.steering.Steering`'s rules: a shape is spent once
it showed an accepted difference, a choice once every option seen under it is spent, and
what a search learns is steered by only from the next search on. The search test is a
pool built to starve: every invalid call of two kinds changes its state (a common finding
that, once accepted, ends the comparisons of every example that meets it first), and one
deep shape of a third kind goes through (a rare finding). ``--all`` on the old search met
the common findings again and again and missed the rare one at this budget; steered, it
lists it. Neither search is told what to look for.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from kvpool.impl import BlockPool, PoolError
from kvpool.oracle.conformance import Acceptance, Coverage, _search, conform, lockstep_config
from kvpool.oracle.specbranches import SpecBranches
from kvpool.oracle.steering import Steering
from kvpool.oracle.targets import as_target
from kvpool.oracle.tracereplay import replay


def test_a_shape_is_spent_once_it_showed_an_accepted_difference() -> None:
    s = Steering()
    s.note((), ["a", "b"])
    s.note(("a",), ["x", "y"])
    s.spend(("a", "x"))
    assert s.fresh((), ["a", "b"]) is None  # nothing learnt is used before the next search
    s.freeze()
    assert s.is_spent(("a", "x")) and not s.is_spent(("a",))  # y seen, not spent
    assert s.fresh(("a",), ["x", "y"]) == ["y"]
    assert s.fresh((), ["a", "b"]) is None  # no option spent: the plain draw
    s.spend(("a", "y"))
    s.freeze()
    assert s.is_spent(("a",)) and s.fresh((), ["a", "b"]) == ["b"]
    s.spend(("b",))
    s.freeze()
    assert s.is_spent(()) and s.fresh((), ["a", "b"]) is None  # all spent: nothing to prefer
    s.spend(())  # a valid call has no shape: nothing is learnt from it
    assert not s.pending_spent


class Starving(BlockPool):
    """Seeded: a refused ``get_new_blocks`` (a bad count, too many blocks), ``unpin`` or
    ``evict`` of the null block hands out a block anyway and returns as if it had worked
    (common: the pool's state parts from the spec's); ``emit_cached_block_events`` takes a
    negative count (rare: one case of one of five calls of a third kind)."""

    def _anyway(self, name: str, value: Any, *args: Any) -> Any:
        try:
            return getattr(BlockPool, name)(self, *args)
        except PoolError:
            if self.free_block_queue.num_free_blocks:
                BlockPool.get_new_blocks(self, 1)
            return value

    def get_new_blocks(self, num_blocks: Any) -> Any:
        return self._anyway("get_new_blocks", [], num_blocks)

    def unpin_blocks(self, *args: Any) -> Any:
        return self._anyway("unpin_blocks", None, *args)

    def evict_blocks(self, *args: Any) -> Any:
        return self._anyway("evict_blocks", None, *args)

    def cache_blocks(self, *args: Any) -> Any:
        return self._anyway("cache_blocks", None, *args)

    def emit_cached_block_events(self, request: Any, num_cached_blocks: Any, *args: Any) -> None:
        if type(num_cached_blocks) is int and num_cached_blocks < 0:
            return None
        return super().emit_cached_block_events(request, num_cached_blocks, *args)


STARVING: dict[str, Any] = {
    "examples": 30,
    "steps": 20,
    "max_blocks": 6,
    "max_pools": 1,
    "caching": True,
    "events": True,
    "faults": False,
    "spec_coverage": False,
    "rules": frozenset(
        {
            "allocate",
            "cache_request",
            "invalid_call",
            "bad_count",
            "null_misuse",
            "multikey_refused",
        }
    ),
}


class Inert(Steering):
    """Steering that never steers: the search as it was before steering."""

    def fresh(self, path: tuple[str, ...], options: Any) -> list[str] | None:
        return None

    def is_spent(self, path: tuple[str, ...]) -> bool:
        return False


MULTIKEY = {
    "CacheFullBlocks",
    "CachePartialBlock",
    "MoveBlockHashes",
    "GetCachedBlockGroups",
    "EmitCachedBlockEvents",
}


def refusals(coverage: Coverage) -> tuple[int, int]:
    """Invalid calls compared on the target: vLLM's multi-key calls, and the others."""
    multikey = other = 0
    for (op, kind), n in coverage.outcomes.items():
        if kind != "ok":
            multikey += n if op in MULTIKEY else 0
            other += 0 if op in MULTIKEY else n
    return multikey, other


@pytest.mark.skipif(
    os.environ.get("KVPOOL_DEEP") != "1",
    reason="an --all run and two searches, about half a minute of CPU: make conform-vllm runs it",
)
def test_once_common_findings_are_accepted_the_search_compares_other_shapes(
    monkeypatch: Any,
) -> None:
    """On the starving pool, ``--all`` finds the common findings; from what that run
    learnt, one more search (accepting them) compares several times more invalid calls
    of the third kind, where the rare finding is, than the same search unsteered (the
    search before steering: an inert steering makes exactly its draws), whose examples
    end at a common finding first."""
    import kvpool.oracle.conformance as conformance

    learnt: list[Steering] = []

    class Recorded(Steering):
        def __init__(self) -> None:
            super().__init__()
            learnt.append(self)

    monkeypatch.setattr(conformance, "Steering", Recorded)
    target = as_target(Starving)
    report = conform(target, "robust", keep_going=True, patience=3, **STARVING)
    common = {d.signature for d in report.findings}
    assert any(s.startswith("error kind differs at GetNewBlocks") for s in common), common
    for d in report.findings:  # each finding's trace fails here and passes on the reference
        assert d.trace is not None
        assert replay(d.trace, target, "robust").divergence is not None
        assert replay(d.trace, as_target(BlockPool), "robust").divergence is None
    options = {k: v for k, v in STARVING.items() if k not in ("examples", "steps", "spec_coverage")}
    config = lockstep_config(target, "robust", **options)
    counts = []
    for steering in (learnt[0], Inert()):
        coverage = Coverage()
        accept = Acceptance(frozenset(common))
        branches = SpecBranches(False)
        _search(target, config, "robust", 60, None, 20, accept, coverage, branches, steering)
        counts.append(refusals(coverage))
    (steered, _), (plain, _) = counts
    assert steered >= 3 * plain, counts


RARE = "error kind differs at EmitCachedBlockEvents: spec InvalidArgument, target success"


def test_one_erratum_is_one_finding_whatever_signatures_it_shows(monkeypatch: Any) -> None:
    """``--all`` lists an erratum once: a later finding with another signature that names
    the same erratum (``removed-while-held`` shows as INV-EVENTS and as the event log
    differing at ``evict_blocks`` or ``get_new_blocks``) is folded into the first, under
    ``also``; a finding of another erratum is listed. A signature not met before is
    something new to ``patience`` (the search still meets new things), a repeated one
    is not."""
    import kvpool.oracle.conformance as conformance
    from kvpool.oracle.conformance import Difference

    shown = [
        ("INV-EVENTS", "removed-while-held"),
        ("state differs at EvictBlocks (event log)", "removed-while-held"),
        ("state differs at GetNewBlocks (event log)", "removed-while-held"),
        ("state differs at Touch (pending watchers)", "unpin-one-watcher"),
    ]
    names = {sig: name for sig, name in shown}
    found = iter(shown)

    def scripted(*args: Any, **kwargs: Any) -> tuple[Difference, list[str]] | None:
        sig = next(found, None)
        if sig is None:
            return None
        return Difference(sig[0], sig[0].split(" at ")[0], sig[0]), [sig[0]]

    monkeypatch.setattr(conformance, "_search", scripted)
    # what names each finding (its signature, or its trace's event logs) is tested elsewhere
    monkeypatch.setattr(conformance, "_erratum", lambda d, known, target: names[d.signature])
    monkeypatch.setattr(conformance, "errata_signatures", lambda target, level: {})
    report = conform(as_target(BlockPool), "exact", keep_going=True, patience=3)
    assert [(d.signature, d.erratum) for d in report.findings] == [
        ("INV-EVENTS", "removed-while-held"),
        ("state differs at Touch (pending watchers)", "unpin-one-watcher"),
    ]
    assert report.findings[0].also == [
        "state differs at EvictBlocks (event log)",
        "state differs at GetNewBlocks (event log)",
    ]
    assert report.findings[0].to_json()["also_seen_as"] == report.findings[0].also
    # patience 1: the two other signatures of removed-while-held keep the stage going
    # (each is new), so unpin-one-watcher behind them is still listed
    found = iter(shown)
    once = conform(as_target(BlockPool), "exact", keep_going=True, patience=1)
    assert [d.erratum for d in once.findings] == ["removed-while-held", "unpin-one-watcher"]
    # a signature met again is nothing new: patience 1 ends the stage there
    found = iter([shown[0], shown[1], shown[1], shown[3]])
    again = conform(as_target(BlockPool), "exact", keep_going=True, patience=1)
    assert [d.erratum for d in again.findings] == ["removed-while-held"]


def test_a_signature_the_shrinker_slipped_from_is_met_again(monkeypatch: Any) -> None:
    """A search that met one difference and shrank to another, not yet found, lists the
    one it shrank to; the one it met first stays unaccepted, so a later search meets it
    again and lists it (it was accepted with the other, and never listed)."""
    import kvpool.oracle.conformance as conformance
    from kvpool.oracle.conformance import Difference

    met, shrunk = "result differs: value at GetUsage", "result differs: value at Touch"
    accepted: list[frozenset[str]] = []

    def scripted(*args: Any, **kwargs: Any) -> tuple[Difference, list[str]] | None:
        accept: Acceptance = args[6]
        accepted.append(accept.signatures)
        if shrunk not in accept.signatures:
            return Difference(shrunk, "result differs: value", shrunk), [met, shrunk]
        if met not in accept.signatures:
            return Difference(met, "result differs: value", met), [met]
        return None

    monkeypatch.setattr(conformance, "_search", scripted)
    monkeypatch.setattr(conformance, "errata_signatures", lambda target, level: {})
    monkeypatch.setattr(conformance, "_erratum", lambda d, known, target: None)
    report = conform(as_target(BlockPool), "exact", keep_going=True, patience=2)
    assert [d.signature for d in report.findings] == [shrunk, met]
    assert accepted[1] == frozenset({shrunk})


def test_a_search_past_accepted_differences_builds_further_entries() -> None:
    """Once a search goes past accepted differences, one run of multi-key calls in two
    is a partial entry and two or three further entries on its block (the state
    ``further-entries-unordered`` needs, which an accepted difference most often cuts
    short); a search with nothing accepted makes its plain draws."""
    target = as_target(BlockPool)
    config = lockstep_config(target, "exact", max_blocks=8, max_pools=1, caching=True)
    made = []
    for accept in (Acceptance(), Acceptance(frozenset({"a difference never met"}))):
        coverage = Coverage()
        _search(target, config, "exact", 40, None, 20, accept, coverage, SpecBranches(False))
        made.append(coverage.by_op().get("CachePartialBlock", {}).get("ok", 0))
    plain, past = made
    assert past >= 2 * max(plain, 1), made
