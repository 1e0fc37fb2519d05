from __future__ import annotations

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
