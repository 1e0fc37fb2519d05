"""The spec's branch coverage during a search: which branches of its operations ran.

:class:`SpecBranches` measures, with the ``coverage`` package's C tracer, the branches of
the spec's operations and events (:data:`SPEC_FILES`) taken by the spec's side of each
call (``World.apply``, through :meth:`SpecBranches.measure`), and
:meth:`SpecBranches.result` says how many of the possible branches were taken and which
were not. ``kvpool conform`` runs its search inside one, so a "conforms" says how much
of the spec's behaviour the search reached (a branch never taken was never compared).

Why ``coverage``: it is already a dependency (the golden vectors measure the same files
with it) and it gives branches (arcs), not only lines. ``sys.monitoring`` would be
cheaper but needs Python 3.12; kvpool supports 3.11. The tracer is switched on only
around the spec's side of each call: over the whole search it doubled the search's time
(every frame Hypothesis runs pays a trace call), around ``World.apply`` alone the cost
is small (measured: ``benchmarks/spec_coverage_overhead.py``, figures in
``docs/oracle.md``; ``--no-spec-coverage`` turns it off).

Only one tracer can run at a time: under a debugger or a coverage run of the oracle
itself, nothing is measured and the result says why (the outer tracer is left alone).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

_R = TypeVar("_R")

SPEC_FILES = ("state.py", "events.py", "vllm_ops.py", "keys.py")
"""The spec modules whose branches are measured: the operations, vLLM's multi-key
operations, their keys, and the events (the golden vectors must cover the same files)."""

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"


def spec_paths() -> list[str]:
    return [str((SPEC_DIR / f).resolve()) for f in SPEC_FILES]


@dataclass
class BranchCoverage:
    """Branches of the spec's operations taken during a run, per file."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    """file name -> (branches taken, possible branches)."""
    missing: dict[str, list[str]] = field(default_factory=dict)
    """file name -> the branches never taken, as ``line->line`` (-N: leaving the function)."""
    unmeasured: str | None = None
    """Why nothing was measured (another tracer was running), else None."""

    @property
    def taken(self) -> int:
        return sum(t for t, _ in self.files.values())

    @property
    def branches(self) -> int:
        return sum(n for _, n in self.files.values())

    def percent(self) -> float:
        return 100.0 * self.taken / self.branches if self.branches else 100.0

    def line(self) -> str:
        if self.unmeasured is not None:
            return f"spec branches: not measured ({self.unmeasured})"
        per = ", ".join(f"{name} {t}/{n}" for name, (t, n) in self.files.items())
        return (
            f"spec branches taken: {self.taken}/{self.branches} ({self.percent():.0f}%; {per}); "
            "--json lists the others"
        )

    def to_json(self) -> dict[str, Any]:
        if self.unmeasured is not None:
            return {"measured": False, "why": self.unmeasured}
        return {
            "measured": True,
            "taken": self.taken,
            "branches": self.branches,
            "percent": round(self.percent(), 1),
            "files": {name: {"taken": t, "branches": n} for name, (t, n) in self.files.items()},
            "not_taken": self.missing,
        }


class SpecBranches:
    """``with SpecBranches() as sb: ... sb.measure(world.apply, op) ...`` then
    ``sb.result()``: the spec's branches taken by the calls made through :meth:`measure`.

    The tracer runs only inside :meth:`measure` (about 11 microseconds to switch it on and
    off per call), not over the whole search: traced throughout, Hypothesis's own code
    pays for every call it makes, and the search ran at half speed.
    """

    def __init__(self, enabled: bool = True) -> None:
        self._cov: Any = None
        self._why: str | None = None if enabled else "turned off (--no-spec-coverage)"
        self._depth = 0

    def __enter__(self) -> SpecBranches:
        # Entered once per search: a run of several searches (robust's two stages,
        # --all) adds them up in one measurement.
        self._depth = 0
        if self._why is not None or self._cov is not None:
            return self
        if sys.gettrace() is not None:
            self._why = "another tracer is running (a debugger, or coverage of the oracle)"
            return self
        try:
            import coverage
        except ImportError:  # a dependency, but an install may lack it: say so, go on
            self._why = "the coverage package is not installed"
            return self

        # config_file=False: no .coveragerc or pyproject.toml of the user's is read (a
        # file never makes the oracle run code, and coverage plugins are code)
        self._cov = coverage.Coverage(
            branch=True, include=spec_paths(), data_file=None, config_file=False
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth = -1  # measure() after the block: not measured

    def measure(self, fn: Callable[..., _R], *args: Any) -> _R:
        """``fn(*args)``, its spec branches recorded (when measuring, and not nested)."""
        if self._cov is None or self._depth != 0:
            return fn(*args)
        self._depth = 1
        self._cov.start()
        try:
            return fn(*args)
        finally:
            self._cov.stop()
            self._depth = 0

    def result(self) -> BranchCoverage:
        if self._cov is None:
            return BranchCoverage(unmeasured=self._why or "the search did not run")
        out = BranchCoverage()
        for path in spec_paths():
            # ``_analyze`` is coverage's own per-file analysis (public API has no branch
            # counts without writing a report file); the vectors' measurement uses it too.
            analysis = self._cov._analyze(path)
            numbers = analysis.numbers
            name = Path(path).name
            out.files[name] = (numbers.n_branches - numbers.n_missing_branches, numbers.n_branches)
            out.missing[name] = [
                f"{line}->{to}"
                for line, tos in sorted(analysis.missing_branch_arcs().items())
                for to in tos
            ]
        return out


__all__ = ["SPEC_FILES", "BranchCoverage", "SpecBranches", "spec_paths"]
