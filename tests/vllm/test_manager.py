"""vLLM 0.33.0's KVCacheManager, once on vLLM's pool and once on kvpool's: same observations.

Each scenario is a short serving story written for this suite. It runs on a manager built
on vLLM's own BlockPool and on one built on kvpool's (through ``kvpool.vllm_plugin``), and
after every step the two must agree on what the manager returned (block ids per group,
computed tokens, prefix hits) and on the pool behind it (free queue order, ref counts, every
block's keys, the events taken). The comparison names the first step that differs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from harness import KINDS, Manager, full_spec, prompt, window_spec

Scenario = Callable[[Manager], None]


def shared_prefix(m: Manager) -> None:
    system = prompt(0, 40)  # two full blocks and a partial one
    m.add("a", system + prompt(1, 10))
    m.add("b", system + prompt(2, 20))  # hits a's two full blocks
    m.free("a")
    m.add("c", system[:32] + prompt(3, 5))
    m.free("b")
    m.free("c")
    m.add("d", system + prompt(4, 1))  # hits the cached prefix among free blocks


def decode_fills_blocks(m: Manager) -> None:
    m.add("a", prompt(0, 30))
    for t in range(40):  # crosses block boundaries: each full block gets cached
        m.decode("a", 7000 + t)
    m.free("a")
    m.add("b", prompt(0, 30) + [7000 + t for t in range(20)])  # hits the decoded blocks


def eviction_under_pressure(m: Manager) -> None:
    for i in range(5):
        m.add(f"r{i}", prompt(i, 33))  # three blocks each; the pool runs dry
        if i % 2 == 1:
            m.free(f"r{i - 1}")
    for i in range(5):
        if f"r{i}" in m.requests:
            m.free(f"r{i}")
    m.add("again", prompt(3, 33))  # the newest cached prefix survived eviction


def too_big_then_fits(m: Manager) -> None:
    m.add("big", prompt(0, 16 * 20))  # more blocks than the pool has: allocate_slots says None
    m.add("small", prompt(1, 20))
    m.free("small")


def evict_and_reset(m: Manager) -> None:
    m.add("a", prompt(0, 50))
    m.add("b", prompt(1, 50))
    m.free("a")
    m.evict({1, 2, 5})
    m.reset()  # refused: b still holds blocks
    m.free("b")
    m.reset()
    m.add("c", prompt(0, 50))  # no hit after the reset


def random_serving(seed: int) -> Scenario:
    def run(m: Manager) -> None:
        rng = random.Random(seed)
        prefixes = [prompt(100 + p, rng.choice([16, 32, 48])) for p in range(3)]
        live: list[str] = []
        for step in range(60):
            roll = rng.random()
            if roll < 0.35 or not live:
                rid = f"q{step}"
                tail = prompt(step, rng.randint(1, 30))
                out = m.add(rid, rng.choice(prefixes) + tail)
                if out[-1] is not None:
                    live.append(rid)
                else:
                    m.requests.pop(rid)
            elif roll < 0.75:
                out = m.decode(rng.choice(live), rng.randrange(50_000))
            else:
                m.free(live.pop(rng.randrange(len(live))))
        for rid in live:
            m.free(rid)

    return run


def hybrid_window(m: Manager) -> None:
    """A full-attention group and a sliding-window group share one pool."""
    system = prompt(0, 64)
    m.add("a", system + prompt(1, 20))
    for t in range(20):
        m.decode("a", 8000 + t)
    m.skip_window("a")  # blocks outside the window return to the pool, null in the table
    m.add("b", system + prompt(2, 8))
    m.free("a")
    m.free("b")
    m.add("c", system + prompt(3, 3))


SCENARIOS: dict[str, tuple[Scenario, dict[str, Any]]] = {
    "shared_prefix": (shared_prefix, {}),
    "decode_fills_blocks": (decode_fills_blocks, {}),
    "eviction_under_pressure": (eviction_under_pressure, {"num_blocks": 9}),
    "too_big_then_fits": (too_big_then_fits, {}),
    "evict_and_reset": (evict_and_reset, {}),
    "events_off": (shared_prefix, {"events": False}),
    "hybrid_window": (
        hybrid_window,
        {"num_blocks": 24, "specs": (full_spec(), window_spec(32))},
    ),
    **{f"random_serving_{s}": (random_serving(s), {"num_blocks": 20}) for s in range(4)},
}


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str | None:
    for step, (x, y) in enumerate(zip(a, b, strict=False)):
        for name in x:
            if x[name] != y[name]:
                where = f"step {step} {x['out'][:2]}: {name} differs"
                return f"{where}\n vllm:   {x[name]}\n kvpool: {y[name]}"
    if len(a) != len(b):
        return f"{len(a)} steps on vllm, {len(b)} on kvpool"
    return None


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_manager_observes_the_same_on_both_pools(name: str) -> None:
    scenario, options = SCENARIOS[name]
    logs = {}
    for kind in KINDS:
        m = Manager(kind, **options)
        scenario(m)
        logs[kind] = m.log
    assert len(logs["vllm"]) >= 3
    assert first_difference(logs["vllm"], logs["kvpool"]) is None, first_difference(
        logs["vllm"], logs["kvpool"]
    )


def test_scenarios_hit_the_prefix_cache_and_evict() -> None:
    """The stories do what they are for: hits happen, cached blocks get evicted, events flow."""
    m = Manager("vllm")
    shared_prefix(m)
    assert [e["out"][2] for e in m.log if e["out"][0] == "add"] == [0, 32, 32, 32]
    m = Manager("vllm", num_blocks=9)
    eviction_under_pressure(m)
    removed = [ev for e in m.log for ev in e["events"] if ev[0] == "BlockRemoved"]
    assert removed


def test_comparison_sees_a_difference() -> None:
    """The check can fail: a kvpool manager with one extra free has a different log."""
    logs = []
    for kind in KINDS:
        m = Manager(kind)
        shared_prefix(m)
        logs.append(m.log)
    m = Manager("kvpool")
    shared_prefix(m)
    m.log[3]["free"] = list(reversed(m.log[3]["free"]))
    assert first_difference(logs[0], m.log) is not None


def test_event_hashes_are_vllms_ints_unconverted() -> None:
    """vLLM 0.33.0 puts each block hash into its events as the low 64 bits of the hash
    (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, on by default); kvpool reads that setting as
    vLLM does, so the logs above compare events exactly as each pool emitted them."""
    logs = []
    for kind in KINDS:
        m = Manager(kind)
        shared_prefix(m)
        logs.append(m.log)
    assert first_difference(logs[0], logs[1]) is None, first_difference(logs[0], logs[1])
    hashes = [
        h
        for entry in logs[1]
        for event in entry["events"]
        if event[0] == "BlockStored"
        for h in dict(event[1:])["block_hashes"]
    ]
    assert hashes and all(type(h) is int and 0 <= h < 2**64 for h in hashes)


def test_a_pool_putting_hash_bytes_into_events_is_caught() -> None:
    """The comparison can fail on the form of the hashes: a kvpool pool made to put the
    bytes into its events (what it did before it read vLLM's setting) differs."""
    clean = Manager("vllm")
    shared_prefix(clean)
    buggy = Manager("kvpool")
    buggy.pool._int_event_hashes = False
    shared_prefix(buggy)
    assert first_difference(clean.log, buggy.log) is not None


@pytest.mark.parametrize("setting", ["0", "1"])
def test_the_int_hash_setting_is_read_as_vllm_reads_it(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", setting)
    logs = []
    for kind in KINDS:
        m = Manager(kind)
        shared_prefix(m)
        logs.append(m.log)
    assert first_difference(logs[0], logs[1]) is None, first_difference(logs[0], logs[1])
    stored = [ev for entry in logs[1] for ev in entry["events"] if ev[0] == "BlockStored"]
    want = int if setting == "1" else bytes
    assert stored and all(type(h) is want for ev in stored for h in dict(ev[1:])["block_hashes"])
