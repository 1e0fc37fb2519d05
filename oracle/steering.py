"""Steering an ``--all`` search away from the shapes of bad input it has seen fail already.

A search with ``--all`` accepts every difference it has found and searches on. An accepted
difference still ends the comparisons of its example (the target has parted from the spec,
so the rest of the example runs on the spec alone: :func:`.conformance.oracle_machine`).
On a pool that checks none of its arguments, such as vLLM 0.33.0's, almost every invalid
call is such a difference: once the common ones are accepted, most examples stop comparing
at their first invalid call, which is most often one of the common ones again, and a
rare shape (one case of one call, met in a state that only some examples reach) is
starved.

The generators of invalid calls (:meth:`.machine._Lockstep.invalid_call` and the methods
it calls) name each choice that decides the shape of the call they make: the kind of
invalid call, the operation, the case, the bad value. The path of names, with the kind
the spec refuses the call with at its end (:meth:`Steering.note`), is the call's
*shape*. A shape is *spent* once a call of that shape showed a difference the search
already accepts (:meth:`Steering.spend`); a choice is spent when every option seen under
it is spent. Where some options of a choice are spent and some are not, the generator
draws among the fresh ones three times in four (:meth:`Steering.fresh`), so the invalid
calls an example makes first are mostly of shapes that have not yet shown anything.

Nothing here knows any particular finding: the steering learns from the search's own
acceptances, on any target. What it learns during a search is used from the next search
on (:meth:`Steering.freeze`): within one search the draws depend on the choice sequence
alone, as Hypothesis's shrinking and its replay of the failing example need. A search
with nothing accepted (one without ``--all`` or ``--allow``) makes exactly the draws it
made without steering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

Shape = tuple[str, ...]

FRESH_SHARE = 3
"""Out of ``FRESH_SHARE + 1`` draws where a choice has fresh and spent options, how many
draw among the fresh ones only (the rest draw among all, so a spent shape is still made,
and a difference it shows only in another state can still be met)."""


@dataclass
class Steering:
    """Which shapes of invalid call have shown an accepted difference, and what each
    choice offered. ``spent`` and ``children`` are what the current search steers by;
    ``pending_*`` what it learns, used from the next search on."""

    spent: frozenset[Shape] = frozenset()
    children: dict[Shape, frozenset[str]] = field(default_factory=dict)
    pending_spent: set[Shape] = field(default_factory=set)
    pending_children: dict[Shape, set[str]] = field(default_factory=dict)

    def note(self, path: Shape, options: Sequence[str]) -> None:
        """The choice at ``path`` offered ``options`` (learnt for the next search)."""
        self.pending_children.setdefault(path, set()).update(options)

    def spend(self, shape: Shape) -> None:
        """A call of ``shape`` showed a difference the search accepts."""
        if shape:
            self.pending_spent.add(shape)

    def freeze(self) -> None:
        """Start a search: steer by everything learnt so far."""
        self.spent = self.spent | self.pending_spent
        merged = {k: set(v) for k, v in self.children.items()}
        for k, v in self.pending_children.items():
            merged.setdefault(k, set()).update(v)
        self.children = {k: frozenset(v) for k, v in merged.items()}
        self.pending_spent = set()
        self.pending_children = {}

    def is_spent(self, path: Shape) -> bool:
        """Has ``path`` shown an accepted difference, or has every option seen under it?"""
        if path in self.spent:
            return True
        under = self.children.get(path, frozenset())
        return bool(under) and all(self.is_spent((*path, o)) for o in under)

    def fresh(self, path: Shape, options: Sequence[str]) -> list[str] | None:
        """The options at ``path`` not spent, when some are and some are not; else None
        (nothing to steer: draw as without steering)."""
        out = [o for o in options if not self.is_spent((*path, o))]
        return out if 0 < len(out) < len(options) else None


__all__ = ["FRESH_SHARE", "Shape", "Steering"]
