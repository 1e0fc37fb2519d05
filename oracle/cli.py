"""The ``kvpool`` command: check a block pool against the spec.

Exit codes (:mod:`.exits`), the same for every subcommand: 0 the target conforms (or
the vectors/log match), 1 a violation was found (a target that crashed or hung
included), 2 a usage error or a bad input file (one line on stderr), 3 an error of the
oracle itself (with its traceback); 130 when interrupted (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from kvpool import __version__
from kvpool.spec.state import PoolState, TraceError

from .conformance import MAX_FINDINGS, PATIENCE, conform
from .exits import BAD_INPUT, CONFORMS, INTERRUPTED, ORACLE_ERROR, VIOLATION, BadInput
from .files import DEFAULT_LIMITS, LOG_LIMITS, Limits, load_trace
from .machine import format_outcome
from .target_base import CAPABILITIES, TargetBroken, TargetError
from .targets import DEFAULT_CALL_TIMEOUT, TRUSTED, resolve
from .traceformat import LEVELS
from .tracereplay import ReplayResult, replay

console = Console(stderr=False, highlight=False)
_F = TypeVar("_F", bound=Callable[..., Any])


def _target_option(
    help: str = "reference | spec | vllm[==X.Y.Z] | python:module:Name | cmd:COMMAND",
    required: bool = True,
) -> Callable[[_F], _F]:
    """The ``--target/-t`` option every command that runs a pool takes."""
    return click.option("--target", "-t", "target_name", required=required, default=None, help=help)


def _call_timeout_option() -> Callable[[_F], _F]:
    return click.option(
        "--call-timeout",
        type=click.FloatRange(0, min_open=True),
        default=DEFAULT_CALL_TIMEOUT,
        show_default=True,
        help="seconds one call into a python: or cmd: target may take; longer is 'target hung'",
    )


def _limit_options(defaults: Limits = DEFAULT_LIMITS) -> Callable[[_F], _F]:
    """``--max-file-*``: the limits every file input is checked against (:mod:`.files`)."""
    opts = [
        ("--max-file-bytes", "max_bytes", "bytes of an input file"),
        ("--max-file-blocks", "max_blocks", "blocks per pool an input file may ask for"),
        ("--max-file-pools", "max_pools", "pools an input file may ask for"),
        ("--max-file-steps", "max_steps", "steps (trace), records (log), lines (script)"),
        ("--max-file-line", "max_line", "characters in one line of a log or script"),
        ("--max-file-depth", "max_depth", "JSON nesting depth"),
    ]

    def decorate(fn: _F) -> _F:
        for flag, attr, text in reversed(opts):
            fn = click.option(
                flag,
                attr,
                type=click.IntRange(1),
                default=getattr(defaults, attr),
                show_default=True,
                help=text,
            )(fn)
        return fn

    return decorate


def _limits(kw: dict[str, Any]) -> Limits:
    return Limits(**{k: kw.pop(k) for k in list(kw) if k.startswith("max_")})


def _target(name: str | None, skip: tuple[str, ...] = (), call_timeout: float | None = None) -> Any:
    if not name:
        raise BadInput(
            "--target is required: reference, spec, vllm[==X.Y.Z], python:module:Name "
            "or cmd:COMMAND"
        )
    try:
        target = resolve(name, call_timeout=call_timeout)
    except TargetError as exc:
        raise BadInput(str(exc)) from exc
    if skip:
        target.capabilities = target.capabilities - set(skip)
        target.skipped = [*target.skipped, *(f"{s}: skipped on request" for s in skip)]
    return target


def _queue(ps: PoolState | None) -> str:
    if ps is None:
        return "-"

    # A broken target's state may name blocks the pool does not have: draw them, never crash.
    def key(b: int) -> str:
        if not 0 <= b < len(ps.key):
            return "[no such block]"
        return f"[{ps.key[b]}]" if ps.key[b] is not None else ""

    q = " ".join(f"{b}{key(b)}" for b in ps.free)
    used = " ".join(f"{b}x{r}" for b, r in enumerate(ps.ref) if r and b)
    return f"free: {q or '(empty)'}" + (f"  in use: {used}" if used else "")


def render(result: ReplayResult, title: str) -> Table:
    """The steps as a table: call, expected against observed, the free queue after it."""
    table = Table(title=title, show_lines=False)
    # "fold": a narrow terminal breaks a long call across lines, never elides part of it
    table.add_column("#", justify="right")
    table.add_column("call", overflow="fold")
    table.add_column("spec", overflow="fold")
    table.add_column("target", overflow="fold")
    table.add_column("free queue after (spec / target)", overflow="fold")
    bad = result.divergence.step if result.divergence else -1
    for i, s in enumerate(result.steps, 1):
        style = "bold red" if i == bad else None
        if s.call is None:
            table.add_row(str(i), f"[dim]{s.note}[/dim]", "", "", "", style=style)
            continue
        tgt = "same" if s.observed == s.expected else format_outcome(s.observed)
        pools = range(len(s.spec_state))
        lines = []
        for p in pools:
            line = f"p{p} {_queue(s.spec_state[p])}"
            theirs = s.target_state[p]
            if theirs is not None and theirs.snapshot() != s.spec_state[p].snapshot():
                line += f"\n   target {_queue(theirs)}"
            lines.append(line)
        queues = "\n".join(lines)
        table.add_row(str(i), repr(s.call), format_outcome(s.expected), tgt, queues, style=style)
        # A watcher that fired during this call may have called back into the pool:
        # those calls are compared too, so they are drawn too.
        for op, exp, obs in s.nested:
            theirs_out = "same" if obs is None or obs == exp else format_outcome(obs)
            table.add_row(
                "", f"  -> from a watcher: {op!r}", format_outcome(exp), theirs_out, "", style=style
            )
    return table


class _Interrupts:
    """Ctrl-C and SIGTERM as a KeyboardInterrupt that is not lost.

    Python runs a signal's handler wherever the main thread is, and a KeyboardInterrupt
    raised inside a callback that swallows exceptions (a gc callback of Hypothesis's, a
    ``__del__``) is printed as "Exception ignored" and gone: the oracle then waited on a
    hung target's call for the rest of its timeout (seen once in CI). So the first signal
    also starts a watchdog that raises it again every ``every`` seconds until the main
    thread has :attr:`caught` it."""

    def __init__(self, every: float = 2.0) -> None:
        self.every = every
        self.caught = False
        self._watchdog: threading.Thread | None = None

    def handler(self, signum: int, frame: Any) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._again, args=(signum,), daemon=True)
            self._watchdog.start()
        raise KeyboardInterrupt  # the same path for both: every child process group is ended

    def _again(self, signum: int) -> None:
        while True:
            time.sleep(self.every)
            if self.caught:
                return
            # runs :meth:`handler` again, in the main thread
            _thread.interrupt_main(signal.Signals(signum))


class _Kvpool(click.Group):
    """The ``kvpool`` group: one exit code per meaning (:mod:`.exits`) for every subcommand."""

    def invoke(self, ctx: click.Context) -> Any:
        interrupts = _Interrupts()
        old: dict[int, Any] = {}
        with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
            for sig in (signal.SIGINT, signal.SIGTERM):
                old[sig] = signal.signal(sig, interrupts.handler)
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except click.ClickException as exc:
            exc.exit_code = BAD_INPUT  # type: ignore[misc]  # a FileError and its kind say 1, which means VIOLATION
            raise
        except (BadInput, TraceError) as exc:
            click.echo(f"kvpool: {_one_line(str(exc))}", err=True)
            ctx.exit(BAD_INPUT)
        except TargetBroken as exc:  # found, but it raised while loaded or built: a finding
            _end_children()
            click.echo(exc.details, err=True)
            click.echo(f"kvpool: VIOLATION: target crashed: {_one_line(str(exc))}", err=True)
            ctx.exit(VIOLATION)
        except KeyboardInterrupt:
            interrupts.caught = True
            _end_children()
            click.echo("kvpool: interrupted", err=True)
            ctx.exit(INTERRUPTED)
        except Exception:
            _end_children()
            click.echo(traceback.format_exc(), err=True, nl=False)
            click.echo(
                "kvpool: internal error of the oracle (a bug in kvpool; the traceback is above)",
                err=True,
            )
            ctx.exit(ORACLE_ERROR)
        finally:
            interrupts.caught = True
            for signum, handler in old.items():
                signal.signal(signum, handler)


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else f"{line[:limit]}... ({len(line):,} characters)"


def _end_children() -> None:
    from .cmd_target import end_all

    end_all()


@click.group(cls=_Kvpool, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvpool")
def main() -> None:
    """kvpool: a reference KV-cache block pool and a conformance oracle for other pools.

    Exit codes: 0 conforms, 1 violation found, 2 usage or bad input, 3 oracle error,
    130 interrupted.
    """


@main.command("conform")
@_target_option()
@click.option("--level", type=click.Choice(LEVELS), default="exact", show_default=True)
@click.option("--examples", "-n", type=click.IntRange(1), default=200, show_default=True)
@click.option(
    "--steps", type=click.IntRange(1), default=30, show_default=True, help="calls per example"
)
@click.option("--seed", type=int, default=None, help="random seed (default: derandomized)")
@click.option("--max-blocks", type=click.IntRange(1), default=16, show_default=True)
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(CAPABILITIES),
    help="a capability not to test (repeatable), e.g. UnpinBlocks or multi_pool",
)
@click.option(
    "--max-pools",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="pools per example; 1 turns off cross-pool frees and DropPool",
)
@click.option(
    "--events/--no-events",
    default=None,
    help="KV events on/off in every pool (default: drawn per pool; off without take_events)",
)
@click.option(
    "--caching/--no-caching",
    default=None,
    help="prefix caching on/off in every pool (default: drawn; off without a prefix cache)",
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="write the report as JSON here",
)
@click.option(
    "--save-trace",
    type=click.Path(file_okay=False),
    default=None,
    help="save the minimal failing trace as JSON in this directory",
)
@click.option(
    "--spec-coverage/--no-spec-coverage",
    default=True,
    show_default=True,
    help="measure the spec's branches the search takes (reported under 'conforms')",
)
@click.option(
    "--all",
    "keep_going",
    is_flag=True,
    default=False,
    help="keep searching past each finding; report each distinct one once, with its trace",
)
@click.option(
    "--allow",
    multiple=True,
    metavar="NAME",
    help="accept a known difference and search on (repeatable): an erratum of "
    "docs/errata.md (e.g. unpin-one-watcher), a rule (e.g. INV-EVENTS) or a signature "
    "as --all prints it",
)
@click.option(
    "--patience",
    type=click.IntRange(1),
    default=PATIENCE,
    show_default=True,
    help="searches in a row (each of --examples fresh examples) that must find nothing "
    "(new) before a stage of the search ends",
)
@click.option(
    "--max-findings",
    type=click.IntRange(1),
    default=MAX_FINDINGS,
    show_default=True,
    help="with --all: stop after this many distinct findings (one erratum is one finding); "
    "the report says when the run stopped there",
)
@_call_timeout_option()
def conform_cmd(
    target_name: str,
    level: str,
    examples: int,
    steps: int,
    seed: int | None,
    max_blocks: int,
    skip: tuple[str, ...],
    max_pools: int,
    events: bool | None,
    caching: bool | None,
    json_file: str | None,
    save_trace: str | None,
    spec_coverage: bool,
    keep_going: bool,
    allow: tuple[str, ...],
    patience: int,
    max_findings: int,
    call_timeout: float,
) -> None:
    """Search for the shortest trace on which TARGET parts from the spec."""
    _writable_file(json_file, "--json")
    _writable_dir(save_trace, "--save-trace")
    target = _target(target_name, skip, call_timeout)
    chosen = {k: v for k, v in (("events", events), ("caching", caching)) if v is not None}
    settings = {**target.defaults, **chosen}
    console.print(
        f"[bold]kvpool conform[/bold] {target.name} at [bold]{level}[/bold]: "
        f"{examples} examples of up to {steps} calls"
    )
    for name, value in sorted(settings.items()):
        why = "option" if name in chosen else "the target cannot do otherwise"
        console.print(f"  {name} {'on' if value else 'off'} in every pool ({why})")
    for s in target.skipped:
        console.print(f"  [yellow]skipped[/yellow] {s}")
    for name in allow:
        console.print(f"  allowed: {name}", markup=False)
    with console.status("searching (then shrinking any failure)..."):
        report = conform(
            target,
            level,
            examples,
            seed,
            steps,
            max_blocks,
            spec_coverage=spec_coverage,
            max_pools=max_pools,
            keep_going=keep_going,
            allow=allow,
            patience=patience,
            max_findings=max_findings,
            **chosen,
        )
    if report.conforms:
        console.print(
            f"[green]conforms[/green] at {level}: no violation in {report.searches} "
            f"search(es) of {examples} examples ({report.seconds:.1f}s)"
            + (" past the allowed differences" if allow else "")
        )
        for line in report.coverage.lines():
            console.print(line, markup=False, soft_wrap=True)
    if keep_going and report.findings:
        console.print(
            f"[red]{len(report.findings)} distinct finding(s)[/red] at {level} "
            f"({report.seconds:.1f}s):"
        )
        for i, d in enumerate(report.findings, 1):
            known = f"  [erratum {d.erratum}]" if d.erratum else ""
            also = f"; also seen as: {'; '.join(d.also)}" if d.also else ""
            console.print(f"  {i}. {d.signature}{known}{also}", markup=False)
        if report.capped:
            console.print(
                f"[yellow]stopped at the cap of {max_findings} distinct findings[/yellow]: "
                "there may be more (--max-findings)"
            )
    for i, d in enumerate(report.findings, 1):
        head = f"{i}/{len(report.findings)}: " if keep_going else ""
        console.print(
            f"[red]VIOLATION[/red] {head}of [bold]{d.rule}[/bold]"
            + ("" if keep_going else f" ({report.seconds:.1f}s)")
        )
        console.print(
            f"signature: {d.signature}" + (f" (erratum {d.erratum})" if d.erratum else ""),
            markup=False,
        )
        console.print(d.message.split("\n--- trace ---")[0])
        _target_traceback(d.crash)
        if d.hint:
            console.print(f"hint: {d.hint}", markup=False)
        if d.trace is not None:
            again = _target(target_name, skip, call_timeout)
            result = replay(d.trace, again, level, stop=False)
            console.print(render(result, "minimal trace"))
    if json_file:
        _write(json_file, json.dumps(report.to_json(), indent=1) + "\n", "--json")
        console.print(f"report written to {json_file}")
    if save_trace:
        for i, d in enumerate(report.findings, 1):
            if d.trace is None:
                continue
            suffix = f"-{i}" if keep_going else ""
            name = f"{target.name.replace(':', '_').replace('/', '_')}-{level}{suffix}.json"[-200:]
            path = Path(save_trace) / name
            _write(str(path), json.dumps(d.trace.to_json(), indent=1) + "\n", "--save-trace")
            console.print(f"trace saved to {path}  (kvpool replay {path} --target {target_name})")
    sys.exit(CONFORMS if report.conforms else VIOLATION)


def _writable_file(path: str | None, option: str) -> None:
    """Refuse, before any work, an output file that cannot be written."""
    if path is None:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise BadInput(f"{option} {path}: is a folder")
    if not parent.is_dir():
        raise BadInput(f"{option} {path}: no folder {parent}")
    if not os.access(p if p.exists() else parent, os.W_OK):
        raise BadInput(f"{option} {path}: not writable")


def _writable_dir(path: str | None, option: str) -> None:
    if path is None:
        return
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot make the folder: {exc.strerror or exc}") from exc
    if not os.access(p, os.W_OK):
        raise BadInput(f"{option} {path}: not writable")


def _write(path: str, text: str, option: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write it: {exc.strerror or exc}") from exc


@main.command("matrix")
@click.option("--from", "first", default="0.8.0", show_default=True, help="oldest release")
@click.option("--to", "last", default="latest", show_default=True, help="newest release")
@click.option(
    "--level",
    "levels",
    multiple=True,
    type=click.Choice(LEVELS),
    default=("safety",),
    show_default=True,
    help="a level to run (repeatable)",
)
@click.option("--examples", "-n", type=click.IntRange(1), default=30, show_default=True)
@click.option("--steps", type=click.IntRange(1), default=30, show_default=True)
@click.option("--seed", type=int, default=None, help="random seed (default: derandomized)")
@click.option("--max-pools", type=click.IntRange(1), default=3, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default="docs/matrix.md", show_default=True)
@click.option(
    "--errata",
    type=click.Path(dir_okay=False),
    default="docs/errata.md",
    show_default=True,
    help="the page whose per-release section is rewritten ('' for none)",
)
@click.option("--json", "json_file", type=click.Path(dir_okay=False), default=None)
def matrix_cmd(
    first: str,
    last: str,
    levels: tuple[str, ...],
    examples: int,
    steps: int,
    seed: int | None,
    max_pools: int,
    out: str,
    errata: str,
    json_file: str | None,
) -> None:
    """Run LEVELs over every vLLM release from --from to --to; write the matrix page.

    Downloads each release's wheel once (keeping only its two pool files). Exit 0 if
    every release conforms at every level, 1 if any finding (or a release that cannot
    be loaded), 2 for a release the registry does not have.
    """
    from .matrix import registry_releases, run_matrix, select, timed, write_pages

    releases = select(registry_releases(), first, last)  # an unknown release: BadInput, exit 2
    lv = list(dict.fromkeys(levels))
    console.print(
        f"[bold]kvpool matrix[/bold] {len(releases)} releases ({releases[0]} to "
        f"{releases[-1]}) at {', '.join(lv)}: {examples} examples each"
    )

    def progress(row: Any) -> None:
        if not row.loaded:
            console.print(f"  {row.release}: [red]cannot load[/red] {row.error}")
            return
        cells = ", ".join(f"{c.level} {c.short()}" for c in row.cells.values())
        console.print(f"  {row.release}: {cells}")

    rows, seconds = timed(
        lambda: run_matrix(releases, lv, examples, seed, steps, max_pools, progress)
    )
    command = (
        f"kvpool matrix --from {releases[0]} --to {last} "
        + " ".join(f"--level {x}" for x in lv)
        + f" --examples {examples}"
        + (f" --seed {seed}" if seed is not None else "")
        + (f" --max-pools {max_pools}" if max_pools != 3 else "")
    )
    write_pages(
        rows,
        lv,
        command,
        seconds,
        Path(out),
        Path(errata) if errata else None,
        Path(json_file) if json_file else None,
    )
    console.print(f"{out} written ({seconds:.0f} s)")
    clean = all(r.loaded and all(c.conforms for c in r.cells.values()) for r in rows)
    sys.exit(CONFORMS if clean else VIOLATION)


@main.command("soak")
@_target_option("reference | spec | vllm[==X.Y.Z] | python:module:Name (no cmd:)")
@click.option("--level", type=click.Choice(LEVELS), default="exact", show_default=True)
@click.option("--ops", type=click.IntRange(1), default=100_000, show_default=True)
@click.option("--blocks", type=click.IntRange(2), default=10_000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--check-every",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="compare the whole state every K calls (the blocks a call names: every call)",
)
@_call_timeout_option()
def soak_cmd(
    target_name: str,
    level: str,
    ops: int,
    blocks: int,
    seed: int,
    check_every: int,
    call_timeout: float,
) -> None:
    """A long random serving-like workload on a big pool, compared call by call.

    No search and no shrinking (kvpool conform does those on small pools): the first
    divergence is reported with its call number, so a long run is cheap to leave on.
    """
    from .fastcheck import cannot_drive, run_random

    target = _target(target_name, call_timeout=call_timeout)
    why = cannot_drive(target, level)
    if why is not None:
        raise BadInput(why)
    console.print(
        f"[bold]kvpool soak[/bold] {target.name} at [bold]{level}[/bold]: "
        f"{ops:,} calls on {blocks:,} blocks, seed {seed}"
    )
    with console.status("running..."):
        result = run_random(target, ops, blocks, seed, check_every, level=level)
    rate = f"{result.ops:,} calls in {result.seconds:.1f}s, {result.ops_per_second:,.0f}/s"
    if result.divergence is None:
        console.print(f"[green]conforms[/green] at {level}: {rate}")
        sys.exit(CONFORMS)
    console.print(f"[red]VIOLATION[/red] {result.divergence}")
    console.print(f"({rate}; kvpool conform --target {target_name} shrinks it on a small pool)")
    sys.exit(VIOLATION)


@main.command("replay")
@click.argument("trace", type=click.Path())
@_target_option(
    "the pool to run it on; a trace's own target runs only if it is reference or spec "
    "(a file never chooses a command or module to run)",
    required=False,
)
@click.option("--level", type=click.Choice(LEVELS), default=None)
@_call_timeout_option()
@_limit_options()
def replay_cmd(
    trace: str, target_name: str | None, level: str | None, call_timeout: float, **kw: Any
) -> None:
    """Reproduce a saved TRACE on a target; exit 1 if it still diverges."""
    saved = load_trace(trace, _limits(kw))
    if target_name is None:
        if saved.target not in TRUSTED:
            recorded = f"on {saved.target!r}" if saved.target else "on no named target"
            raise BadInput(
                f"{trace} was recorded {recorded}; a file never chooses what runs: "
                "name the target with --target"
            )
        target_name = saved.target
    result = replay(saved, _target(target_name, call_timeout=call_timeout), level, stop=False)
    console.print(render(result, f"{trace} on {target_name}"))
    _verdict(result)


@main.command("show")
@click.argument("trace", type=click.Path())
@_limit_options()
def show_cmd(trace: str, **kw: Any) -> None:
    """Render a saved TRACE step by step, on the spec (nothing the file names is run)."""
    saved = load_trace(trace, _limits(kw))
    if saved.violation:
        console.print(
            f"recorded violation: [bold]{str(saved.violation.get('rule'))[:200]}[/bold] "
            f"on {saved.target[:200]} at {saved.level}",
            markup=False,
        )
    result = replay(saved, None, saved.level, stop=False)
    console.print(render(result, trace))
    for n, step in enumerate(saved.steps, 1):
        if "call" in step and step.get("observed") != step.get("expected"):
            console.print(f"step {n}: recorded target outcome {step.get('observed')}", markup=False)


def _verdict(result: ReplayResult) -> None:
    if result.divergence is None:
        console.print("[green]no divergence[/green]")
        sys.exit(CONFORMS)
    d = result.divergence
    console.print(f"[red]diverges[/red] at step {d.step}: [bold]{d.rule}[/bold]: {d.detail}")
    _target_traceback(d.traceback)
    sys.exit(VIOLATION)


def _target_traceback(text: str | None) -> None:
    """The target's own traceback under a "target crashed" finding (cut if very long)."""
    if text:
        lines = text.splitlines()
        if len(lines) > 60:
            lines = [*lines[:20], f"... ({len(lines) - 40} lines)", *lines[-20:]]
        console.print("the target's traceback:", markup=False)
        for line in lines:
            console.print(f"  {line[:500]}", markup=False)


@main.group("vectors")
def vectors_group() -> None:
    """Golden vectors: fixed traces with their expected results."""


@vectors_group.command("check")
@click.option("--dir", "where", type=click.Path(file_okay=False), default=None)
@_limit_options()
def vectors_check(where: str | None, **kw: Any) -> None:
    """Confirm every vector still matches the spec."""
    from .vectors import check_vectors

    bad = check_vectors(where, _limits(kw))
    for name, d in bad:
        console.print(f"[red]{name}[/red]: step {d.step}: {d.rule}: {d.detail}")
    console.print(f"{'[green]all vectors match[/green]' if not bad else '[red]mismatch[/red]'}")
    sys.exit(VIOLATION if bad else CONFORMS)


@vectors_group.command("run")
@_target_option()
@click.option("--dir", "where", type=click.Path(file_okay=False), default=None)
@_call_timeout_option()
@_limit_options()
def vectors_run(target_name: str, where: str | None, call_timeout: float, **kw: Any) -> None:
    """Run every vector against a target (no Hypothesis)."""
    from .vectors import load, not_runnable, run_vectors

    limits = _limits(kw)
    load(where, limits)  # a bad corpus is refused before the target is started
    target = _target(target_name, call_timeout=call_timeout)
    skip = not_runnable(target, where, limits)
    results = run_vectors(target, where, limits)
    failed = 0
    for name, d in results:
        if d is not None:
            failed += 1
            console.print(f"[red]{name}[/red]: step {d.step}: {d.rule}: {d.detail}")
    console.print(f"{len(results) - failed}/{len(results)} vectors run pass on {target.name}")
    if skip:
        counts: dict[str, int] = {}
        for lacking in skip.values():
            for cap in lacking:
                counts[cap] = counts.get(cap, 0) + 1
        lacks = ", ".join(f"{cap} ({n})" for cap, n in sorted(counts.items()))
        console.print(
            f"{len(skip)} of {len(skip) + len(results)} vectors not run: they use what "
            f"{target.name} lacks: {lacks}"
        )
    sys.exit(VIOLATION if failed else CONFORMS)


@main.command("check-log")
@click.argument("log", type=click.Path())
@_limit_options(LOG_LIMITS)
def check_log_cmd(log: str, **kw: Any) -> None:
    """Replay a log written by kvpool.oracle.record() against the spec."""
    from .tracelog import check_log

    result = check_log(log, limits=_limits(kw))
    if result.divergence is None:
        console.print(f"[green]the log conforms[/green]: {result.calls} calls")
        sys.exit(CONFORMS)
    d = result.divergence
    for line in result.context:
        console.print(f"  {line}")
    console.print(f"[red]diverges[/red] at call {d.step}: [bold]{d.rule}[/bold]: {d.detail}")
    sys.exit(VIOLATION)


try:  # helper E's teaching aid
    from .play import main as _play_main

    @main.command(
        "play",
        # --help/-h go to play's own parser, which knows its options.
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def play_cmd(args: tuple[str, ...]) -> None:
        """Step through pool operations on the spec and the reference pool."""
        sys.exit(_play_main(list(args)))

except ImportError:  # pragma: no cover
    pass


if __name__ == "__main__":
    main()
