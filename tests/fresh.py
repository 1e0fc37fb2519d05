"""Python code run in a fresh interpreter, for the tests whose answer must not depend on
what the pytest worker built before (z3's search on quantified formulas can: docs/06-z3.md,
"One obligation, one answer, in any process")."""

from __future__ import annotations

import subprocess
import sys


def in_a_fresh_interpreter(code: str, *args: str, timeout: float = 600) -> str:
    """``code`` run by ``python -c`` with ``args`` as ``sys.argv[1:]``; its standard output.
    A child that fails raises with its standard error (the traceback) in the message."""
    child = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )
    if child.returncode != 0:
        raise AssertionError(f"the child exited {child.returncode}:\n{child.stderr}")
    return child.stdout
