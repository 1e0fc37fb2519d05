"""The conformance matrix: one level (or several) over a range of vLLM releases.

``kvpool matrix --from 0.8.0 --to latest --level safety`` lists the releases on the
registry (``pip index versions vllm``), loads each one's two pool files (downloading the
wheel once and keeping only those two files, see :func:`~.vllm_target.fetch_sources`),
runs ``kvpool conform`` at each level, and writes a page: release by level, each finding
with its minimal trace. A release that exists but cannot be loaded is a row that says
so; a release the registry does not have is bad input (exit 2).

It also rewrites the per-release section of the errata page (between the markers
``<!-- matrix:begin -->`` and ``<!-- matrix:end -->``), grouping consecutive releases
with the same findings. None of this runs in ``make test``: it downloads wheels.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from .conformance import conform
from .exits import BadInput
from .targets import resolve
from .traceformat import LEVELS
from .tracereplay import replay
from .vllm_target import VllmUnavailable, load_vllm, probe_api

_CALL = re.compile(r"^[! ] \d+\. ")
BEGIN, END = "<!-- matrix:begin -->", "<!-- matrix:end -->"


def registry_releases() -> list[str]:
    """Every vLLM release on the registry, oldest first (one ``pip index`` call)."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", "vllm"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    match = re.search(r"Available versions:\s*(.+)", done.stdout)
    if done.returncode != 0 or match is None:
        raise VllmUnavailable(f"pip index versions vllm failed: {done.stderr[-500:]}")
    return sorted((v.strip() for v in match.group(1).split(",")), key=Version)


def select(available: list[str], first: str, last: str) -> list[str]:
    """The releases from ``first`` to ``last`` (``latest``: the newest), both on the registry."""
    if last == "latest":
        last = available[-1]
    for v in (first, last):
        if v not in available:
            raise BadInput(f"no vLLM release {v!r} on the registry")
    try:
        lo, hi = Version(first), Version(last)
    except InvalidVersion as exc:
        raise BadInput(str(exc)) from exc
    if lo > hi:
        raise BadInput(f"--from {first} is newer than --to {last}")
    return [v for v in available if lo <= Version(v) <= hi]


@dataclass
class Cell:
    """One release at one level."""

    level: str
    conforms: bool | None  # None: not run (the release did not load)
    rule: str | None = None
    message: str = ""
    trace: list[str] = field(default_factory=list)
    """The minimal trace, a line per call (``!`` marks the one that diverges)."""
    replays: bool = True
    """Whether the saved minimal trace still diverges on replay."""
    seconds: float = 0.0

    def short(self) -> str:
        if self.conforms is None:
            return "-"
        if self.conforms:
            return "conforms"
        calls = sum(1 for line in self.trace if _CALL.match(line))
        return f"{self.rule} ({calls} calls)"


@dataclass
class Row:
    release: str
    loaded: bool
    error: str = ""
    api: str = ""
    skipped: list[str] = field(default_factory=list)
    cells: dict[str, Cell] = field(default_factory=dict)


def _trace_lines(saved: Any, name: str, level: str) -> tuple[list[str], bool]:
    result = replay(saved, resolve(name), level, stop=False)
    bad = result.divergence.step if result.divergence else -1
    pools = ", ".join(
        f"p{i} N={n} caching={c} events={e}" for i, (n, c, e) in enumerate(saved.pools)
    )
    lines = [f"  pools: {pools}"]
    for i, step in enumerate(result.steps, 1):
        text = step.note if step.call is None else repr(step.call)
        lines.append(f"{'!' if i == bad else ' '} {i}. {text}")
        lines.extend(f"      from a watcher: {op!r}" for op, _, _ in step.nested)
    return lines, result.divergence is not None


def run_release(
    release: str,
    levels: Iterable[str],
    examples: int,
    seed: int | None,
    steps: int,
    max_pools: int,
) -> Row:
    """Load one release and run each level on it; a load failure is a row, not an error."""
    try:
        module = load_vllm(release)
        target = resolve(f"vllm=={release}")
    except VllmUnavailable as exc:
        return Row(release, False, error=str(exc).splitlines()[0][:300])
    row = Row(release, True, api=probe_api(module.BlockPool).describe(), skipped=target.skipped)
    for level in levels:
        rep = conform(target, level, examples, seed, steps, max_pools=max_pools)
        cell = Cell(level, rep.conforms, rep.rule, rep.message.split("\n--- trace ---")[0])
        cell.seconds = rep.seconds
        if rep.trace is not None:
            cell.trace, cell.replays = _trace_lines(rep.trace, target.name, level)
        row.cells[level] = cell
    return row


def run_matrix(
    releases: list[str],
    levels: list[str],
    examples: int,
    seed: int | None = None,
    steps: int = 30,
    max_pools: int = 3,
    progress: Callable[[Row], None] | None = None,
) -> list[Row]:
    for level in levels:
        if level not in LEVELS:
            raise BadInput(f"level must be one of {LEVELS}, got {level!r}")
    rows = []
    for release in releases:
        row = run_release(release, levels, examples, seed, steps, max_pools)
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


# -- the pages -------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_matrix(rows: list[Row], levels: list[str], command: str, seconds: float) -> str:
    loaded = [r for r in rows if r.loaded]
    out = [
        "# The conformance matrix: every vLLM release",
        "",
        "Generated by `kvpool matrix` (do not edit by hand); re-run it to refresh:",
        "",
        f"    {command}",
        "",
        f"{len(rows)} releases, {len(loaded)} loaded; levels {', '.join(levels)}; "
        f"{seconds:.0f} s on {datetime.date.today().isoformat()}. Each search is "
        "derandomized unless a seed is given, stops at its first finding and shrinks it; "
        "a release that conforms here conforms on *that* many examples, no more. Which "
        "operations a release has (and so which the oracle tests) is probed on its class: "
        "the `API` column.",
        "",
    ]
    for level in levels:
        bad = [r for r in loaded if not r.cells[level].conforms]
        rules: dict[str, int] = {}
        for r in bad:
            rule = r.cells[level].rule or "?"
            rules[rule] = rules.get(rule, 0) + 1
        found = ", ".join(f"{k} x{n}" for k, n in sorted(rules.items())) or "nothing"
        out.append(
            f"- `{level}`: {len(loaded) - len(bad)} of {len(loaded)} conform; found {found}."
        )
    out += ["", "| release | API | " + " | ".join(levels) + " |"]
    out.append("| --- | --- | " + " | ".join("---" for _ in levels) + " |")
    for r in rows:
        if not r.loaded:
            out.append(
                f"| {r.release} | cannot load: {_md(r.error)} | "
                + " | ".join("-" for _ in levels)
                + " |"
            )
            continue
        cells = []
        for level in levels:
            c = r.cells[level]
            text = c.short()
            if not c.conforms:
                text = f"[{text}](#{_anchor(r.release, level)})"
            cells.append(text)
        out.append(f"| {r.release} | {r.api} | " + " | ".join(cells) + " |")
    out += ["", "## The findings", ""]
    for r in rows:
        for level in levels:
            cell = r.cells.get(level)
            if cell is None or cell.conforms is not False:
                continue
            out += [f"### vLLM {r.release} at {level}: {cell.rule}", ""]
            out += [f'<a id="{_anchor(r.release, level)}"></a>', ""]
            out += [f"{_md(cell.message)}", ""]
            if not cell.replays:
                out += ["(The saved trace does not diverge on `kvpool replay`.)", ""]
            out += ["Minimal trace (`!` marks the call that diverges):", ""]
            out += [f"    {line}" for line in cell.trace] or ["    (no trace)"]
            out += [""]
    return "\n".join(out).rstrip() + "\n"


def _anchor(release: str, level: str) -> str:
    return "m-" + release.replace(".", "-") + "-" + level


_FIELD = re.compile(r"^state differs: pool \d+: ([a-z _-]+):")


def kind(cell: Cell) -> str:
    """A finding's rule, with the state field for ``state differs`` (what groups rows)."""
    if cell.conforms:
        return "conforms"
    m = _FIELD.match(cell.message)
    return f"{cell.rule} ({m.group(1)})" if m else str(cell.rule)


def _signature(r: Row, levels: list[str]) -> tuple[Any, ...]:
    if not r.loaded:
        return ("cannot load",)
    return tuple((lv, kind(r.cells[lv])) for lv in levels)


def render_errata(rows: list[Row], levels: list[str]) -> str:
    """The per-release errata: consecutive releases with the same findings share a line."""
    groups: list[list[Row]] = []
    for r in rows:
        if groups and _signature(groups[-1][-1], levels) == _signature(r, levels):
            groups[-1].append(r)
        else:
            groups.append([r])
    out = [
        BEGIN,
        "",
        "| releases | " + " | ".join(levels) + " |",
        "| --- | " + " | ".join("---" for _ in levels) + " |",
    ]
    for g in groups:
        span = g[0].release if len(g) == 1 else f"{g[0].release} to {g[-1].release}"
        first = g[0]
        if not first.loaded:
            out.append(f"| {span} | " + " | ".join("cannot load" for _ in levels) + " |")
            continue
        cells = []
        for lv in levels:
            c = first.cells[lv]
            if c.conforms:
                cells.append("conforms")
            else:
                text = kind(c) + c.short()[len(str(c.rule)) :]
                cells.append(f"[{text}](matrix.md#{_anchor(first.release, lv)})")
        out.append(f"| {span} | " + " | ".join(cells) + " |")
    out += ["", END]
    return "\n".join(out)


def splice(page: str, block: str) -> str:
    """``page`` with the text between the markers replaced (appended if none)."""
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        return head + block + tail
    return page.rstrip() + "\n\n" + block + "\n"


def to_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [
        {
            "release": r.release,
            "loaded": r.loaded,
            "error": r.error,
            "api": r.api,
            "cells": {
                lv: {
                    "conforms": c.conforms,
                    "rule": c.rule,
                    "message": c.message,
                    "trace": c.trace,
                    "replays": c.replays,
                    "seconds": round(c.seconds, 2),
                }
                for lv, c in r.cells.items()
            },
        }
        for r in rows
    ]


def rows_from_json(data: list[dict[str, Any]]) -> list[Row]:
    """The rows a ``--json`` file holds (to re-render the pages without re-running)."""
    rows = []
    for r in data:
        row = Row(r["release"], r["loaded"], r.get("error", ""), r.get("api", ""))
        for lv, c in r.get("cells", {}).items():
            row.cells[lv] = Cell(
                lv, c["conforms"], c["rule"], c["message"], c["trace"], c["replays"], c["seconds"]
            )
        rows.append(row)
    return rows


def write_pages(
    rows: list[Row],
    levels: list[str],
    command: str,
    seconds: float,
    matrix_path: Path,
    errata_path: Path | None,
    json_path: Path | None = None,
) -> None:
    matrix_path.write_text(render_matrix(rows, levels, command, seconds))
    if errata_path is not None:
        page = errata_path.read_text() if errata_path.exists() else ""
        errata_path.write_text(splice(page, render_errata(rows, levels)))
    if json_path is not None:
        json_path.write_text(json.dumps(to_json(rows), indent=1) + "\n")


def timed(fn: Callable[[], list[Row]]) -> tuple[list[Row], float]:
    start = time.perf_counter()
    rows = fn()
    return rows, time.perf_counter() - start
