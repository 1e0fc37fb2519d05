"""Run the same hand-written scenario on the spec and on the implementation.

A test that takes the ``backend`` fixture runs twice: once on the executable
spec, once on kvpool.impl through the oracle's Driver. Both report outcomes in
spec terms and their state as a spec ``PoolState``, so one assertion checks both,
and :meth:`Backend.agree` checks that they agree with each other.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvpool.impl import BlockPool, abstract
from kvpool.oracle import Driver
from kvpool.spec import Op, Outcome, PoolState, World


class Backend:
    """One pool world, run either on the spec or on the implementation."""

    def __init__(self, kind: str, *pools: tuple[int, bool, bool]) -> None:
        self.kind = kind
        configs = list(pools) or [(8, True, True)]
        self.world = World.of(*(PoolState.initial(n, c, e) for n, c, e in configs))
        self.driver: Driver | None = None
        if kind == "impl":
            self.driver = Driver(BlockPool, configs)

    def do(self, op: Op) -> Outcome:
        if self.driver is None:
            return self.world.apply(op)
        return self.driver.execute(op)

    def run(self, ops: Iterable[Op]) -> list[Outcome]:
        return [self.do(op) for op in ops]

    def state(self, pool: int = 0) -> PoolState:
        if self.driver is None:
            return self.world.pools[pool]
        return abstract(self.driver.pool(pool))

    def free(self, pool: int = 0) -> list[int]:
        return list(self.state(pool).free)


def lockstep(configs: list[tuple[int, bool, bool]], ops: Iterable[Op]) -> list[Outcome]:
    """Run ``ops`` on both backends; fail at the first step where they differ in any way."""
    spec = Backend("spec", *configs)
    impl = Backend("impl", *configs)
    outcomes = []
    for i, op in enumerate(ops):
        expected, observed = spec.do(op), impl.do(op)
        assert expected == observed, f"step {i} {op}: spec {expected} but impl {observed}"
        for p in range(len(configs)):
            if spec.world.alive[p]:
                assert spec.state(p).snapshot() == impl.state(p).snapshot(), f"step {i} {op}"
        outcomes.append(expected)
    return outcomes
