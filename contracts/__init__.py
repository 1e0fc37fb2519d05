"""kvpool.contracts -- PEP 316 contracts on the pool and the spec, checked by CrossHair.

The contracts themselves live in the docstrings of ``kvpool.impl`` and
``kvpool.spec``; this package holds what checks them: :mod:`.runtime` (opt-in
run-time checking), :mod:`.harness` (symbolic-friendly entry points into the real
code), :mod:`.model` (an integer-indexed model of the same code paths) and
:mod:`.runner` (``make contracts``, and :func:`run` for ``make verify``).
"""

from __future__ import annotations

from .runner import ContractResult, run

__all__ = ["ContractResult", "run"]
