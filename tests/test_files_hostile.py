"""Hostile and careless files: every one is refused with one line on stderr and exit 2,
before the oracle builds anything from it; and no file makes the oracle run code.

The corpus is generated here (nothing committed): malformed traces for ``replay`` and
``show``, malformed logs for ``check-log``, malformed vector corpora for ``vectors``, and
files that are small but ask for huge pools (the 4.5 KB trace that named a 100,000-block
pool, the 3.6 MB one with 200,000 pools).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvpool.oracle.cli import main
from kvpool.oracle.exits import BAD_INPUT, CONFORMS

GOOD_STEP = {
    "call": {"op": "GetNewBlocks", "n": 1, "pool": 0},
    "expected": {"value": {"t": "tuple", "v": [1]}, "error": None, "fired": []},
    "nested": [],
}


def trace(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema": "kvpool-trace/1",
        "target": "reference",
        "level": "exact",
        "pools": [[4, True, False]],
        "steps": [GOOD_STEP],
        "violation": None,
    }
    base.update(changes)
    return base


def nested(depth: int) -> Any:
    v: Any = "k"
    for _ in range(depth):
        v = {"t": "tuple", "v": [v]}
    return v


def deep(document: Any, depth: int) -> str:
    """``document`` as JSON with the string "DEEP" replaced by a key nested ``depth`` deep
    (written as text: json.dumps itself cannot nest that deep)."""
    key = '{"t": "tuple", "v": [' * depth + '"k"' + "]}" * depth
    return json.dumps(document).replace('"DEEP"', key)


BAD_TRACES: dict[str, Any] = {
    "not json": "{this is not json",
    "empty": "",
    "a list": [],
    "a number": 3,
    "null": None,
    "no schema": {k: v for k, v in trace().items() if k != "schema"},
    "other schema": trace(schema="kvpool-trace/9"),
    "pools missing": {k: v for k, v in trace().items() if k != "pools"},
    "pools not a list": trace(pools="many"),
    "no pools": trace(pools=[]),
    "pool of two fields": trace(pools=[[4, True]]),
    "pool size a string": trace(pools=[["4", True, False]]),
    "pool size a float": trace(pools=[[4.5, True, False]]),
    "pool size a bool": trace(pools=[[True, True, False]]),
    "pool size zero": trace(pools=[[0, True, False]]),
    "pool size negative": trace(pools=[[-3, True, False]]),
    "caching not a bool": trace(pools=[[4, "yes", False]]),
    "100,000 blocks": trace(pools=[[100_000, True, False]]),
    "a million blocks": trace(pools=[[1_000_000, True, False]]),
    "a huge pool size": trace(pools=[[10**300, True, False]]),
    "200,000 pools": trace(pools=[[2, True, False]] * 200_000),
    "level unknown": trace(level="strictest"),
    "level a list": trace(level=["exact"]),
    "target a number": trace(target=7),
    "violation a string": trace(violation="bad"),
    "steps missing": {k: v for k, v in trace().items() if k != "steps"},
    "steps an object": trace(steps={"a": 1}),
    "a step a string": trace(steps=["GetNewBlocks"]),
    "a step with no call": trace(steps=[{"expected": None}]),
    "an unknown op": trace(steps=[{"call": {"op": "FormatDisk", "pool": 0}}]),
    "an op with no name": trace(steps=[{"call": {"n": 1}}]),
    "an unknown field": trace(steps=[{"call": {"op": "GetNewBlocks", "n": 1, "colour": 2}}]),
    "a call a list": trace(steps=[{"call": ["GetNewBlocks", 1]}]),
    "a pool the file lacks": trace(steps=[{"call": {"op": "GetNewBlocks", "n": 1, "pool": 5}}]),
    "a negative pool": trace(steps=[{"call": {"op": "GetNewBlocks", "n": 1, "pool": -1}}]),
    "a pool that is a string": trace(steps=[{"call": {"op": "GetNewBlocks", "n": 1, "pool": "0"}}]),
    "a block of a pool the file lacks": trace(
        steps=[
            {"call": {"op": "Touch", "blocks": {"t": "tuple", "v": [{"t": "ref", "v": [9, 1]}]}}}
        ]
    ),
    "a ref of the wrong shape": trace(
        steps=[{"call": {"op": "Touch", "blocks": {"t": "tuple", "v": [{"t": "ref", "v": [0]}]}}}]
    ),
    "a tuple tag over a number": trace(
        steps=[{"call": {"op": "Touch", "blocks": {"t": "tuple", "v": 5}}}]
    ),
    "an outcome a string": trace(steps=[{**GOOD_STEP, "expected": "fine"}]),
    "an unknown error kind": trace(
        steps=[{**GOOD_STEP, "expected": {"value": None, "error": "Oops", "fired": []}}]
    ),
    "a firing of one field": trace(
        steps=[{**GOOD_STEP, "expected": {"value": None, "error": None, "fired": [[1]]}}]
    ),
    "fired not a list": trace(
        steps=[{**GOOD_STEP, "expected": {"value": None, "error": None, "fired": 3}}]
    ),
    "nested not a list": trace(steps=[{**GOOD_STEP, "nested": 4}]),
    "a nested call a string": trace(steps=[{**GOOD_STEP, "nested": ["x"]}]),
    "a nested unknown op": trace(steps=[{**GOOD_STEP, "nested": [{"call": {"op": "Nope"}}]}]),
    "a script not an object": trace(steps=[{"script": 3}]),
    "a script watcher a string": trace(steps=[{"script": {"watcher": "w1"}}]),
    "a script of an unknown op": trace(
        steps=[{"script": {"watcher": 1, "raise": False, "call": {"op": "Nope"}}}]
    ),
    "a script note a number": trace(steps=[{"note": 5, "script": {"watcher": 1}}]),
    "nested 10,000 deep": deep(
        trace(steps=[{"call": {"op": "GetCachedBlock", "key": "DEEP", "pool": 0}}]), 10_000
    ),
    "nested 40 deep": trace(steps=[{"call": {"op": "GetCachedBlock", "key": nested(40)}}]),
    "a 5,000-digit number": '{"schema": "kvpool-trace/1", "pools": [[' + "9" * 5000 + "]]}",
    "20,000 steps": trace(steps=[GOOD_STEP] * 20_000),
}


def write(path: Path, content: Any) -> Path:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def refused(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == BAD_INPUT, f"{args}: exit {result.exit_code}\n{result.output}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("kvpool: ") and "Traceback" not in result.output
    assert len(lines[0]) < 700, lines[0]
    return lines[0]


@pytest.mark.parametrize("name", list(BAD_TRACES))
@pytest.mark.parametrize("command", ["show", "replay"])
def test_a_bad_trace_is_one_line_and_exit_2(tmp_path: Path, name: str, command: str) -> None:
    path = write(tmp_path / "trace.json", BAD_TRACES[name])
    args = [command, str(path)] + (["-t", "reference"] if command == "replay" else [])
    line = refused(args)
    assert str(path) in line


def test_not_a_file(tmp_path: Path) -> None:
    refused(["show", str(tmp_path)])
    refused(["show", str(tmp_path / "missing.json")])
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    refused(["show", str(binary)])
    refused(["check-log", str(binary)])


def test_a_file_over_the_byte_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: 17 MiB that take no room
        f.truncate(17 * 2**20)
    assert "--max-file-bytes" in refused(["show", str(big)])
    assert "--max-file-bytes" in refused(["show", str(big), "--max-file-bytes", "1000"])


def test_the_limits_can_be_raised(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", trace(pools=[[5000, True, False]]))
    assert "--max-file-blocks" in refused(["show", str(path)])
    ok = CliRunner().invoke(main, ["show", str(path), "--max-file-blocks", "5000"])
    assert ok.exit_code == CONFORMS, ok.output
    deep = write(tmp_path / "d.json", BAD_TRACES["nested 40 deep"])
    assert "--max-file-depth" in refused(["show", str(deep)])
    ok = CliRunner().invoke(main, ["show", str(deep), "--max-file-depth", "100"])
    assert ok.exit_code == CONFORMS, ok.output


def test_the_huge_pools_are_refused_in_a_bounded_run(tmp_path: Path) -> None:
    # As a user runs it, in a process of its own: the 4.5 KB trace that took 178 s and
    # 1.26 GB, and the 200,000 pools that took 2 GB, are refused before any pool is built
    # (the timeout only keeps a regression from hanging the suite).
    for name in ("100,000 blocks", "200,000 pools"):
        path = write(tmp_path / "t.json", BAD_TRACES[name])
        done = subprocess.run(
            [sys.executable, "-m", "kvpool.oracle.cli", "replay", str(path), "-t", "reference"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == BAD_INPUT, done.stdout + done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# -- a file never runs code ---------------------------------------------------------------------


def test_replay_never_runs_the_target_a_file_names(tmp_path: Path) -> None:
    witness = tmp_path / "ran"
    for named in (
        f"cmd:touch {witness}",
        f'cmd:{sys.executable} -c \'open("{witness}", "w")\'',
        "python:antigravity:Pool",  # importing it would open a web browser
        "python:os:system",
        "vllm==0.33.0",
    ):
        path = write(tmp_path / "t.json", trace(target=named))
        line = refused(["replay", str(path)])
        assert "--target" in line
        shown = CliRunner().invoke(main, ["show", str(path)])
        assert shown.exit_code == CONFORMS, shown.output
        assert not witness.exists(), named
    assert "antigravity" not in sys.modules


def test_replay_runs_a_trace_recorded_on_the_reference_without_target(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", trace())
    assert CliRunner().invoke(main, ["replay", str(path)]).exit_code == CONFORMS


# -- logs -----------------------------------------------------------------------------------------

HEADER = {"schema": "kvpool-log/2", "num_blocks": 4, "caching": True, "events": False}
GOOD_RECORD = {
    "call": {"op": "GetNewBlocks", "n": 1, "pool": 0},
    "observed": {"value": {"t": "tuple", "v": [1]}, "error": None, "fired": []},
}


def log(*records: Any, header: Any = HEADER) -> str:
    lines = [header, *records]
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)


BAD_LOGS: dict[str, str] = {
    "empty": "",
    "not json": "hello\n",
    "header a list": log(header=[1, 2]),
    "header of another schema": log(header={**HEADER, "schema": "kvpool-log/7"}),
    "header with no size": log(header={k: v for k, v in HEADER.items() if k != "num_blocks"}),
    "size a string": log(header={**HEADER, "num_blocks": "4"}),
    "size zero": log(header={**HEADER, "num_blocks": 0}),
    "size a million": log(header={**HEADER, "num_blocks": 1_000_000}),
    "size 10^300": log(header={**HEADER, "num_blocks": 10**300}),
    "caching missing": log(header={k: v for k, v in HEADER.items() if k != "caching"}),
    "events a string": log(header={**HEADER, "events": "no"}),
    "a record not json": log("{oops"),
    "a record a list": log([1]),
    "a record a number": log(5),
    "a record of no kind": log({"observed": GOOD_RECORD["observed"]}),
    "a record with no outcome": log({"call": GOOD_RECORD["call"]}),
    "an outcome a string": log({**GOOD_RECORD, "observed": "ok"}),
    "an unknown op": log({**GOOD_RECORD, "call": {"op": "Explode"}}),
    "an op with a bad field": log({**GOOD_RECORD, "call": {"op": "GetNewBlocks", "x": 1}}),
    "a second pool": log({**GOOD_RECORD, "call": {"op": "GetNewBlocks", "n": 1, "pool": 1}}),
    "an unknown error kind": log(
        {**GOOD_RECORD, "observed": {"value": None, "error": "Nope", "fired": []}}
    ),
    "a lookup of numbers": log({"lookup": [1, 2], "observed": GOOD_RECORD["observed"]}),
    "a lookup a string": log({"lookup": "k", "observed": GOOD_RECORD["observed"]}),
    "unmodelled a number": log({"unmodelled": 4}),
    "crashed a number": log({**GOOD_RECORD, "crashed": 1}),
    "nested 10,000 deep": deep(
        {**GOOD_RECORD, "call": {"op": "GetCachedBlock", "key": "DEEP"}}, 10_000
    ).join([json.dumps(HEADER) + "\n", "\n"]),
    "a line of 2 MB": log(json.dumps({**GOOD_RECORD, "pad": "x" * (2 * 2**20)})),
    "a 5,000-digit number": log('{"call": {"op": "GetNewBlocks", "n": ' + "7" * 5000 + "}}"),
}


@pytest.mark.parametrize("name", list(BAD_LOGS))
def test_a_bad_log_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / "pool.log", BAD_LOGS[name])
    assert str(path) in refused(["check-log", str(path)])


def test_a_good_log_still_conforms(tmp_path: Path) -> None:
    path = write(tmp_path / "pool.log", log(GOOD_RECORD))
    assert CliRunner().invoke(main, ["check-log", str(path)]).exit_code == CONFORMS


def test_log_limits_have_options(tmp_path: Path) -> None:
    path = write(tmp_path / "pool.log", log(GOOD_RECORD, GOOD_RECORD))
    assert "--max-file-steps" in refused(["check-log", str(path), "--max-file-steps", "1"])
    assert "--max-file-line" in refused(["check-log", str(path), "--max-file-line", "20"])


# -- vector corpora ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "index",
    [
        None,  # no index.json
        "not json",
        [],
        {"schema": "kvpool-vectors/9", "vectors": []},
        {"schema": "kvpool-vectors/1"},
        {"schema": "kvpool-vectors/1", "vectors": "all"},
        {"schema": "kvpool-vectors/1", "vectors": [1]},
        {"schema": "kvpool-vectors/1", "vectors": ["../../../etc/passwd"]},
        {"schema": "kvpool-vectors/1", "vectors": ["/etc/passwd"]},
        {"schema": "kvpool-vectors/1", "vectors": ["missing.json"]},
        {"schema": "kvpool-vectors/1", "vectors": ["bad.json"]},
        {"schema": "kvpool-vectors/1", "vectors": ["huge.json"]},
    ],
)
@pytest.mark.parametrize("command", [["vectors", "check"], ["vectors", "run", "-t", "reference"]])
def test_a_bad_vector_corpus_is_one_line_and_exit_2(
    tmp_path: Path, index: Any, command: list[str]
) -> None:
    write(tmp_path / "bad.json", BAD_TRACES["an unknown op"])
    write(tmp_path / "huge.json", BAD_TRACES["100,000 blocks"])
    if index is not None:
        write(tmp_path / "index.json", index)
    refused([*command, "--dir", str(tmp_path)])


def test_no_such_vector_folder(tmp_path: Path) -> None:
    refused(["vectors", "check", "--dir", str(tmp_path / "nowhere")])
