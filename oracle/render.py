"""Pictures of the pool, drawn from the executable spec: text for terminals, SVG for the docs.

Nothing here is drawn by hand. Every "before/after" picture is made by running a
short trace on :class:`~kvpool.spec.World` and drawing the states it passes
through; the block life-cycle diagram is found by exploring every reachable state
of a small pool and recording which operations move a block from one class to
another. ``python -m kvpool.oracle.render DIR`` (what ``make docs`` runs) writes
them all.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import (
    CacheBlocks,
    EvictBlocks,
    FreeBlocks,
    GetNewBlocks,
    Op,
    ResetPrefixCache,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import PoolState, World

# -- text -------------------------------------------------------------------------------


def block_label(ps: PoolState, b: int) -> str:
    """``3``, ``3:a`` (holds key a), ``3*`` (has a pending watcher), ``3:a*``."""
    key = ps.key[b]
    return f"{b}{'' if key is None else ':' + str(key)}{'*' if b in ps.pending else ''}"


def text_queue(ps: PoolState) -> str:
    """The free queue as one line, front (next handed out) on the left."""
    inner = " <-> ".join(block_label(ps, b) for b in ps.free)
    return f"HEAD <-> {inner} <-> TAIL" if inner else "HEAD <-> TAIL"


def text_in_use(ps: PoolState) -> str:
    """The blocks in use with their reference counts: ``2x1 5:a x2``."""
    parts = [
        f"{block_label(ps, b)} x{ps.ref[b]}"
        for b in range(1, ps.num_blocks)
        if ps.ref[b] > 0 or b not in ps.free
    ]
    return "  ".join(parts) if parts else "(none)"


def text_pool(ps: PoolState) -> str:
    """Queue and in-use blocks, two lines."""
    return f"free:   {text_queue(ps)}\nin use: {text_in_use(ps)}"


# -- scenarios: one per kind of operation -------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A setup trace, then the operation the picture is about."""

    name: str
    title: str
    setup: tuple[Op, ...]
    op: Op
    caption: str
    num_blocks: int = 7

    def states(self) -> tuple[PoolState, PoolState, World]:
        """The pool before and after :attr:`op` (setup must succeed; the op may be refused)."""
        world = World.single(self.num_blocks, caching=True, events=True)
        for setup_op in self.setup:
            outcome = world.apply(setup_op)
            if not outcome.ok:
                raise ValueError(f"scenario {self.name}: setup {setup_op} refused: {outcome}")
        before = world.pools[0].copy()
        world.apply(self.op)
        return before, world.pools[0].copy(), world


_SETUP_MIXED: tuple[Op, ...] = (
    GetNewBlocks(4),  # blocks 1 2 3 4 in use
    CacheBlocks((1, 2), ("a", "b")),
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "get_new_blocks",
        "get_new_blocks(2)",
        (GetNewBlocks(2), CacheBlocks((1,), ("a",)), FreeBlocks((1, 2))),
        GetNewBlocks(2),
        "The first two blocks of the queue are handed out, in queue order, each with "
        "ref_cnt 1. Block 1 held key a: handing it out drops the key.",
    ),
    Scenario(
        "free_blocks",
        "free_blocks([3, 1, 4, 2])",
        _SETUP_MIXED,
        FreeBlocks((3, 1, 4, 2)),
        "Blocks without a key (3, 4) go to the FRONT as a group, in list order, so they "
        "are reused first; cached blocks (1:a, 2:b) go to the BACK in list order, so they "
        "stay servable longest.",
    ),
    Scenario(
        "free_blocks_evict_first",
        "free_blocks([3, 1, 4, 2], evict_first=True)",
        _SETUP_MIXED,
        FreeBlocks((3, 1, 4, 2), evict_first=True),
        "With evict_first every block goes to the FRONT, cached or not: the caller says "
        "these contents will not be asked for again.",
    ),
    Scenario(
        "touch",
        "touch([2])",
        (GetNewBlocks(3), CacheBlocks((2,), ("b",)), FreeBlocks((1, 2, 3))),
        Touch((2,)),
        "A cache hit on a free block: touch takes block 2 out of the middle of the queue "
        "(O(1): it knows its neighbours) and gives it ref_cnt 1. It keeps its key.",
    ),
    Scenario(
        "unpin_blocks",
        "unpin_blocks([1, 2], on_reuse=w7)",
        (GetNewBlocks(3), CacheBlocks((1,), ("a",)), Touch((2,))),
        UnpinBlocks((1, 2), 7),
        "unpin releases one reference per entry and leaves watcher 7 on each block. "
        "Block 1 reaches 0 and joins the BACK (with its key); block 2 had ref_cnt 2 and "
        "stays in use. The watcher fires when a block is next handed out.",
    ),
    Scenario(
        "cache_blocks",
        "cache_blocks([1, 2], ['a', 'b'])",
        (GetNewBlocks(3),),
        CacheBlocks((1, 2), ("a", "b")),
        "Caching changes no queue position and no ref count: blocks 1 and 2 now hold keys "
        "a and b, so when they are freed they will go to the BACK.",
    ),
    Scenario(
        "evict_blocks",
        "evict_blocks([2])",
        (GetNewBlocks(3), CacheBlocks((1, 2), ("a", "b")), FreeBlocks((1, 2, 3))),
        EvictBlocks((2,)),
        "evict drops block 2's key; the block stays exactly where it is in the queue.",
    ),
    Scenario(
        "reset_prefix_cache",
        "reset_prefix_cache()",
        (
            GetNewBlocks(2),
            CacheBlocks((1, 2), ("a", "b")),
            UnpinBlocks((1,), 5),
            FreeBlocks((2,)),
        ),
        ResetPrefixCache(),
        "Nothing is in use, so the reset succeeds: every key is dropped and watcher 5 on "
        "block 1 fires. The queue order does not change.",
    ),
)


def scenario(name: str) -> Scenario:
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(name)


# -- SVG ------------------------------------------------------------------------------------

_BOX_W, _BOX_H, _GAP = 62, 40, 24
_FONT = "font-family='DejaVu Sans Mono, Menlo, Consolas, monospace'"
_COLOURS = {
    "free": "#e8f1fb",
    "cached": "#fff2cc",
    "used": "#e2f0d9",
    "changed": "#c00000",
    "sentinel": "#d9d9d9",
}


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _box(x: float, y: float, label: str, sub: str, fill: str, stroke: str, width: int = 1) -> str:
    return (
        f"<rect x='{x}' y='{y}' width='{_BOX_W}' height='{_BOX_H}' rx='5' fill='{fill}' "
        f"stroke='{stroke}' stroke-width='{width}'/>"
        f"<text x='{x + _BOX_W / 2}' y='{y + 17}' text-anchor='middle' font-size='14' "
        f"{_FONT}>{_esc(label)}</text>"
        f"<text x='{x + _BOX_W / 2}' y='{y + 33}' text-anchor='middle' font-size='10' "
        f"{_FONT} fill='#444'>{_esc(sub)}</text>"
    )


def _block_sub(ps: PoolState, b: int) -> str:
    key = ps.key[b]
    watch = "w" + ",".join(map(str, ps.pending[b])) if b in ps.pending else ""
    parts = [f"r{ps.ref[b]}"]
    if key is not None:
        parts.append(f"k={key}")
    if watch:
        parts.append(watch)
    return " ".join(parts)


def _fill(ps: PoolState, b: int) -> str:
    if ps.ref[b] > 0:
        return _COLOURS["used"]
    return _COLOURS["cached"] if ps.key[b] is not None else _COLOURS["free"]


def _changed(before: PoolState, after: PoolState) -> set[int]:
    """Blocks whose ref count, key, watchers or queue neighbours differ."""
    out: set[int] = set()

    def neighbours(ps: PoolState) -> dict[int, tuple[int | None, int | None]]:
        order = list(ps.free)
        return {
            b: (order[i - 1] if i else None, order[i + 1] if i + 1 < len(order) else None)
            for i, b in enumerate(order)
        }

    nb, na = neighbours(before), neighbours(after)
    for b in range(1, before.num_blocks):
        if (
            before.ref[b] != after.ref[b]
            or before.key[b] != after.key[b]
            or before.pending.get(b) != after.pending.get(b)
            or nb.get(b) != na.get(b)
        ):
            out.add(b)
    return out


def _state_rows(ps: PoolState, y: float, highlight: set[int], label: str) -> tuple[list[str], int]:
    """Draw one state at height y; return the SVG parts and the width used."""
    parts = [
        f"<text x='8' y='{y - 8}' font-size='13' font-weight='bold' {_FONT}>{_esc(label)}</text>"
    ]
    x = 8.0
    order = [None, *ps.free, None]
    for i, b in enumerate(order):
        if b is None:
            name = "HEAD" if i == 0 else "TAIL"
            parts.append(_box(x, y, name, "sentinel", _COLOURS["sentinel"], "#777"))
        else:
            hot = b in highlight
            parts.append(
                _box(
                    x,
                    y,
                    str(b),
                    _block_sub(ps, b),
                    _fill(ps, b),
                    _COLOURS["changed"] if hot else "#555",
                    3 if hot else 1,
                )
            )
        if i + 1 < len(order):
            x0, x1, ym = x + _BOX_W, x + _BOX_W + _GAP, y + _BOX_H / 2
            parts.append(
                f"<line x1='{x0 + 2}' y1='{ym - 5}' x2='{x1 - 2}' y2='{ym - 5}' stroke='#333' "
                f"marker-end='url(#arrow)'/>"
                f"<line x1='{x1 - 2}' y1='{ym + 5}' x2='{x0 + 2}' y2='{ym + 5}' stroke='#999' "
                f"marker-end='url(#arrow)'/>"
            )
        x += _BOX_W + _GAP
    width = int(x)
    used = [b for b in range(1, ps.num_blocks) if b not in ps.free]
    y2 = y + _BOX_H + 26
    parts.append(f"<text x='8' y='{y2 + 25}' font-size='11' {_FONT}>in use:</text>")
    x = 70.0
    for b in used:
        hot = b in highlight
        parts.append(
            _box(
                x,
                y2,
                str(b),
                _block_sub(ps, b),
                _fill(ps, b),
                _COLOURS["changed"] if hot else "#555",
                3 if hot else 1,
            )
        )
        x += _BOX_W + 10
    if not used:
        parts.append(f"<text x='{x}' y='{y2 + 25}' font-size='11' {_FONT}>(none)</text>")
    return parts, max(width, int(x))


_DEFS = (
    "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='6' "
    "markerHeight='6' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' "
    "fill='context-stroke'/></marker></defs>"
)


def svg_before_after(before: PoolState, after: PoolState, title: str) -> str:
    """One figure: the pool before and after an operation; changed blocks outlined in red."""
    hot = _changed(before, after)
    top, top_w = _state_rows(before, 52, set(), "before")
    bottom, bottom_w = _state_rows(after, 52 + 150, hot, f"after {title}")
    width = max(top_w, bottom_w, 560) + 10
    height = 52 + 150 + 160
    legend = (
        f"<text x='8' y='{height - 22}' font-size='10' {_FONT} fill='#444'>"
        "r = ref_cnt, k = cache key, w = pending watchers (ids)</text>"
        f"<text x='8' y='{height - 8}' font-size='10' {_FONT} fill='#444'>"
        "blue free, yellow free and cached, green in use; red outline: its state or "
        "its links changed</text>"
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}'>{_DEFS}"
        f"<rect width='100%' height='100%' fill='white'/>"
        f"<text x='8' y='22' font-size='15' font-weight='bold' {_FONT}>{_esc(title)}</text>"
        f"{''.join(top)}{''.join(bottom)}{legend}</svg>\n"
    )


# -- the block life cycle, found by exploring the spec ------------------------------------

LIFECYCLE_STATES: tuple[str, ...] = ("free", "free+cached", "in use", "in use+cached")
"""The classes of a non-null block: is it referenced, does it hold a key."""


def block_class(ps: PoolState, b: int) -> str:
    used = ps.ref[b] > 0
    cached = ps.key[b] is not None
    return LIFECYCLE_STATES[2 * used + cached]


def _explore_ops(num_blocks: int) -> list[Op]:
    blocks = list(range(1, num_blocks))
    ops: list[Op] = [GetNewBlocks(1), ResetPrefixCache()]
    for b in blocks:
        ops += [
            FreeBlocks((b,)),
            FreeBlocks((b,), evict_first=True),
            Touch((b,)),
            UnpinBlocks((b,), 1),
            CacheBlocks((b,), (f"k{b}",)),
            EvictBlocks((b,)),
        ]
    return ops


def _op_name(op: Op) -> str:
    from .driver import CALLS

    name = CALLS[type(op)][0]
    if isinstance(op, FreeBlocks) and op.evict_first:
        name = "free_blocks(evict_first)"
    return name


def lifecycle(num_blocks: int = 3, max_states: int = 5000) -> dict[tuple[str, str], set[str]]:
    """Every (class before, class after) -> operations that move some block that way.

    Breadth-first over every state of a pool of ``num_blocks`` blocks reachable by
    the operations of :func:`_explore_ops` (ref counts capped at 2); each successful
    operation contributes an edge for each block whose class it changes. Every
    state visited is checked against every invariant.
    """
    start = World.single(num_blocks, caching=True, events=True)
    seen = {start.pools[0].snapshot()}
    frontier = [start]
    edges: dict[tuple[str, str], set[str]] = {}
    ops = _explore_ops(num_blocks)
    while frontier and len(seen) < max_states:
        nxt: list[World] = []
        for world in frontier:
            for op in ops:
                after = world.copy()
                outcome = after.apply(op)
                ps0, ps1 = world.pools[0], after.pools[0]
                if not outcome.ok or max(ps1.ref) > 2:
                    continue
                violations = check_pool(ps1)
                if violations:
                    raise AssertionError(f"the spec broke {violations[0]} after {op}")
                for b in range(1, num_blocks):
                    c0, c1 = block_class(ps0, b), block_class(ps1, b)
                    if c0 != c1:
                        edges.setdefault((c0, c1), set()).add(_op_name(op))
                # Forget history (the event log, the watcher counters) so that states
                # differ only in what matters here, and the search ends.
                ps1.log.clear()
                ps1.registered -= ps1.fired
                ps1.fired = 0
                snap = ps1.snapshot()
                if snap not in seen:
                    seen.add(snap)
                    nxt.append(after)
        frontier = nxt
    return edges


def text_lifecycle(edges: dict[tuple[str, str], set[str]]) -> str:
    """The life cycle as lines ``from -> to: op, op``, sorted."""
    order = {s: i for i, s in enumerate(LIFECYCLE_STATES)}
    lines = []
    for (a, b), ops in sorted(edges.items(), key=lambda e: (order[e[0][0]], order[e[0][1]])):
        lines.append(f"{a:>13} -> {b:<13}  {', '.join(sorted(ops))}")
    return "\n".join(lines)


_POS = {
    "free": (150, 110),
    "free+cached": (150, 400),
    "in use": (610, 110),
    "in use+cached": (610, 400),
}


def svg_lifecycle(edges: dict[tuple[str, str], set[str]]) -> str:
    """The life-cycle diagram: four classes, an arrow per edge found, labelled by operation."""
    w, h = 150, 54
    parts: list[str] = []
    for name, (cx, cy) in _POS.items():
        fill = {
            "free": _COLOURS["free"],
            "free+cached": _COLOURS["cached"],
            "in use": _COLOURS["used"],
            "in use+cached": "#d5e8d4",
        }[name]
        parts.append(
            f"<rect x='{cx - w / 2}' y='{cy - h / 2}' width='{w}' height='{h}' rx='12' "
            f"fill='{fill}' stroke='#333' stroke-width='1.5'/>"
            f"<text x='{cx}' y='{cy + 5}' text-anchor='middle' font-size='15' {_FONT}>"
            f"{_esc(name)}</text>"
        )
    for (a, b), ops in sorted(edges.items()):
        (x0, y0), (x1, y1) = _POS[a], _POS[b]
        back = (b, a) in edges
        # Offset the two directions of a pair so they do not overlap.
        dx, dy = x1 - x0, y1 - y0
        length = (dx * dx + dy * dy) ** 0.5
        nx, ny = -dy / length, dx / length
        off = 14 if back else 0

        # Leave the boxes: clip the segment at the box borders.
        def clip(x: float, y: float, tx: float, ty: float) -> tuple[float, float]:
            ddx, ddy = tx - x, ty - y
            tx_ = (w / 2 + 6) / abs(ddx) if ddx else float("inf")
            ty_ = (h / 2 + 6) / abs(ddy) if ddy else float("inf")
            t = min(tx_, ty_)
            return x + ddx * t, y + ddy * t

        sx, sy = clip(x0 + nx * off, y0 + ny * off, x1 + nx * off, y1 + ny * off)
        ex, ey = clip(x1 + nx * off, y1 + ny * off, x0 + nx * off, y0 + ny * off)
        parts.append(
            f"<line x1='{sx:.1f}' y1='{sy:.1f}' x2='{ex:.1f}' y2='{ey:.1f}' stroke='#333' "
            f"stroke-width='1.3' marker-end='url(#arrow)'/>"
        )
        mx, my = (sx + ex) / 2 + nx * 16, (sy + ey) / 2 + ny * 16
        anchor = "middle"
        if abs(dx) < 1:  # vertical edge: put the text beside it, on its own side
            anchor = "end" if nx < 0 else "start"
            mx = (sx + ex) / 2 + nx * 8
        label = sorted(ops)
        for i, text in enumerate(label):
            parts.append(
                f"<text x='{mx:.1f}' y='{my + 12 * (i - (len(label) - 1) / 2):.1f}' "
                f"text-anchor='{anchor}' font-size='10.5' {_FONT} fill='#1f3864'>"
                f"{_esc(text)}</text>"
            )
    width, height = 800, 520
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}'>{_DEFS}<rect width='100%' height='100%' fill='white'/>"
        f"<text x='10' y='22' font-size='15' font-weight='bold' {_FONT}>"
        "A block's life cycle (found by exploring the spec)</text>"
        f"{''.join(parts)}"
        f"<text x='10' y='{height - 10}' font-size='10' {_FONT} fill='#444'>"
        "The null block (0) takes no part: it never leaves its own state.</text></svg>\n"
    )


# -- writing everything -----------------------------------------------------------------------


def figures() -> dict[str, str]:
    """File name -> contents of every generated figure."""
    out: dict[str, str] = {}
    for s in SCENARIOS:
        before, after, _ = s.states()
        out[f"op_{s.name}.svg"] = svg_before_after(before, after, s.title)
    out["lifecycle.svg"] = svg_lifecycle(lifecycle())
    return out


def write_figures(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in figures().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kvpool.oracle.render", description="Write the docs' figures."
    )
    parser.add_argument("directory", type=Path, help="where to write the SVG files")
    args = parser.parse_args(argv)
    for path in write_figures(args.directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
