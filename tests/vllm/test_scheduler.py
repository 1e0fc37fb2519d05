"""vLLM 0.33.0's real Scheduler, once on vLLM's pool and once on kvpool's: same observations.

The scheduler is built offline (scheduler_harness.py: a tiny local model config, no hub, no
tokenizer) and driven with made-up model outputs through serving stories written for this
suite: requests sharing a system prompt (prefix hits), more requests than blocks (the
scheduler preempts running requests and resumes them, with prefix hits on their own blocks),
two blocks holding one key, prefix-cache resets, chunked prefills, aborts, and requests
finishing at their token limit. After every step the two runs must agree on what the
scheduler decided and on the pool behind it. Seeded bugs from ``kvpool.mutants`` in
kvpool's pool make the comparison fail; a connector's double free after a request finished
shows the typed error at the faulty call.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from harness import KINDS, prompt
from scheduler_harness import Serving, first_difference

import kvpool.mutants as mutants
from kvpool.spec.errors import RefCountUnderflow

Story = Callable[[Serving], None]


def shared_system_prompt(s: Serving) -> None:
    system = prompt(0, 40)
    s.add("a", system + prompt(1, 10), max_tokens=6)
    s.step()
    s.add("b", system + prompt(2, 20), max_tokens=4)  # hits a's two full blocks
    s.add("c", system[:32] + prompt(3, 5), max_tokens=3)
    s.run()
    s.add("d", system + prompt(4, 1), max_tokens=2)  # hits the prefix among free blocks
    s.run()


def preemption_under_pressure(s: Serving) -> None:
    """Four requests decode past what 10 blocks hold: vLLM preempts the newest, resumes it."""
    for i in range(4):
        s.add(f"r{i}", prompt(i, 30), max_tokens=40)
    s.run()


def preempt_then_resume_with_a_hit(s: Serving) -> None:
    """Three requests outgrow 10 blocks at their fourth block: vLLM preempts the newest, the
    other two finish soon, and the preempted one resumes on its own cached prompt blocks."""
    for i in range(3):
        s.add(f"r{i}", prompt(i, 40), max_tokens=12 if i < 2 else 20)
    s.run()


def decode_meets_prompt(s: Serving) -> None:
    """A prompt equal to another request's prompt plus what it will decode: the prompt's
    block is cached first, then the decoding request fills a block of the same content, so
    two blocks hold one key; a later request hits the older holder."""
    head = prompt(0, 30)
    s.add("a", head, max_tokens=5)  # samples 30000, 30001, ... (Serving.step's tokens)
    s.step()
    s.add("b", [*head, 30000, 30001], max_tokens=3)
    s.run()
    s.add("c", [*head, 30000, 30001, *prompt(1, 3)], max_tokens=1)
    s.run()


def reset_between_waves(s: Serving) -> None:
    system = prompt(0, 40)
    s.add("a", system, max_tokens=10)
    s.step()
    s.reset()  # refused: a holds blocks
    s.reset(preempt_running=True)  # a is preempted, the cache cleared; a resumes, no hit
    s.run()
    s.add("b", system, max_tokens=2)  # hits what a cached after the reset
    s.run()
    s.reset()
    s.add("c", system, max_tokens=2)  # no hit
    s.run()


def chunked_prefill_and_abort(s: Serving) -> None:
    system = prompt(0, 48)
    s.add("long", system + prompt(1, 100), max_tokens=3)  # 148 tokens, 64 a step: chunked
    s.step()
    s.add("short", system + prompt(2, 4), max_tokens=5)
    s.step()
    s.step()
    s.abort("long")
    s.add("again", system + prompt(1, 100), max_tokens=2)  # hits what "long" cached
    s.run()


def random_serving(seed: int) -> Story:
    def run(s: Serving) -> None:
        rng = random.Random(seed)
        prefixes = [prompt(100 + p, rng.choice([16, 32, 48])) for p in range(3)]
        live: list[str] = []
        for step in range(50):
            roll = rng.random()
            if roll < 0.3:
                rid = f"q{step}"
                tail = prompt(step, rng.randint(1, 40))
                s.add(rid, rng.choice(prefixes) + tail, max_tokens=rng.randint(1, 30))
                live.append(rid)
            elif roll < 0.35 and live:
                s.abort(live.pop(rng.randrange(len(live))))
            s.step()
        s.run()

    return run


STORIES: dict[str, tuple[Story, dict[str, Any]]] = {
    "shared_system_prompt": (shared_system_prompt, {}),
    "preemption_under_pressure": (preemption_under_pressure, {"num_blocks": 11}),
    "preempt_then_resume_with_a_hit": (preempt_then_resume_with_a_hit, {"num_blocks": 11}),
    "decode_meets_prompt": (decode_meets_prompt, {}),
    "reset_between_waves": (reset_between_waves, {}),
    "chunked_prefill_and_abort": (chunked_prefill_and_abort, {"num_blocks": 20}),
    **{f"random_serving_{s}": (random_serving(s), {"num_blocks": 16}) for s in range(3)},
}


def run_story(name: str, kind: str) -> Serving:
    story, options = STORIES[name]
    s = Serving(kind, **options)
    story(s)
    return s


@pytest.mark.parametrize("name", sorted(STORIES))
def test_scheduler_observes_the_same_on_both_pools(name: str) -> None:
    logs = {kind: run_story(name, kind).log for kind in KINDS}
    assert len(logs["vllm"]) >= 5
    diff = first_difference(logs["vllm"], logs["kvpool"])
    assert diff is None, diff


# -- the stories do what they say (on vLLM's own pool) -----------------------------------


def _hits(log: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Computed tokens at each (re)scheduling of a request from the waiting queue."""
    out: dict[str, list[int]] = {}
    for e in log:
        for rid, _, computed in e.get("new", []):
            out.setdefault(rid, []).append(computed)
    return out


def _event_kinds(log: list[dict[str, Any]]) -> set[str]:
    return {ev[0] for e in log for ev in e["events"]}


def test_the_stories_hit_preempt_evict_and_finish() -> None:
    s = run_story("shared_system_prompt", "vllm")
    assert _hits(s.log) == {"a": [0], "b": [32], "c": [32], "d": [32]}
    assert sorted(s.finished) == ["a", "b", "c", "d"]

    s = run_story("preempt_then_resume_with_a_hit", "vllm")
    assert [e["preempted"] for e in s.log if e.get("preempted")] == [["r2"]]
    assert _hits(s.log)["r2"] == [0, 32]  # resumed on its own cached prompt blocks
    assert sum(e["prefix_stats"][5] for e in s.log if "prefix_stats" in e) == 32
    assert sorted(s.finished) == ["r0", "r1", "r2"]

    s = run_story("preemption_under_pressure", "vllm")
    assert sum(len(e.get("preempted", ())) for e in s.log) >= 2
    assert {"BlockStored", "BlockRemoved"} <= _event_kinds(s.log)  # cached blocks evicted

    s = run_story("decode_meets_prompt", "vllm")
    assert any(
        len({k for k, _ in e["keys"] if k}) < sum(1 for k, _ in e["keys"] if k) for e in s.log
    )  # two blocks hold one key
    assert _hits(s.log)["c"] == [32]

    s = run_story("reset_between_waves", "vllm")
    assert [e["step"] for e in s.log if e["step"][0] == "reset"] == [
        ("reset", False, False),
        ("reset", True, True),
        ("reset", False, True),
    ]
    assert _hits(s.log) == {"a": [0, 0], "b": [32], "c": [0]}
    assert "AllBlocksCleared" in _event_kinds(s.log)

    s = run_story("chunked_prefill_and_abort", "vllm")
    assert _hits(s.log) == {"long": [0], "short": [48], "again": [144]}
    assert sorted(s.finished) == ["again", "short"]  # "long" was aborted

    for seed in range(3):
        s = run_story(f"random_serving_{seed}", "vllm")
        assert any(h > 0 for hs in _hits(s.log).values() for h in hs)
        assert not s.scheduler.has_requests()


# -- the comparison can fail -------------------------------------------------------------

# Seeded bugs from kvpool's catalogue that change what vLLM's scheduler does or sees on
# valid traffic, each with a story that exposes it and the first observation that differs.
CAUGHT = {
    "lifo-fifo-swapped": ("shared_system_prompt", "free"),  # freed blocks queued wrong end
    "popleft-n-overrun": ("shared_system_prompt", "new"),  # one block too many handed out
    "prepend-counter-stale": ("shared_system_prompt", "usage"),
    "null-handed-out": ("shared_system_prompt", "usage"),
    "touch-keeps-free": ("shared_system_prompt", "usage"),  # a hit block stays free
    "remove-half-stitched": ("shared_system_prompt", "free"),
}


@pytest.mark.parametrize("mutant", sorted(CAUGHT))
def test_a_seeded_bug_in_kvpools_pool_makes_the_scheduler_runs_differ(mutant: str) -> None:
    story, field = CAUGHT[mutant]
    fn, options = STORIES[story]
    clean = run_story(story, "vllm").log
    buggy = Serving("kvpool", mutant=mutant, **options)
    fn(buggy)
    diff = first_difference(clean, buggy.log)
    assert diff is not None
    assert f": {field} differs" in diff.splitlines()[0], diff


# Every mutant of the catalogue that some story exposes (the runs differ, or the buggy run
# raises). The others need calls vLLM's scheduler does not make on valid traffic.
SCHEDULER_VISIBLE = {
    "append-counter-stale",
    "insufficient-off-by-one",
    "key-kept-on-reuse",
    "lifo-fifo-swapped",
    "null-handed-out",
    "popleft-n-overrun",
    "popleft-stale-prev",
    "prepend-counter-stale",
    "remove-half-stitched",
    "reset-not-logged",
    "reset-while-in-use",
    "touch-keeps-free",
    "usage-inverted",
}


def _exposes(mutant: str, clean: dict[str, list[dict[str, Any]]]) -> bool:
    for story, (fn, options) in STORIES.items():
        buggy = Serving("kvpool", mutant=mutant, **options)
        try:
            fn(buggy)
        except Exception:
            return True
        if first_difference(clean[story], buggy.log) is not None:
            return True
    return False


def test_which_mutants_of_the_catalogue_the_stories_expose() -> None:
    clean = {name: run_story(name, "vllm").log for name in STORIES}
    exposed = {name for name in mutants.CATALOGUE if _exposes(name, clean)}
    assert exposed == SCHEDULER_VISIBLE


def test_a_mutant_goes_only_into_kvpools_pool() -> None:
    with pytest.raises(ValueError, match="kvpool's pool"):
        Serving("vllm", mutant="lifo-fifo-swapped")


# -- misuse at scheduler level -------------------------------------------------------------


def _finish_one_and_keep_its_blocks(kind: str) -> tuple[Serving, list[Any]]:
    """A connector keeps the block list of a request it sends KV for; the request finishes
    and the scheduler frees its blocks."""
    s = Serving(kind, num_blocks=6)
    s.add("a", prompt(0, 40), max_tokens=2)
    s.step()
    kept = list(s.scheduler.kv_cache_manager.get_blocks("a").blocks[0])
    s.run()
    return s, kept


def test_connector_freeing_a_finished_requests_blocks_raises_at_that_call() -> None:
    s, kept = _finish_one_and_keep_its_blocks("kvpool")
    before = s.pool_state()
    with pytest.raises(RefCountUnderflow, match="double free"):
        s.pool.free_blocks(kept)  # the connector frees them again
    assert s.pool_state() == before
    s.add("b", prompt(0, 40) + prompt(1, 4), max_tokens=3)
    s.step()
    s.add("c", prompt(2, 40), max_tokens=3)
    s.run()  # the scheduler serves on: b hits a's two full blocks
    assert _hits(s.log) == {"a": [0], "b": [32], "c": [0]}
    assert sorted(s.finished) == ["a", "b", "c"]


def test_on_vllms_pool_the_same_free_breaks_a_later_schedule() -> None:
    s, kept = _finish_one_and_keep_its_blocks("vllm")
    s.pool.free_blocks(kept)  # no error: ref counts go to -1
    assert [b.ref_cnt for b in kept] == [-1, -1, -1]
    s.add("b", prompt(0, 40) + prompt(1, 4), max_tokens=3)
    with pytest.raises(AssertionError) as failure:  # one call later, somewhere else
        s.step()
    assert failure.traceback[-1].name == "get_new_blocks"  # vLLM's `assert block.ref_cnt == 0`
