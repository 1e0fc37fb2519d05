"""``python -m pytest -p kvpool.contracts.pytest_plugin``: any suite, contracts checked."""

from __future__ import annotations

from . import runtime

runtime.enable()
