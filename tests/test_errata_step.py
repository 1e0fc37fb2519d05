"""An erratum is named by the step where vLLM fails its trace (kvpool.oracle.findings.FailsAt).

Each trace of an erratum records where vLLM 0.33.0 fails it: the step of the erratum's
first divergent call and the signature there. A target is named after the erratum only
when it fails the trace at that step (or later, where vLLM's own step varies with the
process's string hashing), with that signature. The records are
checked on vLLM 0.33.0's pool, whose two files are fetched into the cache once (the
wheel downloaded from the registry, as ``tests/test_oracle_findings.py`` does; the two
files' workers wait on one lock); the rest runs on kvpool's own pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvpool.impl import BlockPool
from kvpool.oracle import conformance
from kvpool.oracle.conformance import errata_signatures, fails_at
from kvpool.oracle.findings import FINDINGS, FailsAt, by_name, trace_file
from kvpool.oracle.targets import as_target
from kvpool.oracle.traceformat import SavedTrace
from kvpool.oracle.tracereplay import replay

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "findings"

TRACES = [(f, i, saved, at) for f in FINDINGS for i, (saved, at) in enumerate(f.traces_at())]
IDS = [f"{f.name}-{i}" for f, i, _, _ in TRACES]


@pytest.fixture(scope="module")
def vllm() -> Any:
    from kvpool.oracle.targets import resolve

    return resolve("vllm==0.33.0")


@pytest.mark.parametrize(("finding", "i", "saved", "at"), TRACES, ids=IDS)
def test_vllm_fails_each_erratum_trace_at_its_recorded_step(
    vllm: Any, finding: Any, i: int, saved: SavedTrace, at: FailsAt
) -> None:
    """The record is vLLM's: replayed on vLLM 0.33.0's pool, the trace fails at the
    recorded step with the recorded signature (a hash-ordered one at it or later)."""
    got = fails_at(saved, vllm, saved.level)
    assert got is not None, finding.name
    step, sig = got
    assert sig == at.signature, (finding.name, i, got)
    if at.later:
        assert step >= at.step, (finding.name, i, got)
    else:
        assert step == at.step, (finding.name, i, got)
    # and vLLM is named after the erratum by it
    assert at.names(step, sig)


@pytest.mark.parametrize(("finding", "i", "saved", "at"), TRACES, ids=IDS)
def test_each_trace_file_holds_its_record(
    finding: Any, i: int, saved: SavedTrace, at: FailsAt
) -> None:
    """vectors/findings/ holds every trace (``python -m kvpool.oracle.findings``), each with
    where vLLM fails it; a trace's own rule is its signature's."""
    kept = SavedTrace.load(VECTORS / trace_file(finding.name, i))
    assert kept.to_json() == saved.to_json()
    assert kept.violation is not None
    assert (kept.violation["step"], kept.violation["signature"]) == (at.step, at.signature)
    assert 0 < at.step <= len(saved.steps)
    if i == 0:
        assert at.rule == finding.rule


def _further_entries(saved: SavedTrace) -> Iterator[int]:
    """After each step of ``saved`` on the spec: the most further entries one block holds."""
    for step in replay(saved).steps:
        yield max((len(ks) for ps in step.spec_state for ks in ps.entries.values()), default=0)


def test_a_hash_ordered_record_is_the_first_step_that_can_differ() -> None:
    """A trace vLLM fails at a step that depends on PYTHONHASHSEED records the first step
    at which a set of further entries can be in another order than they were added: the
    first with two of them on one block (before it, no process can fail there)."""
    later = [(f, saved, at) for f, _, saved, at in TRACES if at.later]
    assert [f.name for f, _, _ in later] == ["further-entries-unordered"]
    for _, saved, at in later:
        most = list(_further_entries(saved))
        assert most[at.step - 2] < 2 <= most[at.step - 1], most


def test_names_at_the_step_with_the_signature() -> None:
    at = FailsAt(4, "state differs at UnpinBlocks (pending watchers)", also=("INV-WATCH",))
    assert at.names(4, at.signature) and at.names(4, "INV-WATCH")
    assert not at.names(3, at.signature)  # before the erratum's call: another bug
    assert not at.names(3, "INV-WATCH")
    assert not at.names(5, "INV-WATCH")  # past it: the erratum's call went right
    assert not at.names(4, "INV-FREE")  # at it, but another difference
    later = FailsAt(4, "state differs at CachePartialBlock (further keys)", later=True)
    assert later.names(4, later.signature) and later.names(6, later.signature)
    assert not later.names(3, later.signature)
    assert at.rule == "state differs" and FailsAt(1, "INV-EVENTS").rule == "INV-EVENTS"
    assert FailsAt(1, "target crashed (WatcherRaised)").rule == "target crashed"


# -- targets with bugs of their own: not named after an erratum ---------------------------


class TouchLeavesFree(BlockPool):
    """docs/07-oracle.md's worked example: touching a free block leaves it in the free
    queue (INV-FREE at the touch)."""

    def touch(self, blocks: Any) -> None:
        for block in blocks:
            if not block.is_null:
                block.ref_cnt += 1


class NoStoredEvents(BlockPool):
    """Seeded: the pool logs no ``BlockStored``, so its consumers never learn a key (INV-EVENTS
    as soon as a block is cached): a bug of its own, not vLLM's ``removed-while-held``,
    whose trace it fails two calls before that erratum's call, under the same signature."""

    def _log(self, event: Any) -> None:
        from kvpool.spec.events import BlockStored

        if not isinstance(event, BlockStored):
            super()._log(event)


class UnpinDropsWatchers(BlockPool):
    """Seeded: ``unpin_blocks`` releases the blocks and keeps no watcher at all, so a block
    unpinned once already has the wrong pending watchers: not vLLM's
    ``unpin-one-watcher`` (a second unpin replaces the first's), whose trace it fails one
    call before that erratum's, under the same signature."""

    def unpin_blocks(self, blocks: Any, on_reuse: Any) -> None:
        registered = self._watch_registered
        super().unpin_blocks(blocks, on_reuse)
        for block in blocks:
            block._pending = None
        self._watch_registered = registered


def _without_step_check(self: FailsAt, step: int, signature: str) -> bool:
    """The seeded rule: the signature alone (the check before this one, on every erratum)."""
    return signature in (self.signature, *self.also)


@pytest.mark.parametrize("level", ["exact", "robust"])
def test_a_pool_whose_touch_leaves_a_block_free_is_named_after_no_erratum(level: str) -> None:
    """docs/07-oracle.md's example fails erratum traces that touch a free block at the
    touch, before their erratum's call: none names it, and its INV-FREE names nothing.
    (Its touch checks no pool either: that is vLLM's touch-foreign, rightly named.)"""
    target = as_target(TouchLeavesFree)
    early = {
        f.name: got
        for f, _, saved, at in TRACES
        if (got := fails_at(saved, target, level)) is not None and got[0] < at.step
    }
    assert early["watcher-sees-half-handout"] == (1, "INV-FREE")  # its reset trace's touch
    named = errata_signatures(target, level)
    assert named == {"touch-foreign": [by_name("touch-foreign").at.signature]}


@pytest.mark.parametrize(
    ("pool", "erratum", "sig"),
    [
        (NoStoredEvents, "removed-while-held", "INV-EVENTS"),
        (
            UnpinDropsWatchers,
            "unpin-one-watcher",
            "state differs at UnpinBlocks (pending watchers)",
        ),
    ],
)
def test_a_bug_that_fails_an_erratum_trace_early_under_its_signature_is_not_named(
    monkeypatch: pytest.MonkeyPatch, pool: type, erratum: str, sig: str
) -> None:
    """Seeded misnaming: with the signature alone (no step check) each pool is named after
    the erratum whose trace it fails early under that erratum's signature; the step check
    names neither."""
    target = as_target(pool)
    (saved, at), *_ = by_name(erratum).traces_at()
    got = fails_at(saved, target, "exact")
    assert got is not None and got[1] == sig and got[0] < at.step, got
    assert erratum not in errata_signatures(target, "exact")
    monkeypatch.setattr(FailsAt, "names", _without_step_check)
    assert errata_signatures(target, "exact").get(erratum) == [sig]  # the seeded rule misnames


def test_a_bug_that_fails_an_erratum_trace_past_its_step_is_not_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seeded misnaming, the other way: kvpool's pool with watchers fired twice (mutant
    watcher-fired-twice) passes unpin-one-watcher's second unpin and breaks INV-WATCH
    at the get_new_blocks after it. A rule of "at the step or later" names it after the
    erratum; "at the step" does not."""
    from kvpool import mutants

    target = as_target(mutants.get("watcher-fired-twice").pool_class())
    (saved, at), *_ = by_name("unpin-one-watcher").traces_at()
    assert fails_at(saved, target, "exact") == (at.step + 1, "INV-WATCH")
    assert "unpin-one-watcher" not in errata_signatures(target, "exact")

    def at_or_after(self: FailsAt, step: int, signature: str) -> bool:
        return step >= self.step and signature in (self.signature, *self.also)

    monkeypatch.setattr(FailsAt, "names", at_or_after)
    assert "unpin-one-watcher" in errata_signatures(target, "exact")  # the seeded rule misnames


def test_the_one_watcher_bug_seeded_into_kvpools_pool_is_named_by_its_invariant() -> None:
    """vLLM's unpin-one-watcher seeded into kvpool's pool (mutant watcher-only-last) fails
    the erratum's trace at the same call as vLLM, as INV-WATCH (its state counts the
    registrations, vLLM's does not): named, by the record's ``also``."""
    from kvpool import mutants

    target = as_target(mutants.get("watcher-only-last").pool_class())
    (saved, at), *_ = by_name("unpin-one-watcher").traces_at()
    assert fails_at(saved, target, "exact") == (at.step, "INV-WATCH")
    assert errata_signatures(target, "exact") == {"unpin-one-watcher": ["INV-WATCH"]}


def test_the_reference_is_named_after_no_erratum() -> None:
    assert errata_signatures(as_target(BlockPool), "robust") == {}


def test_a_finding_of_the_touch_example_carries_no_erratum_name() -> None:
    """End to end, on the search's own naming path (:func:`conformance._erratum`): the
    touch example's finding (INV-FREE) is named after no erratum."""
    target = as_target(TouchLeavesFree)
    names = {s: n for n, sigs in errata_signatures(target, "exact").items() for s in sigs}
    d = conformance.Difference("INV-FREE", "INV-FREE", "")
    assert conformance._erratum(d, names, target) is None


def test_a_block_listed_twice_is_told_apart_only_where_it_can_be_the_cause() -> None:
    """A touch that lists a block twice beside another pool's block is touch-foreign, as
    without the duplicate (all three robust --all runs of 12-06 listed it apart, under no
    name); a release of a block listed twice (RefCountUnderflow) is still another finding
    than one of a free block (over-free-in-one-call beside double-free)."""
    from kvpool.oracle.conformance import signature
    from kvpool.spec.ops import BlockRef, FreeBlocks, Touch, UnpinBlocks

    foreign = "Touch(...): spec ForeignBlock, target success"
    twice = Touch((BlockRef(1, 1), BlockRef(1, 1), BlockRef(0, 1)), pool=1)
    once = Touch((BlockRef(0, 1),), pool=1)
    assert signature("error kind differs", foreign, twice) == by_name("touch-foreign").at.signature
    assert signature("error kind differs", foreign, once) == by_name("touch-foreign").at.signature
    under = "...: spec RefCountUnderflow, target success"
    for op in (FreeBlocks((1, 1)), UnpinBlocks((1, 1), 0)):
        assert signature("error kind differs", under, op).endswith("(a block listed twice)")


def test_vectors_findings_holds_no_trace_of_no_erratum() -> None:
    """Every file of vectors/findings/ is a trace of an erratum (renumbered or dropped
    traces leave no stale file behind for `kvpool replay` to mislead with)."""
    files = {p.name for p in VECTORS.glob("*.json")}
    assert files == {trace_file(f.name, i) for f, i, _, _ in TRACES}
