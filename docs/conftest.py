"""Run every code block of the docs as a test (Sybil).

* ```` ```python ```` blocks run in one namespace per page, top to bottom; a block
  that starts with ``>>>`` is a doctest and its printed output must match.
* ```` ```console ```` blocks are shell sessions: each ``$ command`` runs in bash
  from the repository root (with this interpreter's ``bin/`` first on ``PATH``) and
  what it prints must match the lines under it (``...`` matches anything). A
  command must exit 0 unless its expected output ends with ``[exit N]``.
  A command may end in a here-document (``<<'EOF'`` ... ``EOF``).

A block after ``<!-- skip: next if(not HAVE_VLLM, reason=...) -->`` needs vLLM: it is
reported as skipped in ``make test`` and runs in ``make test-vllm`` (docs/10-vllm.md).

Any other fence language is an error (``tests/test_docs_tools.py`` checks), so no
block in docs/ escapes being run.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from pathlib import Path

from sybil import Example, Sybil
from sybil.evaluators.doctest import OutputChecker
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent.parent
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?\s*$")
_EXIT = re.compile(r"^\[exit (\d+)\]$")


def split_session(source: str) -> list[tuple[str, str]]:
    """``$ command`` lines (with any here-document) and the output expected after each."""
    out: list[tuple[str, list[str]]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = [line[2:]]
            match = _HEREDOC.search(line)
            if match:
                i += 1
                while i < len(lines) and lines[i] != match.group(1):
                    command.append(lines[i])
                    i += 1
                command.append(match.group(1))
            out.append(("\n".join(command), []))
        elif out:
            out[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"console block must start with '$ ', got {line!r}")
        i += 1
    return [(cmd, "\n".join(expected)) for cmd, expected in out]


def evaluate_console(example: Example) -> str | None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    checker = OutputChecker()
    for command, expected in split_session(str(example.parsed)):
        want_rc = 0
        want_lines = expected.rstrip("\n").splitlines()
        if want_lines and _EXIT.match(want_lines[-1].strip()):
            want_rc = int(_EXIT.match(want_lines[-1].strip()).group(1))  # type: ignore[union-attr]
            want_lines = want_lines[:-1]
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            # A guard against a hang, not a speed test: CrossHair's example (docs/05)
            # ran past 120 s in a fresh-clone CI at load 10-12 on 2 cores.
            timeout=600,
            stdin=subprocess.DEVNULL if "<<" not in command else None,
        )
        got = proc.stdout + proc.stderr
        want = "\n".join(want_lines) + "\n"
        if proc.returncode != want_rc:
            return f"$ {command}\nexited {proc.returncode}, expected {want_rc}; output:\n{got}"
        if not checker.check_output(want, got, FLAGS):
            return f"$ {command}\nexpected:\n{want}\ngot:\n{got}"
    return None


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=FLAGS),
        CodeBlockParser(language="console", evaluator=evaluate_console),
        SkipParser(),
    ],
    patterns=["*.md"],
).pytest()
