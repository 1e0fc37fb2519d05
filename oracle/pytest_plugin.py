"""One line in a user's test suite checks their pool: ``kvpool.oracle.check(MyPool)``.

``check(target, level="exact")`` runs the conformance search and raises
:class:`NonConformance` (an ``AssertionError``, so pytest shows it as a failure) with
the minimal trace when the target parts from the spec. ``target`` is a class or
factory with vLLM's ``BlockPool`` API, or any target string ``kvpool conform`` takes.

As a pytest plugin (``pytest -p kvpool.oracle.pytest_plugin --kvpool-target T``) it
adds the ``kvpool_target`` fixture, the :class:`~kvpool.oracle.target_base.Target` named on
the command line, and the ``kvpool_check`` fixture, ``check`` bound to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .conformance import Report, conform
from .target_base import Target
from .targets import as_target, resolve
from .tracereplay import replay


class NonConformance(AssertionError):
    """The target parted from the spec; ``report`` has the rule and the minimal trace."""

    def __init__(self, report: Report, text: str) -> None:
        super().__init__(text)
        self.report = report


def check(
    target: Any, level: str = "exact", examples: int = 200, seed: int | None = None, **options: Any
) -> Report:
    """Fail (``NonConformance``) unless ``target`` conforms at ``level``; return the report."""
    __tracebackhide__ = True  # pytest shows the user's call and our message, not our frames
    t = as_target(target)
    report = conform(t, level, examples, seed, **options)
    if not report.conforms:
        lines = [
            f"{t.name} does not conform at {level}: {report.rule}",
            report.message.split("\n--- trace ---")[0],
        ]
        if report.trace is not None:
            result = replay(report.trace, t, level, stop=False)
            for i, s in enumerate(result.steps, 1):
                if s.call is None:
                    lines.append(f"{i:3d}. {s.note}")
                else:
                    same = "same" if s.observed == s.expected else repr(s.observed)
                    lines.append(f"{i:3d}. {s.call!r} -> spec {s.expected!r} | target {same}")
        raise NonConformance(report, "\n".join(lines))
    return report


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--kvpool-target",
        default=None,
        help="a kvpool target (reference, vllm, python:module:Name, cmd:...)",
    )
    parser.addoption("--kvpool-level", default="exact", help="safety | exact | robust")


try:
    import pytest

    @pytest.fixture
    def kvpool_target(request: Any) -> Target:
        name = request.config.getoption("--kvpool-target")
        if not name:
            pytest.skip("no --kvpool-target given")
        return resolve(name)

    @pytest.fixture
    def kvpool_check(request: Any, kvpool_target: Target) -> Callable[..., Report]:
        level = request.config.getoption("--kvpool-level")

        def run(**options: Any) -> Report:
            return check(kvpool_target, options.pop("level", level), **options)

        return run

except ImportError:  # pragma: no cover - pytest is optional at runtime
    pass


__all__ = ["NonConformance", "as_target", "check"]
