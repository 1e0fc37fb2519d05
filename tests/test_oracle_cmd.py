"""cmd: targets: the example pool in Node.js, over the published JSON-lines protocol."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from kvpool.oracle.conformance import conform
from kvpool.oracle.target_base import TargetError
from kvpool.oracle.targets import resolve
from kvpool.oracle.tracereplay import replay

ROOT = Path(__file__).resolve().parent.parent
POOL_JS = ROOT / "examples" / "node-pool" / "pool.js"
SCHEMA = json.loads((ROOT / "oracle" / "schema" / "kvpool-jsonl-1.schema.json").read_text())
CMD = f"cmd:node {POOL_JS}"

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


@needs_node
@pytest.mark.parametrize("level", ["safety", "exact", "robust"])
def test_the_node_pool_conforms(level: str) -> None:
    report = conform(resolve(CMD), level, examples=40, steps=20)
    assert report.conforms, report.message


@needs_node
def test_a_seeded_bug_in_the_node_pool_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvpool.oracle.traceformat import SavedTrace, op_to_json
    from kvpool.oracle.tracereplay import replay
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


@needs_node
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


@needs_node
def test_a_command_that_does_not_speak_the_protocol_is_a_usage_error() -> None:
    with pytest.raises(TargetError):
        resolve('cmd:echo \'{"id": 1, "result": 42, "fired": []}\'')


@needs_node
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


# -- a target cannot hang or outlive the oracle ---------------------------------------------

STUBBORN = """
import json, os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                          "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
pids, mode = sys.argv[1], sys.argv[2]
with open(pids + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(pids + ".tmp", pids)
for line in sys.stdin:
    r = json.loads(line)
    if r["method"] == "hello" and mode == "huge-hello":
        sys.stdout.write('{"id": 1, "result": "')
        for _ in range(400):
            sys.stdout.write("x" * 2**20)
        sys.stdout.write('"}\\n')
        sys.stdout.flush()
        continue
    if r["method"] == "hello":
        result = {"protocol": "kvpool-jsonl/1", "capabilities": ["GetNewBlocks"]}
    elif r["method"] == "new_pool":
        result = 0
    else:  # every pool call hangs
        time.sleep(600)
    print(json.dumps({"id": r["id"], "result": result, "fired": []}), flush=True)
while True:  # end of input changes nothing
    time.sleep(1)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _pids(path: Path) -> list[int]:
    for _ in range(300):
        if path.exists():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the target never started")


def _all_gone(pids: list[int]) -> bool:
    for _ in range(100):
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _stubborn(tmp_path: Path, mode: str) -> tuple[str, Path]:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    pids = tmp_path / "pids"
    return f"cmd:{sys.executable} {script} {pids} {mode}", pids


def test_a_target_that_ignores_end_of_input_ends_with_its_children(tmp_path: Path) -> None:
    name, pidfile = _stubborn(tmp_path, "normal")
    target = resolve(name)
    pids = _pids(pidfile)
    assert all(_alive(p) for p in pids)
    assert target.close is not None
    target.close()
    assert _all_gone(pids), "the target or its child outlived close()"


def test_a_call_that_never_answers_is_target_hung(tmp_path: Path) -> None:
    name, pidfile = _stubborn(tmp_path, "normal")
    target = resolve(name, call_timeout=0.3)
    pids = _pids(pidfile)
    report = conform(target, "exact", examples=3, steps=3, max_blocks=4, max_pools=1)
    assert report.rule == "target hung", report.message
    assert report.trace is not None
    assert [s["call"]["op"] for s in report.trace.steps if "call" in s] == ["GetNewBlocks"]
    assert _all_gone(pids), "the hung target was left running"
    if target.close:
        target.close()


def test_a_huge_reply_is_cut_and_never_echoed(tmp_path: Path) -> None:
    name, pidfile = _stubborn(tmp_path, "huge-hello")
    with pytest.raises(TargetError) as info:
        resolve(name)
    assert "over 67,108,864 bytes" in str(info.value)
    assert len(str(info.value)) < 1000
    assert _all_gone(_pids(pidfile))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_end_the_whole_process_group(tmp_path: Path, sig: int) -> None:
    name, pidfile = _stubborn(tmp_path, "normal")
    oracle = subprocess.Popen(
        [sys.executable, "-m", "kvpool.oracle.cli", "conform", "-t", name, "--call-timeout", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pids = _pids(pidfile)
        time.sleep(1.0)  # the oracle is now waiting on a call that never returns
        oracle.send_signal(sig)
        out, err = oracle.communicate(timeout=60)
    finally:
        if oracle.poll() is None:
            oracle.kill()
    assert oracle.returncode == 130, out + err
    assert "kvpool: interrupted" in err
    assert _all_gone(pids), "Ctrl-C left the target or its child running"


PROXY_HANGING_ON_TOUCH = """
import json, subprocess, sys, time
node = subprocess.Popen(["node", sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        text=True)
for line in sys.stdin:
    if json.loads(line)["method"] == "touch":
        time.sleep(600)
    node.stdin.write(line)
    node.stdin.flush()
    sys.stdout.write(node.stdout.readline())
    sys.stdout.flush()
"""


@needs_node
@pytest.mark.parametrize(
    "level",
    # (one level in make test: each run waits out a hung call; make test-deep runs all three)
    [
        pytest.param("safety", marks=pytest.mark.deep),
        "exact",
        pytest.param("robust", marks=pytest.mark.deep),
    ],
)
def test_a_cmd_target_that_hangs_mid_search_is_shrunk_like_any_failure(
    tmp_path: Path, level: str
) -> None:
    proxy = tmp_path / "proxy.py"
    proxy.write_text(PROXY_HANGING_ON_TOUCH)
    target = resolve(f"cmd:{sys.executable} {proxy} {POOL_JS}", call_timeout=0.5)
    report = conform(target, level, examples=40, steps=8, max_blocks=5, max_pools=1, seed=3)
    assert report.rule == "target hung", report.message
    assert report.message.startswith("target hung: Touch("), report.message
    assert report.trace is not None
    calls = [s["call"]["op"] for s in report.trace.steps if "call" in s]
    assert calls[-1] == "Touch" and len(calls) <= 3, calls
    again = replay(report.trace, target, level)
    assert again.divergence is not None and again.divergence.rule == "target hung"
    if target.close:
        target.close()


def test_an_interrupt_swallowed_once_is_raised_again() -> None:
    # A signal's KeyboardInterrupt raised inside a callback that swallows it (a gc
    # callback) was lost, and the oracle went on waiting on a hung target (CI, SIGTERM):
    # the first signal starts a watchdog that raises it again until it is caught.
    from kvpool.oracle.cli import _Interrupts

    interrupts = _Interrupts(every=0.2)
    old = signal.signal(signal.SIGTERM, interrupts.handler)
    try:
        with contextlib.suppress(KeyboardInterrupt):  # the one a callback swallows
            interrupts.handler(signal.SIGTERM, None)
        with pytest.raises(KeyboardInterrupt):
            try:
                time.sleep(10)  # without the watchdog: nothing comes, the test fails
            except KeyboardInterrupt:
                interrupts.caught = True
                raise
    finally:
        interrupts.caught = True
        signal.signal(signal.SIGTERM, old)
    time.sleep(0.5)  # the watchdog has ended: nothing is raised once caught
