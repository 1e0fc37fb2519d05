from __future__ import annotations

import os

import pytest
from backends import Backend


@pytest.fixture(params=["spec", "impl"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(backend_kind: str):  # type: ignore[no-untyped-def]
    """``make((N, caching, events), ...)`` builds a Backend of the parametrised kind."""

    def build(*pools: tuple[int, bool, bool]) -> Backend:
        return Backend(backend_kind, *pools)

    return build


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``deep`` (tens of CPU seconds each, what make test's 10 minutes cannot
    hold) are skipped, saying so, unless KVPOOL_DEEP=1: ``make test-deep`` runs them."""
    if os.environ.get("KVPOOL_DEEP") == "1":
        return
    skip = pytest.mark.skip(reason="deep: tens of CPU s; make test-deep runs it (KVPOOL_DEEP=1)")
    for item in items:
        if item.get_closest_marker("deep") is not None:
            item.add_marker(skip)
