"""What every ``kvpool`` subcommand's exit code means, and the exceptions behind them.

This module sits at the bottom of the oracle's layers: it imports nothing of kvpool, so
every other layer (targets, driver, search, reports, CLI) can raise or catch these.

====  ==============  =====================================================================
code  name            meaning
====  ==============  =====================================================================
0     CONFORMS        the check ran and found nothing (a conforming target, a clean file)
1     VIOLATION       a finding: the target broke the contract (including a target that
                      crashed or hung), with the shortest trace that shows it
2     BAD_INPUT       the command line or an input file is wrong: usage, an unknown target,
                      a file that is unreadable, malformed, or over a limit; one line, no
                      traceback
3     ORACLE_ERROR    the oracle itself failed: a bug in kvpool, reported with its traceback
====  ==============  =====================================================================
"""

from __future__ import annotations

import traceback as _tb

CONFORMS = 0
VIOLATION = 1
BAD_INPUT = 2
ORACLE_ERROR = 3


class BadInput(Exception):
    """The user's input (an option, a target name, a file) cannot be used; exit 2.

    ``str(err)`` is the one line the CLI prints.
    """


class TargetHung(Exception):
    """A call into the target did not return within its per-call timeout.

    Raised by a target (``cmd:``, ``python:``) in place of the call's result; the search
    treats it as a finding ("target hung") and shrinks it like any other.
    """

    def __init__(self, call: str, timeout: float) -> None:
        super().__init__(f"{call} did not return within {timeout:g} s")
        self.call = call
        self.timeout = timeout


class TargetCrashed(Exception):
    """The target raised something that is no pool error (or could not be read).

    Raised by the driver and the state readers in place of the target's own exception,
    so that the search tells a target's crash (a finding, exit 1) from a crash of the
    oracle's own code (exit 3). ``where`` says what the oracle was doing, ``traceback``
    is the target's traceback, shown under the finding.
    """

    def __init__(self, where: str, exc: BaseException) -> None:
        super().__init__(f"{where} raised {type(exc).__name__}: {exc}")
        self.where = where
        self.original = exc
        self.traceback = "".join(_tb.format_exception(type(exc), exc, exc.__traceback__)).rstrip()


INTERRUPTED = 130
"""Interrupted by Ctrl-C (SIGINT) or SIGTERM, after every child process group is ended
(the shell's convention, 128 + SIGINT)."""
