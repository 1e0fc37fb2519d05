"""``kvpool play``: type pool operations, watch the pool redrawn after each one.

Every command runs on the executable spec and on a concrete pool (kvpool's own
``BlockPool`` unless ``--impl`` names another class with vLLM's API) side by side.
After each command the session draws the free queue, every block's reference
count, key and pending watchers, says what the call returned or why it was
refused, which watchers fired, whether spec and pool still agree, and, for a
refused call, which invariants a pool that skipped the check would have broken.

Interactive on a terminal; with ``--script FILE`` or a non-terminal stdin it reads
one command per line and echoes each, so sessions can be tested and pasted into
docs. The exit status is 0 when spec and pool agreed and every invariant held
throughout, 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvpool.spec.errors import ErrorKind
from kvpool.spec.invariants import Violation, check_pool
from kvpool.spec.ops import (
    CacheBlocks,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    Outcome,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import NULL_BLOCK, PoolState, World

from .driver import Driver
from .exits import BAD_INPUT, BadInput
from .files import DEFAULT_LIMITS, Limits, read_lines
from .render import text_in_use
from .target_base import Target
from .targets import as_target

HELP = """\
Operations (block lists are ids; the null block is 0):
  get N               get_new_blocks(N)
  free B...           free_blocks([B...])
  free! B...          free_blocks([B...], evict_first=True)
  touch B...          touch([B...])
  unpin B... wID      unpin_blocks([B...], on_reuse=watcher ID)
  cache B K [B K...]  cache_blocks([B...], [K...])   (keys are strings)
  lookup K            get_cached_block(K)
  evict B...          evict_blocks([B...])
  reset               reset_prefix_cache()
  writable B          is_block_writable(B)
  events              take_events()
Session:
  undo                take back the last operation
  new N [nocache] [noevents]   start again with a pool of N blocks
  show                redraw the pool
  help                this text
  quit                leave (also: exit, Ctrl-D)"""


class UsageError(Exception):
    """A command the session cannot parse."""


def _ints(tokens: Sequence[str], what: str = "block id") -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in tokens)
    except ValueError:
        raise UsageError(f"every {what} must be an integer, got {' '.join(tokens)!r}") from None


def parse(line: str) -> Op | str | None:
    """The operation a command line names, a session command's name, or None for a blank line."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not words:
        return None
    cmd, args = words[0].lower(), words[1:]
    if cmd in ("help", "?", "undo", "show", "quit", "exit"):
        if args:
            raise UsageError(f"{cmd} takes no arguments")
        return "quit" if cmd == "exit" else "help" if cmd == "?" else cmd
    if cmd == "new":
        return "new"
    if cmd == "get":
        if len(args) != 1:
            raise UsageError("usage: get N")
        return GetNewBlocks(_ints(args, "count")[0])
    if cmd in ("free", "free!"):
        return FreeBlocks(_ints(args), evict_first=cmd == "free!")
    if cmd == "touch":
        return Touch(_ints(args))
    if cmd == "unpin":
        if not args or not args[-1].lower().startswith("w"):
            raise UsageError("usage: unpin B... wID   (e.g. unpin 3 w1)")
        (wid,) = _ints([args[-1][1:]], "watcher id")
        return UnpinBlocks(_ints(args[:-1]), wid)
    if cmd == "cache":
        if not args or len(args) % 2:
            raise UsageError("usage: cache B K [B K ...]   (e.g. cache 1 a 2 b)")
        return CacheBlocks(_ints(args[0::2]), tuple(args[1::2]))
    if cmd == "lookup":
        if len(args) != 1:
            raise UsageError("usage: lookup K")
        return GetCachedBlock(args[0])
    if cmd == "evict":
        return EvictBlocks(_ints(args))
    if cmd == "reset":
        return ResetPrefixCache()
    if cmd == "writable":
        if len(args) != 1:
            raise UsageError("usage: writable B")
        return IsBlockWritable(_ints(args)[0])
    if cmd == "events":
        return TakeEvents()
    raise UsageError(f"unknown command {cmd!r} (type help)")


def describe_op(op: Op) -> str:
    """The vLLM-API call an operation stands for."""
    if isinstance(op, GetNewBlocks):
        return f"get_new_blocks({op.n})"
    if isinstance(op, FreeBlocks):
        ids = [getattr(b, "block", b) for b in op.blocks]
        return f"free_blocks({ids}{', evict_first=True' if op.evict_first else ''})"
    if isinstance(op, Touch):
        return f"touch({[getattr(b, 'block', b) for b in op.blocks]})"
    if isinstance(op, UnpinBlocks):
        ids = [getattr(b, "block", b) for b in op.blocks]
        return f"unpin_blocks({ids}, on_reuse=w{op.watcher})"
    if isinstance(op, CacheBlocks):
        ids = [getattr(b, "block", b) for b in op.blocks]
        return f"cache_blocks({ids}, {list(op.keys)})"
    if isinstance(op, GetCachedBlock):
        return f"get_cached_block({op.key!r})"
    if isinstance(op, EvictBlocks):
        return f"evict_blocks({list(op.block_ids)})"
    if isinstance(op, IsBlockWritable):
        return f"is_block_writable({getattr(op.block, 'block', op.block)})"
    if isinstance(op, ResetPrefixCache):
        return "reset_prefix_cache()"
    if isinstance(op, TakeEvents):
        return "take_events()"
    if isinstance(op, GetNumFreeBlocks):
        return "get_num_free_blocks()"
    if isinstance(op, GetUsage):
        return "get_usage()"
    return repr(op)


# -- what a pool that skipped the check would have done --------------------------------------


def unguarded(ps: PoolState, op: Op) -> PoolState | None:
    """The state a pool without argument checks would reach, for the refusals that matter.

    A sketch of an unguarded pool (vLLM's own code has no such checks): release
    decrements and queues a block when its count hits exactly 0; caching
    overwrites a key without fixing the index. None when there is nothing to
    sketch (the call would fail anyway, or names blocks that do not exist).
    """
    after = ps.copy()

    def ids(entries: Iterable[object]) -> list[int] | None:
        out = []
        for e in entries:
            b = getattr(e, "block", e)
            if type(b) is not int or not 0 <= b < ps.num_blocks:
                return None
            out.append(b)
        return out

    if isinstance(op, (FreeBlocks, UnpinBlocks)):
        blocks = ids(op.blocks)
        if blocks is None:
            return None
        for b in blocks:
            if isinstance(op, FreeBlocks) and b == NULL_BLOCK:
                continue
            after.ref[b] -= 1
            if isinstance(op, UnpinBlocks):
                pending = after.pending.setdefault(b, [])
                if op.watcher not in pending:
                    pending.append(op.watcher)  # type: ignore[arg-type]
                    after.registered += 1
            if after.ref[b] == 0:
                after.free[b] = None
        return after
    if isinstance(op, CacheBlocks):
        blocks = ids(op.blocks)
        if blocks is None or len(blocks) != len(op.keys):
            return None
        keys: list[Hashable] = []
        for k in op.keys:
            try:
                hash(k)
            except TypeError:
                return None
            if k is None:
                return None
            keys.append(k)
        for b, k in zip(blocks, keys, strict=True):
            after.key[b] = k
            after.index.setdefault(k, {})[b] = None
        if after.events_on:
            after.view.update(keys)
        return after
    if isinstance(op, EvictBlocks):
        blocks = ids(op.block_ids)
        if blocks is None:
            return None
        return after  # nothing is cached on the null block: evicting it is a no-op
    return None


def would_break(ps: PoolState, op: Op) -> list[Violation] | None:
    """The invariants an unguarded pool would break with ``op`` (None: nothing to sketch)."""
    after = unguarded(ps, op)
    return None if after is None else check_pool(after)


# -- the session ------------------------------------------------------------------------------


@dataclass
class Step:
    op: Op
    spec: Outcome
    impl: Outcome
    agree: bool
    differences: list[str] = field(default_factory=list)


Factory = Callable[[int, bool, bool], Any]


class Session:
    """A spec world and a concrete pool, driven by the same operations."""

    def __init__(
        self,
        num_blocks: int = 8,
        caching: bool = True,
        events: bool = True,
        target: Target | Factory | str = "reference",
    ) -> None:
        self.target = as_target(target)  # a target string, a Target, or a pool class
        self.config = (num_blocks, caching, events)
        self.history: list[Op] = []
        self.world = World.single(*self.config)
        self.driver = Driver(self.target.factory, [self.config])

    def restart(self, num_blocks: int, caching: bool, events: bool) -> None:
        self.config = (num_blocks, caching, events)
        self.history = []
        self.world = World.single(*self.config)
        self.driver = Driver(self.target.factory, [self.config])

    @property
    def spec_state(self) -> PoolState:
        return self.world.pools[0]

    def impl_state(self) -> PoolState | None:
        """The pool's state as the spec's, or None for a pool that exposes none."""
        if self.target.state_check is None:
            return None
        return self.target.state_check(self.driver, 0)

    def impl_violations(self) -> list[Violation]:
        if self.target.target_invariants is not None:
            return self.target.target_invariants(self.driver, 0)
        state = self.impl_state()
        return [] if state is None else check_pool(state)

    def apply(self, op: Op) -> Step:
        spec = self.world.apply(op)
        differences = []
        try:
            impl = self.driver.execute(op)
        except Exception as exc:  # the pool raised something that is no pool error
            impl = Outcome()
            differences.append(f"the pool crashed: {type(exc).__name__}: {exc}")
        else:
            if (spec.value, spec.error, spec.fired) != (impl.value, impl.error, impl.fired):
                differences.append(f"the spec returned {_outcome(spec)}, the pool {_outcome(impl)}")
        theirs = self.impl_state()
        if theirs is not None and self.spec_state.snapshot() != theirs.snapshot():
            differences.append("their states differ: spec " + self.spec_state.describe())
            differences.append("                     pool " + theirs.describe())
        self.history.append(op)
        return Step(op, spec, impl, not differences, differences)

    def undo(self) -> bool:
        if not self.history:
            return False
        replay = self.history[:-1]
        self.restart(*self.config)
        for op in replay:
            self.apply(op)
        return True


def _outcome(o: Outcome) -> str:
    if o.error is not None:
        return f"refused: {o.error.value}"
    fired = f", fired {list(o.fired)}" if o.fired else ""
    return f"{o.value!r}{fired}"


# -- drawing ----------------------------------------------------------------------------------


def pool_table(ps: PoolState) -> Table:
    """Every block as a row: where it is, ref_cnt, key, pending watchers, writable."""
    position = {b: i for i, b in enumerate(ps.free)}
    table = Table(title=None, show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("block", "where", "ref_cnt", "key", "watchers", "writable"):
        table.add_column(col)
    for b in range(ps.num_blocks):
        if b == NULL_BLOCK:
            table.add_row("0", "null block", "-", "-", "-", "-", style="dim")
            continue
        where = f"free #{position[b]}" if b in position else "in use"
        key = "" if ps.key[b] is None else str(ps.key[b])
        watchers = " ".join(f"w{w}" for w in ps.pending.get(b, []))
        writable = "yes" if ps.ref[b] == 1 and ps.key[b] is None else ""
        style = "green" if ps.ref[b] > 0 else ("yellow" if key else "")
        table.add_row(str(b), where, str(ps.ref[b]), key, watchers, writable, style=style)
    return table


def queue_text(ps: PoolState) -> Text:
    """The free queue, front first, with sentinels."""
    text = Text("HEAD", style="bold")
    for b in ps.free:
        text.append(" <-> ")
        label = str(b)
        if ps.key[b] is not None:
            label += f":{ps.key[b]}"
        if b in ps.pending:
            label += "*"
        text.append(label, style="yellow" if ps.key[b] is not None else "cyan")
    text.append(" <-> ")
    text.append("TAIL", style="bold")
    return text


class Player:
    """Reads commands, runs them on a :class:`Session`, draws the result."""

    def __init__(self, session: Session, console: Console, compact: bool = False) -> None:
        self.session = session
        self.console = console
        self.compact = compact
        self.ok = True

    def draw(self) -> None:
        ps = self.session.spec_state
        if self.compact:
            self.console.print(Text("  free:   ").append_text(queue_text(ps)))
            self.console.print(Text(f"  in use: {text_in_use(ps)}"))
            return
        n, caching, events = self.session.config
        self.console.print(
            Text(
                f"pool of {n} blocks, caching {'on' if caching else 'off'}, "
                f"events {'on' if events else 'off'}; free {len(ps.free)}",
                style="dim",
            )
        )
        self.console.print(Text("free queue: ").append_text(queue_text(ps)))
        self.console.print(pool_table(ps))

    def report(self, step: Step, before: PoolState) -> None:
        c = self.console
        o = step.spec
        line = Text(describe_op(step.op) + "  ->  ", style="bold")
        if o.error is not None:
            line.append(f"refused: {o.error.value}", style="red")
            if o.detail:
                line.append(f" ({o.detail})")
        else:
            line.append(repr(o.value), style="green")
        c.print(line)
        for f in o.fired:
            c.print(Text(f"  watcher w{f.watcher} fired for block {f.block}", style="magenta"))
        if o.error is not None:
            broken = would_break(before, step.op)
            if broken:
                c.print(Text("  without that check the pool would break:", style="red"))
                for v in broken:
                    c.print(Text(f"    {v}", style="red"))
            elif broken is not None and o.error is not ErrorKind.INVALID_ARGUMENT:
                c.print(Text("  (without that check no named invariant breaks at once)"))
        if not step.agree:
            self.ok = False
            c.print(Text("  SPEC AND POOL DISAGREE:", style="bold red"))
            for d in step.differences:
                c.print(Text(f"    {d}", style="red"))
        else:
            c.print(Text("  spec and pool agree", style="dim"))
        spec_broken = check_pool(self.session.spec_state)
        impl_broken = self.session.impl_violations()
        for who, vs in (("spec", spec_broken), ("pool", impl_broken)):
            for v in vs:
                self.ok = False
                c.print(Text(f"  {who} breaks {v}", style="bold red"))

    def command(self, line: str) -> bool:
        """Run one command line; False when the session should end."""
        try:
            parsed = parse(line)
        except UsageError as exc:
            self.console.print(Text(str(exc), style="red"))
            return True
        if parsed is None:
            return True
        if parsed == "quit":
            return False
        if parsed == "help":
            self.console.print(HELP, markup=False, highlight=False)
            return True
        if parsed == "show":
            self.draw()
            return True
        if parsed == "undo":
            last = self.session.history[-1] if self.session.history else None
            if last is not None and self.session.undo():
                self.console.print(Text(f"took back {describe_op(last)}", style="dim"))
            else:
                self.console.print(Text("nothing to undo", style="dim"))
            self.draw()
            return True
        if parsed == "new":
            words = shlex.split(line)[1:]
            try:
                n = int(words[0]) if words and words[0].isdigit() else 8
                bad = [w for w in words[1:] if w not in ("nocache", "noevents")]
                if bad or n < 1 or (words and not words[0].isdigit()):
                    raise UsageError("usage: new N [nocache] [noevents]")
            except UsageError as exc:
                self.console.print(Text(str(exc), style="red"))
                return True
            self.session.restart(n, "nocache" not in words, "noevents" not in words)
            self.draw()
            return True
        if not isinstance(parsed, str):
            before = self.session.spec_state.copy()
            step = self.session.apply(parsed)
            self.report(step, before)
            self.draw()
        return True


def _load_target(spec: str) -> Target:
    """An oracle target string, or a bare ``module:Class`` (read as ``python:module:Class``)."""
    from .target_base import TargetError
    from .targets import UnknownTarget, resolve

    try:
        try:
            return resolve(spec)
        except UnknownTarget:
            if ":" not in spec:
                raise
            return resolve(f"python:{spec}")
    except TargetError as exc:
        raise UsageError(f"--impl: {exc}") from exc


def _lines(stream: TextIO) -> Iterable[str]:
    for raw in stream:
        yield raw.rstrip("\n")


def check_script(lines: list[str], where: str, limits: Limits) -> None:
    """Refuse a script with a line that is no command (:class:`~.exits.BadInput`, naming
    the line) before any of it runs; ``new N`` may ask for at most ``limits.max_blocks``."""
    for n, line in enumerate(lines, 1):
        try:
            parsed = parse(line)
            if parsed == "new":
                words = shlex.split(line)[1:]
                if (words and not words[0].isdigit()) or any(
                    w not in ("nocache", "noevents") for w in words[1:]
                ):
                    raise UsageError("usage: new N [nocache] [noevents]")
                if words and not 1 <= int(words[0]) <= limits.max_blocks:
                    raise UsageError(
                        f"new {words[0]}: a pool of 1 to {limits.max_blocks:,} blocks "
                        "(raise it with --max-file-blocks)"
                    )
        except (UsageError, ValueError) as exc:
            raise BadInput(f"{where}:{n}: {str(exc)[:300]}") from exc


def _script_lines(path: str, limits: Limits) -> list[str]:
    if path != "-":
        return read_lines(path, limits, "play script")
    raw = sys.stdin.read(limits.max_bytes + 1)
    if len(raw) > limits.max_bytes:
        raise BadInput(f"stdin: over the limit of {limits.max_bytes:,} bytes (--max-file-bytes)")
    tmp_lines = raw.splitlines()
    if len(tmp_lines) > limits.max_steps or any(len(x) > limits.max_line for x in tmp_lines):
        raise BadInput(
            "stdin: too many lines, or a line too long (--max-file-steps, --max-file-line)"
        )
    return tmp_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kvpool play",
        description="Step through pool operations on the spec and a concrete pool side by side.",
        epilog="Type help inside the session for its commands.",
    )
    parser.add_argument("-n", "--num-blocks", type=int, default=8, help="pool size (default 8)")
    parser.add_argument("--no-caching", action="store_true", help="enable_caching=False")
    parser.add_argument("--no-events", action="store_true", help="enable_kv_cache_events=False")
    parser.add_argument(
        "--impl",
        default="reference",
        help="the pool to run beside the spec: any kvpool target (reference, vllm, "
        "python:module:Class, cmd:COMMAND) or module:Class (default: reference)",
    )
    parser.add_argument(
        "--script", metavar="FILE", help="read commands from FILE ('-' for stdin), echo them"
    )
    parser.add_argument(
        "--compact", action="store_true", help="draw the pool in two lines instead of a table"
    )
    parser.add_argument("--color", action="store_true", help="colour even when not a terminal")
    for flag, attr in (
        ("--max-file-bytes", "max_bytes"),
        ("--max-file-steps", "max_steps"),
        ("--max-file-line", "max_line"),
        ("--max-file-blocks", "max_blocks"),
    ):
        default = getattr(DEFAULT_LIMITS, attr)
        parser.add_argument(flag, dest=attr, type=int, default=default, help=f"(default {default})")
    args = parser.parse_args(argv)
    limits = Limits(
        max_bytes=args.max_bytes,
        max_steps=args.max_steps,
        max_line=args.max_line,
        max_blocks=args.max_blocks,
    )
    scripted = args.script is not None or not sys.stdin.isatty()
    script: list[str] | None = None
    try:
        if args.num_blocks < 1:
            raise UsageError("--num-blocks must be >= 1")
        if scripted:  # the whole script is read and checked before anything runs
            where = "stdin" if args.script in (None, "-") else args.script
            script = _script_lines(args.script or "-", limits)
            check_script(script, where, limits)
        target = _load_target(args.impl)
    except (UsageError, BadInput) as exc:
        print(f"kvpool play: {exc}", file=sys.stderr)
        return BAD_INPUT
    session = Session(args.num_blocks, not args.no_caching, not args.no_events, target)
    console = Console(
        force_terminal=True if args.color else None,
        no_color=not args.color and scripted,
        highlight=False,
        width=100 if scripted else None,
        soft_wrap=scripted,  # a transcript keeps one line per line, however long
    )
    player = Player(session, console, compact=args.compact)
    if target.name != "reference":
        console.print(Text(f"the spec beside {target.name}", style="dim"))
    if target.state_check is None:
        note = "it exposes no state: results are compared, the drawing is the spec's"
        console.print(Text(note, style="dim"))
    player.draw()
    if script is not None:
        for line in script:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            console.print(Text(f"> {line.strip()}", style="bold"))
            if not player.command(line):
                break
    else:
        with contextlib.suppress(ImportError):  # line editing and history for input()
            import readline  # noqa: F401
        console.print(Text("type help for the commands, quit to leave", style="dim"))
        while True:
            try:
                line = input("kvpool> ")
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            if not player.command(line):
                break
    return 0 if player.ok else 1


if __name__ == "__main__":
    sys.exit(main())
