"""cmd: targets: the example pool in Node.js, over the published JSON-lines protocol."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from kvpool.oracle.conformance import conform, replay
from kvpool.oracle.targets import TargetError, resolve

ROOT = Path(__file__).resolve().parent.parent
POOL_JS = ROOT / "examples" / "node-pool" / "pool.js"
SCHEMA = json.loads((ROOT / "oracle" / "schema" / "kvpool-jsonl-1.schema.json").read_text())
CMD = f"cmd:node {POOL_JS}"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


@pytest.mark.parametrize("level", ["safety", "exact", "robust"])
def test_the_node_pool_conforms(level: str) -> None:
    report = conform(resolve(CMD), level, examples=40, steps=20)
    assert report.conforms, report.message


def test_a_seeded_bug_in_the_node_pool_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvpool.oracle.conformance import SavedTrace, op_to_json, replay
    from kvpool.spec.ops import FreeBlocks, GetNewBlocks

    monkeypatch.setenv("KVPOOL_NODE_BUG", "lifo")
    buggy = resolve(CMD)
    trace = SavedTrace(
        [(4, True, False)],
        [{"call": op_to_json(op)} for op in (GetNewBlocks(2), FreeBlocks((1, 2)), GetNewBlocks(1))],
    )
    found = replay(trace, buggy, "exact")
    assert found.divergence is not None and found.divergence.rule == "state differs"
    report = conform(buggy, "exact", examples=100, steps=15, max_blocks=6, seed=12345)
    assert not report.conforms, "the search missed the seeded bug"
    monkeypatch.delenv("KVPOOL_NODE_BUG")
    assert replay(trace, resolve(CMD), "exact").divergence is None


def test_a_session_follows_the_published_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    requests = [
        {"id": 1, "method": "hello", "params": {}},
        {
            "id": 2,
            "method": "new_pool",
            "params": {"num_blocks": 4, "enable_caching": True, "enable_kv_cache_events": True},
        },
        {"id": 3, "method": "get_new_blocks", "params": {"pool": 0, "n": 2}},
        {
            "id": 4,
            "method": "cache_blocks",
            "params": {"pool": 0, "blocks": [[0, 1]], "keys": ["a"]},
        },
        {
            "id": 5,
            "method": "unpin_blocks",
            "params": {"pool": 0, "blocks": [[0, 1]], "watcher": 7},
        },
        {"id": 6, "method": "get_new_blocks", "params": {"pool": 0, "n": 2}},
        {
            "id": 7,
            "method": "free_blocks",
            "params": {"pool": 0, "blocks": [[0, 1], [0, 1]], "evict_first": False},
        },
        {"id": 8, "method": "take_events", "params": {"pool": 0}},
        {"id": 9, "method": "state", "params": {"pool": 0}},
    ]
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    out = subprocess.run(
        ["node", str(POOL_JS)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env=dict(os.environ, KVPOOL_NODE_BUG=""),
    )
    replies = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["id"] for r in replies] == [r["id"] for r in requests]
    for line in [*requests, *replies]:
        jsonschema.validate(line, SCHEMA)
    assert replies[5]["fired"] == [[7, 0, 1]]  # the unpinned block was reused
    assert replies[6]["error"]["kind"] == "RefCountUnderflow"


def test_a_command_that_does_not_speak_the_protocol_is_a_usage_error() -> None:
    with pytest.raises(TargetError):
        resolve('cmd:echo \'{"id": 1, "result": 42, "fired": []}\'')


def test_a_target_that_dies_mid_call_is_reported_as_a_crash_with_its_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The process is started again for the next example, so the crash replays and shrinks
    # like any other failure instead of turning into Hypothesis's "flaky".
    monkeypatch.setenv("KVPOOL_NODE_BUG", "crash-on-touch")
    target = resolve(CMD)
    report = conform(target, "exact", examples=60, steps=15, max_blocks=6, seed=7)
    assert report.rule == "target crashed", report.message
    assert "exited (no reply to touch)" in report.message
    assert report.trace is not None and len(report.trace.pools) == 1
    calls = [s["call"]["op"] for s in report.trace.steps if "call" in s]
    assert calls[-1] == "Touch" and len(calls) <= 2, calls
    again = replay(report.trace, target)
    assert again.divergence is not None and again.divergence.rule == "target crashed"
