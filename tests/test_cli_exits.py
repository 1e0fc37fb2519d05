"""Every subcommand's exit code means one thing (kvpool.oracle.exits): 0 conforms,
1 violation (a target that crashed or hung included), 2 usage or bad input (one line),
3 an error of the oracle itself (with its traceback)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kvpool.impl import BlockPool
from kvpool.oracle import cli
from kvpool.oracle.cli import main
from kvpool.oracle.exits import BAD_INPUT, CONFORMS, ORACLE_ERROR, VIOLATION

ME = "test_cli_exits"


# -- targets for the tests (python:test_cli_exits:NAME) ---------------------------------------


class NoMethods:
    """A class that builds, but has none of the pool's methods."""

    def __init__(self, n: int, **kw: Any) -> None:
        self.blocks: list[Any] = []


class BrokenInit:
    """A pool whose constructor raises: a finding about the target, not a usage error."""

    def __init__(self, n: int, **kw: Any) -> None:
        raise RuntimeError("this pool cannot be built")


class HangOnThree(BlockPool):
    """Hangs in get_new_blocks(3), and swallows what interrupts it as long as it can."""

    def get_new_blocks(self, num_blocks: int) -> Any:
        if num_blocks == 3:
            while True:  # the oracle's interruption is no Exception: it gets through
                with contextlib.suppress(Exception):
                    time.sleep(0.01)
        return super().get_new_blocks(num_blocks)


class HangDeaf(BlockPool):
    """Blocks SIGALRM, then sleeps in get_new_blocks(3): no signal reaches it, the
    watchdog thread ends the oracle."""

    def get_new_blocks(self, num_blocks: int) -> Any:
        if num_blocks == 3:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
            time.sleep(600)
        return super().get_new_blocks(num_blocks)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def one_line_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


# -- 2: usage and bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["conform"],  # no --target
        ["conform", "-t", "nonsense"],
        ["conform", "-t", "python:no_such_module_anywhere:Pool"],
        ["conform", "-t", "python:test_cli_exits:NoSuchName"],
        ["conform", "-t", "python:nope"],
        ["conform", "-t", "vllm==../../etc"],
        ["conform", "-t", "reference", "--level", "strictest"],
        ["conform", "-t", "cmd:"],
        ["conform", "-t", "cmd:exit 3"],
        ["soak", "-t", f"cmd:{sys.executable} -c pass"],
        ["vectors", "run"],
        ["replay"],
        ["check-log"],
        ["no-such-subcommand"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == BAD_INPUT, result.output
    assert "Traceback" not in result.output


def test_a_target_with_no_methods_is_bad_input() -> None:
    result = run("conform", "-t", f"python:{ME}:NoMethods", "-n", "2")
    assert result.exit_code == BAD_INPUT, result.output
    assert "none of the pool methods" in one_line_error(result)


def test_a_command_that_answers_nothing_useful_is_bad_input(tmp_path: Path) -> None:
    script = tmp_path / "liar.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    print(json.dumps({'id': r['id'], 'result': "
        "{'protocol': 'kvpool-jsonl/1', 'capabilities': []}, 'fired': []}), flush=True)\n"
    )
    result = run("conform", "-t", f"cmd:{sys.executable} {script}", "-n", "2")
    assert result.exit_code == BAD_INPUT, result.output
    assert "declares none of the pool methods" in one_line_error(result)


@pytest.mark.parametrize("where", ["missing-folder/report.json", "a-folder"])
def test_an_unwritable_json_path_is_refused_before_the_run(tmp_path: Path, where: str) -> None:
    (tmp_path / "a-folder").mkdir()
    result = run("conform", "-t", "reference", "-n", "2", "--json", str(tmp_path / where))
    assert result.exit_code == BAD_INPUT, result.output
    assert "--json" in result.stderr and "Traceback" not in result.output
    assert "kvpool conform" not in result.stdout  # refused before any search


def test_an_unwritable_save_trace_folder_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("")
    result = run("conform", "-t", "reference", "-n", "2", "--save-trace", str(afile / "sub"))
    assert result.exit_code == BAD_INPUT, result.output
    assert "--save-trace" in one_line_error(result)


def test_a_write_that_fails_after_the_run_is_bad_input_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Path, *a: Any, **k: Any) -> int:
        raise PermissionError(13, "Permission denied")

    out = tmp_path / "report.json"
    monkeypatch.setattr(Path, "write_text", refuse)
    result = run("conform", "-t", "reference", "-n", "2", "--json", str(out))
    assert result.exit_code == BAD_INPUT, result.output
    assert "cannot write it" in one_line_error(result)


def test_play_scripts(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("get 2\nfree 1 2\n# a comment\n\nnew 4 nocache\n")
    assert run("play", "--script", str(good)).exit_code == CONFORMS
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("get 2\nthis is not a command\n")
    result = run("play", "--script", str(garbage))
    assert result.exit_code == BAD_INPUT, result.output
    assert ":2:" in one_line_error(result)
    assert "> get 2" not in result.stdout  # nothing ran
    assert run("play", "--script", str(tmp_path / "missing.txt")).exit_code == BAD_INPUT
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00get 1")
    assert run("play", "--script", str(binary)).exit_code == BAD_INPUT


# -- 1: findings --------------------------------------------------------------------------------


def test_a_target_that_raises_while_built_is_a_finding_with_its_traceback() -> None:
    result = run("conform", "-t", f"python:{ME}:BrokenInit", "-n", "2")
    assert result.exit_code == VIOLATION, result.output
    assert "this pool cannot be built" in result.stderr
    assert "Traceback" in result.stderr  # the target's own
    assert result.stderr.strip().splitlines()[-1].startswith("kvpool: VIOLATION: target crashed")


@pytest.mark.parametrize("level", ["safety", "exact", "robust"])
def test_a_python_target_that_hangs_is_shrunk_and_reported_as_target_hung(
    tmp_path: Path, level: str
) -> None:
    """At every level: the headline, the minimal trace ending at the call that hangs, and a
    replay of the saved trace that hangs at the same call."""
    report = tmp_path / "report.json"
    saved = tmp_path / "traces"
    target = f"python:{ME}:HangOnThree"
    result = run(
        "conform",
        "-t",
        target,
        "--level",
        level,
        "--call-timeout",
        "0.1",
        "-n",
        "100",
        "--steps",
        "6",
        "--max-blocks",
        "5",
        "--max-pools",
        "1",
        "--json",
        str(report),
        "--save-trace",
        str(saved),
    )
    assert result.exit_code == VIOLATION, result.output
    assert "VIOLATION of target hung" in result.stdout
    data = json.loads(report.read_text())
    assert data["violated"] == "target hung", data["message"]
    assert data["message"].startswith("target hung: GetNewBlocks(n=3")
    calls = [s["call"] for s in data["trace"]["steps"] if "call" in s]
    assert calls[-1]["op"] == "GetNewBlocks" and calls[-1]["n"] == 3, calls
    assert len(calls) <= 2, calls  # shrunk: at most a call before the one that hangs
    (trace,) = saved.iterdir()
    again = run("replay", str(trace), "-t", target, "--call-timeout", "0.1")
    assert again.exit_code == VIOLATION, again.output
    assert "target hung" in again.output


def test_a_hang_no_signal_reaches_ends_the_oracle_as_a_finding() -> None:
    here = Path(__file__).resolve().parent
    args = ["conform", "-t", f"python:{ME}:HangDeaf", "--call-timeout", "0.3", "-n", "50"]
    done = subprocess.run(
        [sys.executable, "-m", "kvpool.oracle.cli", *args, "--max-pools", "1"],
        cwd=here,
        env={**os.environ, "PYTHONPATH": str(here)},
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard for the suite, not a measurement
    )
    assert done.returncode == VIOLATION, done.stdout + done.stderr
    assert "could not be interrupted" in done.stderr.strip().splitlines()[-1]


# -- 3: the oracle's own errors -----------------------------------------------------------------


def test_an_exception_inside_the_oracle_is_exit_3_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*a: Any, **k: Any) -> Any:
        raise ZeroDivisionError("a bug in kvpool")

    monkeypatch.setattr(cli, "conform", broken)
    result = run("conform", "-t", "reference", "-n", "2")
    assert result.exit_code == ORACLE_ERROR, result.output
    assert "Traceback" in result.stderr and "ZeroDivisionError: a bug in kvpool" in result.stderr
    assert "internal error of the oracle" in result.stderr


def test_conforms_is_0() -> None:
    assert run("conform", "-t", "reference", "-n", "3", "--steps", "5").exit_code == CONFORMS
    assert run("--help").exit_code == CONFORMS


def test_soak_on_a_python_target_that_hangs_is_a_finding_not_a_hang() -> None:
    result = run(
        "soak",
        "-t",
        f"python:{ME}:HangOnThree",
        "--call-timeout",
        "0.2",
        "--ops",
        "3000",
        "--blocks",
        "200",
    )
    assert result.exit_code == VIOLATION, result.output
    assert "hung" in result.output, result.output


def test_a_module_in_the_current_directory_gets_a_pythonpath_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The console script's sys.path holds its own directory, not the user's: a fork in
    # the current directory is not importable, and the one-line error says what to do.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hint_fork_not_on_path.py").write_text("class Pool: pass\n")
    result = run("conform", "-t", "python:hint_fork_not_on_path:Pool")
    assert result.exit_code == BAD_INPUT, result.output
    assert "PYTHONPATH=." in one_line_error(result)
    # Elsewhere the hint says where a module is looked for, without the cwd claim.
    result = run("conform", "-t", "python:no_such_module_anywhere:Pool")
    line = one_line_error(result)
    assert "current directory" not in line and "PYTHONPATH" in line
