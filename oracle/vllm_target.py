"""vLLM's real ``BlockPool`` as an oracle target, loaded without torch or vLLM's configs.

:func:`load_vllm` returns vLLM's own ``block_pool`` module, either from an installed
vLLM (when ``import vllm.v1.core.block_pool`` works and the version matches) or from
the wheel on PyPI: ``pip download --no-deps vllm==X`` into a cache directory
(``$KVPOOL_CACHE``, default ``~/.cache/kvpool``), of which only
``vllm/v1/core/kv_cache_utils.py`` and ``vllm/v1/core/block_pool.py`` are read.
Their heavy imports (torch, ``vllm.config``, the request class, metrics, events,
logging) are replaced by small stand-ins while the two files execute; the stand-ins
are put in ``sys.modules`` only for the duration of that execution and removed
afterwards, so no module named ``vllm`` is left behind for other code. The loaded
modules live under the private names ``_kvpool_vllm_<version>.*``.

:class:`VllmPool` adapts vLLM's API to the one the :class:`~kvpool.oracle.Driver`
speaks, by calling vLLM's own methods: a key is cached with ``cache_full_blocks``
(through a stand-in request whose ``block_hashes`` are the keys' bytes), found with
``get_cached_block(hash, [group])``, evicted with ``evict_blocks``. Nothing of the
pool's behaviour is re-implemented here: the adapter only translates arguments and
results. :func:`vllm_state` reads a vLLM pool as a spec ``PoolState``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import logging
import os
import shutil
import subprocess
import sys
import types
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvpool.spec.errors import InvalidArgument
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, apply_event
from kvpool.spec.invariants import Violation
from kvpool.spec.keys import group_key
from kvpool.spec.state import PoolState

from .exits import BadInput
from .target_base import GROUP_LOOKUP_METHOD

DEFAULT_VLLM_VERSION = "0.33.0"
FILES = ("vllm/v1/core/kv_cache_utils.py", "vllm/v1/core/block_pool.py")


class VllmUnavailable(RuntimeError):
    """vLLM's block pool could not be found, downloaded or loaded."""


def cache_dir() -> Path:
    return Path(os.environ.get("KVPOOL_CACHE", Path.home() / ".cache" / "kvpool"))


# -- finding the source ----------------------------------------------------------------


def _installed(version: str) -> types.ModuleType | None:
    """vLLM's block_pool module from an installed vLLM of ``version``, if it imports."""
    try:
        from importlib.metadata import version as dist_version

        if dist_version("vllm") != version:
            return None
        return importlib.import_module("vllm.v1.core.block_pool")
    except Exception:
        return None


def _find_wheel(where: Path, version: str) -> Path | None:
    wheels = sorted(where.glob(f"vllm-{version}-*.whl"))
    return wheels[0] if wheels else None


class NoSuchRelease(VllmUnavailable, BadInput):
    """The registry has no vLLM release of that version (a usage error, exit 2)."""


_MISSING = ("No matching distribution", "Could not find a version")


def fetch_sources(version: str = DEFAULT_VLLM_VERSION, *, quiet: bool = True) -> Path:
    """The directory holding vLLM ``version``'s block-pool sources, downloading once.

    Only the two source files are kept: the wheel (230-490 MB) is downloaded into a
    scratch directory of the cache, the two files are extracted, and the wheel is
    deleted. A wheel left over by an older kvpool is deleted once its files are out.
    """
    root = cache_dir() / f"vllm-{version}"
    src = root / "src"
    root.mkdir(parents=True, exist_ok=True)
    # (one process at a time: two test workers would share the scratch directory, and
    # one's cleanup would delete the wheel the other is downloading; the second waits,
    # then finds the files)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fetch_locked(version, root, src, quiet)


def _fetch_locked(version: str, root: Path, src: Path, quiet: bool) -> Path:
    """:func:`fetch_sources`' work, under its lock."""
    wheels = root / "wheels"
    if all((src / f).is_file() for f in FILES):
        shutil.rmtree(wheels, ignore_errors=True)
        return src
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        wheel = _find_wheel(wheels, version)
        if wheel is None:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--no-cache-dir",
            ]
            cmd += ["--ignore-requires-python", "--dest", str(wheels), f"vllm=={version}"]
            if quiet:
                cmd.append("--quiet")
            done = subprocess.run(cmd, capture_output=quiet, text=True, check=False)
            wheel = _find_wheel(wheels, version)
            if done.returncode != 0 or wheel is None:
                detail = (done.stderr or "")[-2000:] if quiet else ""
                if any(m in detail for m in _MISSING):
                    raise NoSuchRelease(f"no vLLM release {version!r} on the registry")
                raise VllmUnavailable(f"pip download vllm=={version} failed: {detail}")
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            missing = [n for n in FILES if n not in names]
            if missing:
                raise VllmUnavailable(f"vLLM {version}'s wheel has no {', '.join(missing)}")
            for name in FILES:
                target = src / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    finally:
        shutil.rmtree(wheels, ignore_errors=True)
    return src


# -- stand-ins for whatever the two files import ---------------------------------------


class _Event:
    """Stand-in for vLLM's msgspec event structs: keeps the keyword arguments as attributes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)
        if args:  # positional construction (some releases): keep them in order
            self.__dict__["_args"] = args

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


class _PlaceholderMeta(type):
    """Placeholders answer any class attribute with another placeholder (enum members...)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__name__}.{name}", cls.__module__)

    def __getitem__(cls, item: Any) -> Any:  # Placeholder[int] in an annotation
        return cls


class _Placeholder(metaclass=_PlaceholderMeta):
    """A name vLLM imports for typing, configuration or code paths the oracle never takes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


def _placeholder(name: str, module: str) -> type:
    return _PlaceholderMeta(name, (_Placeholder,), {"__module__": module})


def _quiet_logger(name: str) -> logging.Logger:
    log = logging.getLogger(f"kvpool.vllm.{name}")
    log.setLevel(logging.ERROR)
    return log


def _mm_features_in_window(features: Any, start: int, end: int) -> tuple[int, list[Any]]:
    """Stand-in for ``vllm.multimodal.utils.get_mm_features_in_window`` (written here from its
    use in the pool): the index of the first multimodal input that ends after ``start``
    (where a scan of the window's inputs begins), and the inputs overlapping
    ``start:end``. The pool reads only the index."""
    first = next(
        (i for i, f in enumerate(features) if f.mm_position.offset + f.mm_position.length > start),
        len(features),
    )
    inside = [
        f
        for f in features[first:]
        if f.mm_position.offset < end and f.mm_position.offset + f.mm_position.length > start
    ]
    return first, inside


_REAL: dict[str, Any] = {
    "get_mm_features_in_window": _mm_features_in_window,
    # the few imported names whose behaviour the pool's code paths depend on
    "cdiv": lambda a, b: -(a // -b),
    "round_up": lambda x, y: -(x // -y) * y,
    "init_logger": _quiet_logger,
    "gc_untrack": lambda obj: obj,
    "MEDIUM_GPU": "GPU",
    "KVCacheEvent": _Event,
    "AllBlocksCleared": type("AllBlocksCleared", (_Event,), {}),
    "BlockRemoved": type("BlockRemoved", (_Event,), {}),
    "BlockStored": type("BlockStored", (_Event,), {}),
}


class _StandIn(types.ModuleType):
    """A module of stand-ins: a real one for each name in ``_REAL``, else a placeholder."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _REAL.get(name)
        if value is None:
            value = _placeholder(name, self.__name__)
        setattr(self, name, value)
        return value


class _Envs(types.ModuleType):
    """``vllm.envs``: every flag off (the pool's defaults)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return False


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a stand-in for a module: any ``vllm.*`` (first), or, as a last resort,
    any other module that is not installed (torch, msgspec, ...)."""

    def __init__(self, roots: frozenset[str] | None) -> None:
        self.roots = roots  # None: anything (the last-resort finder)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self.roots is not None and fullname.partition(".")[0] not in self.roots:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == "vllm.envs":
            return _Envs(spec.name)
        return _StandIn(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == "vllm":
            module.__dict__["envs"] = importlib.import_module("vllm.envs")


@contextlib.contextmanager
def _stand_ins(borrowed: dict[str, types.ModuleType]) -> Iterator[None]:
    """Stand-ins (and ``borrowed``) in ``sys.modules`` for the block only; then the old state."""
    before = dict(sys.modules)
    first, last = _StandInFinder(frozenset({"vllm"})), _StandInFinder(None)
    sys.meta_path.insert(0, first)
    sys.meta_path.append(last)
    sys.modules.update(borrowed)
    try:
        yield
    finally:
        sys.meta_path.remove(first)
        sys.meta_path.remove(last)
        for name, mod in list(sys.modules.items()):
            if name not in before and (isinstance(mod, _StandIn | _Envs) or name in borrowed):
                del sys.modules[name]
        for name, old in before.items():
            if sys.modules.get(name) is not old:
                sys.modules[name] = old


_LOADED: dict[str, types.ModuleType] = {}


def _exec(private: str, public: str, path: Path, borrowed: dict[str, types.ModuleType]) -> Any:
    module = types.ModuleType(private)
    module.__file__ = str(path)
    sys.modules[private] = module  # dataclasses look their module up while executing
    borrowed[public] = module
    with _stand_ins(borrowed):
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
        exec(code, module.__dict__)
    return module


def load_vllm(version: str = DEFAULT_VLLM_VERSION) -> types.ModuleType:
    """vLLM ``version``'s ``block_pool`` module (installed, or loaded in isolation).

    :class:`NoSuchRelease` if the registry has no such release; :class:`VllmUnavailable`
    if it exists but its pool cannot be downloaded or loaded.
    """
    if version in _LOADED:
        return _LOADED[version]
    module = _installed(version)
    if module is None:
        src = fetch_sources(version)
        tag = "_kvpool_vllm_" + version.replace(".", "_")
        borrowed: dict[str, types.ModuleType] = {}
        try:
            _exec(f"{tag}.kv_cache_utils", "vllm.v1.core.kv_cache_utils", src / FILES[0], borrowed)
            module = _exec(f"{tag}.block_pool", "vllm.v1.core.block_pool", src / FILES[1], borrowed)
        except Exception as exc:
            raise VllmUnavailable(
                f"could not load vLLM {version}'s block pool: {type(exc).__name__}: {exc}"
            ) from exc
    module.__dict__.setdefault("__kvpool_version__", version)
    _LOADED[version] = module
    return module


# -- the API epochs, found by probing the class -------------------------------------------


@dataclass(frozen=True)
class VllmApi:
    """What one vLLM-shaped ``BlockPool`` class takes and offers, found by probing it.

    Every field is read off the class (signatures, annotations, attributes), so a fork
    or a release nobody listed is driven by what it is, not by its version number.
    """

    init_params: frozenset[str]
    """``__init__``'s parameter names (``hash_block_size`` is absent up to ~0.11)."""
    touch_per_group: bool
    """``touch`` takes a tuple of per-group block lists (up to ~0.13)."""
    lookup_groups: bool
    """``get_cached_block(hash, group_ids) -> list | None`` (0.8: ``(hash) -> block``)."""
    cache_params: tuple[str, ...]
    """``cache_full_blocks``'s parameter names, filled by name."""
    hash_type: Any
    """The NamedTuple a block hash is (BlockHashType / BlockHash, up to ~0.10), or None: bytes."""
    evict_first: bool
    """``free_blocks(blocks, evict_first=...)`` (from 0.34)."""
    methods: frozenset[str]
    """Which of vLLM's optional methods the class has (unpin_blocks from 0.30, ...)."""
    multikey: frozenset[str] = frozenset()
    """The adapter's methods for vLLM's calls on blocks with several keys that the class
    backs (0.33.0's forms, bytes hashes): ``cache_full_blocks`` when it takes a request and
    a ``block_mask``, ``cache_partial_block``, ``move_block_hashes``,
    ``emit_cached_block_events``, and ``get_cached_block_groups`` for a lookup by groups."""

    def describe(self) -> str:
        parts = [
            "hash_block_size" if "hash_block_size" in self.init_params else "no hash_block_size",
            "touch per group" if self.touch_per_group else "touch flat",
            "lookup by groups" if self.lookup_groups else "lookup without groups",
            "tuple hashes" if self.hash_type is not None else "bytes hashes",
        ]
        if self.evict_first:
            parts.append("evict_first")
        return ", ".join(parts)


OPTIONAL = (
    "touch",
    "unpin_blocks",
    "reset_prefix_cache",
    "get_num_free_blocks",
    "get_usage",
    "is_block_writable",
    "evict_blocks",
    "take_events",
    "get_cached_block",
    "cache_full_blocks",
)


def _params(fn: Any) -> list[inspect.Parameter]:
    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return ps[1:] if ps and ps[0].name == "self" else ps


_INIT_KEYWORDS = frozenset({"hash_block_size", "enable_kv_cache_events"})


def _init_params(cls: Any) -> set[str]:
    """``__init__``'s parameter names; through a ``*args, **kwargs`` wrapper (a plugin's
    patch), those of the first ``__init__`` up the class's MRO that names them."""
    for klass in getattr(cls, "__mro__", (cls,)):
        init = klass.__dict__.get("__init__", None) if klass is not cls else cls.__init__
        if init is None:
            continue
        ps = _params(init)
        if not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in ps):
            return {p.name for p in ps}
    return set(_INIT_KEYWORDS)  # only a wrapper to see: assume the current keywords


def probe_api(cls: Any) -> VllmApi:
    """The API epoch of a vLLM-shaped class, from its signatures and attributes."""
    init = _init_params(cls)
    touch = _params(getattr(cls, "touch", None))
    note = str(touch[0].annotation).replace(" ", "") if touch else ""
    per_group = note.startswith(("tuple[", "Tuple[", "typing.Tuple[")) or note.startswith(
        ("Sequence[Sequence", "list[list", "Sequence[list")
    )
    lookup = [p for p in _params(getattr(cls, "get_cached_block", None)) if p.kind != p.VAR_KEYWORD]
    cache = tuple(p.name for p in _params(getattr(cls, "cache_full_blocks", None)))
    fn = getattr(cls, "cache_full_blocks", None) or cls.__init__
    namespace = getattr(fn, "__globals__", {})
    hash_type = None
    for name in ("BlockHashType", "BlockHash"):
        candidate = namespace.get(name)
        if isinstance(candidate, type) and hasattr(candidate, "_fields"):
            hash_type = candidate
            break
    free = {p.name for p in _params(getattr(cls, "free_blocks", None))}
    multikey: set[str] = set()
    if hash_type is None and "hash_block_size" in init:
        if cache[:6] == REQUEST_CACHE_PARAMS and "block_mask" in cache:
            multikey.add("cache_full_blocks")
        multikey.update(m for m in MULTIKEY_METHODS if callable(getattr(cls, m, None)))
        partial = {p.name for p in _params(getattr(cls, "cache_partial_block", None))}
        if "replace_existing_hashes" not in partial:
            # 0.27-0.32 have cache_partial_block without it: the spec's call (which always
            # says whether to replace) cannot be made as it is on such a release
            multikey.discard("cache_partial_block")
        if len(lookup) >= 2:
            multikey.add(GROUP_LOOKUP_METHOD)
    return VllmApi(
        init_params=frozenset(init),
        touch_per_group=per_group,
        lookup_groups=len(lookup) >= 2,
        cache_params=cache,
        hash_type=hash_type,
        evict_first="evict_first" in free,
        methods=frozenset(m for m in OPTIONAL if callable(getattr(cls, m, None))),
        multikey=frozenset(multikey),
    )


REQUEST_CACHE_PARAMS = (
    "request",
    "blocks",
    "num_cached_blocks",
    "num_full_blocks",
    "block_size",
    "kv_cache_group_id",
)
"""``cache_full_blocks``'s leading parameters in the request form the adapter passes on."""
MULTIKEY_METHODS = ("cache_partial_block", "move_block_hashes", "emit_cached_block_events")


# -- the adapter ---------------------------------------------------------------------------


class _Codec:
    """Keys (any hashable) <-> the bytes vLLM keeps, one code per key, shared by a run."""

    def __init__(self) -> None:
        self.code: dict[Hashable, bytes] = {}
        self.key: dict[bytes, Hashable] = {}

    def encode(self, key: object) -> bytes:
        try:
            code = self.code.get(key)
        except TypeError as exc:
            raise InvalidArgument(f"key {key!r} is not hashable") from exc
        if key is None:
            raise InvalidArgument("None is no key")
        if code is None:
            code = self.code[key] = b"k%06d" % len(self.code)
            self.key[code] = key
        return code

    def decode(self, code: Any) -> Hashable:
        """The key behind a hash as vLLM keeps it: bytes (maybe with a 4-byte group id
        appended), or a NamedTuple holding them (``block_hash`` / ``hash_value``)."""
        for _ in range(4):
            inner = getattr(code, "block_hash", None)
            if inner is None:
                inner = getattr(code, "hash_value", None)
            if inner is None:
                break
            code = inner
        if isinstance(code, bytes | bytearray):
            raw = bytes(code)
            return self.key.get(raw, self.key.get(raw[:-4], raw))
        out: Hashable = code
        return out


GROUP = 0
BLOCK_SIZE = 16
"""Tokens per block the adapter caches with (vLLM's default block size, the spec's default
``hash_block_size``); the token ids themselves are never read: every hash is given."""


class _Request:
    """What ``cache_full_blocks`` reads of a vLLM request, in any release."""

    def __init__(self, block_hashes: list[Any]) -> None:
        self.request_id = "kvpool"
        self.block_hashes = block_hashes
        self.all_token_ids = [0] * (len(block_hashes) * BLOCK_SIZE)
        self.num_tokens = len(self.all_token_ids)
        self.lora_request = None
        self.cache_salt = None
        self.mm_features: tuple[()] = ()
        self.mm_positions: list[Any] = []
        self.mm_hashes: list[Any] = []
        self.prompt_embeds = None
        self.session_id = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None  # an attribute of a release's Request the oracle does not model


class _Counted:
    """Wraps a watcher so the adapter can count firings (vLLM keeps no such count)."""

    __slots__ = ("adapter", "fn")

    def __init__(self, fn: Callable[[Any], None], adapter: VllmPool) -> None:
        self.fn = fn
        self.adapter = adapter

    def __call__(self, block: Any) -> None:
        self.adapter.fired += 1
        self.fn(block)


ADAPTED: dict[str, str] = {
    "get_new_blocks": "get_new_blocks",
    "free_blocks": "free_blocks",
    "touch": "touch",
    "unpin_blocks": "unpin_blocks",
    "reset_prefix_cache": "reset_prefix_cache",
    "get_num_free_blocks": "get_num_free_blocks",
    "get_usage": "get_usage",
    "is_block_writable": "is_block_writable",
    "evict_blocks": "evict_blocks",
    "cache_blocks": "cache_full_blocks",
    "get_cached_block": "get_cached_block",
    "take_events": "take_events",
}
"""The adapter's methods (the Driver's API) -> the vLLM method each one calls."""


class VllmPool:
    """A vLLM-shaped ``BlockPool`` (any release, a fork) behind the API the Driver calls.

    ``cls`` is the pool class; its :class:`VllmApi` says how to call it.
    """

    def __init__(
        self,
        module: Any,
        num_gpu_blocks: int,
        enable_caching: bool = True,
        enable_kv_cache_events: bool = False,
        codec: _Codec | None = None,
        api: VllmApi | None = None,
    ) -> None:
        cls = module.BlockPool
        self.api = api or probe_api(cls)
        kwargs: dict[str, Any] = {}
        if "hash_block_size" in self.api.init_params:
            kwargs["hash_block_size"] = BLOCK_SIZE
        if "enable_kv_cache_events" in self.api.init_params:
            kwargs["enable_kv_cache_events"] = enable_kv_cache_events
        self.inner = cls(num_gpu_blocks, enable_caching, **kwargs)
        self.module = module
        self.codec = codec or _Codec()
        self.blocks = self.inner.blocks
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.enable_kv_cache_events = enable_kv_cache_events
        self.fired = 0
        self.taken_view: set[Hashable] = set()
        self._counted: dict[int, _Counted] = {}
        self._held_keys: dict[int, tuple[Any, tuple[Hashable, ...]]] = {}
        """id(event) -> (event, keys): what an emit_cached_block_events event announces."""

    def kvpool_methods(self) -> frozenset[str]:
        """The adapter methods that work: those whose vLLM method the class has (and, for
        the calls on blocks with several keys, in the form the adapter passes on)."""
        have = self.api.methods | {"get_new_blocks", "free_blocks"}
        return frozenset(m for m, theirs in ADAPTED.items() if theirs in have) | self.api.multikey

    def kvpool_evict_first(self) -> bool:
        return self.api.evict_first

    def kvpool_multi_pool(self) -> bool:
        """Cross-pool frees: its blocks know their pool (vLLM from 0.30); else one pool."""
        return bool(self.blocks) and hasattr(self.blocks[0], "pool")

    # straight through
    def get_new_blocks(self, num_blocks: int) -> list[Any]:
        return list(self.inner.get_new_blocks(num_blocks))

    def free_blocks(self, blocks: Iterable[Any], evict_first: bool = False) -> None:
        if self.api.evict_first:
            self.inner.free_blocks(blocks, evict_first=evict_first)
        else:
            self.inner.free_blocks(blocks)

    def touch(self, blocks: list[Any]) -> None:
        self.inner.touch((blocks,) if self.api.touch_per_group else blocks)

    def unpin_blocks(self, blocks: list[Any], on_reuse: Any) -> None:
        fn = on_reuse
        if callable(on_reuse):  # one wrapper per watcher: the pool sees the same object
            fn = self._counted.get(id(on_reuse))
            if fn is None or fn.fn is not on_reuse:
                fn = self._counted[id(on_reuse)] = _Counted(on_reuse, self)
        self.inner.unpin_blocks(blocks, fn)

    def reset_prefix_cache(self) -> bool:
        return bool(self.inner.reset_prefix_cache())

    def get_num_free_blocks(self) -> int:
        return int(self.inner.get_num_free_blocks())

    def get_usage(self) -> float:
        return float(self.inner.get_usage())

    def is_block_writable(self, block: Any) -> bool:
        return bool(self.inner.is_block_writable(block))

    def evict_blocks(self, block_ids: list[Any]) -> None:
        self.inner.evict_blocks(block_ids)

    # the prefix cache, through vLLM's own methods
    def _hash(self, code: bytes) -> Any:
        t = self.api.hash_type
        if t is None:
            return code
        values = {"hash_value": code, "token_ids": (0,) * BLOCK_SIZE, "extra_keys": None}
        return t(*(values.get(f) for f in t._fields))

    def cache_blocks(self, blocks: list[Any], keys: list[Any]) -> None:
        hashes = [self._hash(self.codec.encode(k)) for k in keys]
        given = {
            "request": _Request(hashes),
            "blocks": blocks,
            "block_hashes": hashes,
            "num_cached_blocks": 0,
            "num_full_blocks": len(blocks),
            "block_size": BLOCK_SIZE,
            "kv_cache_group_id": GROUP,
            "hash_fn": _no_hash_fn,
        }
        args = [given[p] for p in self.api.cache_params if p in given]
        self.inner.cache_full_blocks(*args)

    # vLLM's calls on blocks with several keys: straight through (the driver passes a
    # request view and real bytes hashes; only the events need the adapter)
    def cache_full_blocks(
        self,
        request: Any,
        blocks: list[Any],
        num_cached_blocks: Any,
        num_full_blocks: Any,
        block_size: Any,
        kv_cache_group_id: Any,
        block_mask: Any = None,
    ) -> None:
        self.inner.cache_full_blocks(
            request,
            blocks,
            num_cached_blocks,
            num_full_blocks,
            block_size,
            kv_cache_group_id,
            block_mask,
        )

    def cache_partial_block(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.cache_partial_block(*args, **kwargs)

    def move_block_hashes(self, src: Any, dst: Any) -> None:
        self.inner.move_block_hashes(src, dst)

    def emit_cached_block_events(self, *args: Any) -> None:
        queue = getattr(self.inner, "kv_event_queue", None)
        before = len(queue) if isinstance(queue, list) else 0
        self.inner.emit_cached_block_events(*args)
        if not isinstance(queue, list):
            return
        index = self.inner.cached_block_hash_to_block
        for e in queue[before:]:  # consumers learn only the keys some block holds now
            g = int(getattr(e, "group_idx", 0) or 0)
            keys = [group_key(bytes(h), g) for h in getattr(e, "block_hashes", None) or ()]
            held = tuple(k for k in keys if index.get_one_block(k) is not None)
            self._held_keys[id(e)] = (e, held)

    def get_cached_block(self, key: object, group_ids: Any = None) -> Any:
        if group_ids is not None:  # vLLM's form: a real block hash and group ids
            return self.inner.get_cached_block(key, group_ids)
        h = self._hash(self.codec.encode(key))
        if self.api.lookup_groups:
            hit = self.inner.get_cached_block(h, [GROUP])
            return None if not hit else hit[0]
        return self.inner.get_cached_block(h)

    def take_events(self) -> list[Event]:
        events = [self.translate(e) for e in self.inner.take_events()]
        self._held_keys.clear()
        for e in events:
            apply_event(self.taken_view, e)
        return events

    def translate(self, event: Any) -> Event:
        """vLLM's event as the spec's: an event of the adapter's codes (``cache_blocks``)
        names their keys only; one of real hashes (vLLM's multi-key calls) every field."""
        if isinstance(event, BlockStored | BlockRemoved | AllBlocksCleared):
            # a pool that logs the spec's events (kvpool's own behind this adapter)
            return _decode_event(event, self.codec.decode, self.codec.key)  # type: ignore[no-any-return]
        name = type(event).__name__
        hashes = [bytes(h) for h in getattr(event, "block_hashes", None) or () if _raw(h)]
        if name == "AllBlocksCleared" or len(hashes) != len(event.block_hashes or ()):
            return spec_event(event, lambda h, group: self.codec.decode(h))
        if any(h in self.codec.key for h in hashes):
            return spec_event(event, lambda h, group: self.codec.decode(h))
        g = int(getattr(event, "group_idx", 0) or 0)
        if name == "BlockRemoved":
            (h,) = hashes
            return BlockRemoved(group_key(h, g), (h,), event.medium, g)
        noted = self._held_keys.get(id(event))
        keys = (
            noted[1]
            if noted is not None and noted[0] is event
            else tuple(group_key(h, g) for h in hashes)
        )
        parent = event.parent_block_hash

        def field(name: str) -> Any:
            # Fields vLLM added over time (0.29's BlockStored has no session_id, for one):
            # absent on a release is None, as the spec's event has for a plain request,
            # never a crash of the state read blamed on the release.
            return getattr(event, name, None)

        return BlockStored(
            keys=keys,
            block_hashes=tuple(hashes),
            parent_block_hash=None if parent is None else bytes(parent),
            token_ids=_tuples(event.token_ids),
            block_size=event.block_size,
            lora_id=field("lora_id"),
            medium=field("medium"),
            lora_name=field("lora_name"),
            extra_keys=_tuples(field("extra_keys")),
            group_idx=g,
            session_id=field("session_id"),
            lookahead_token_ids=_tuples(field("lookahead_token_ids")),
        )

    def __repr__(self) -> str:
        version = getattr(self.module, "__dict__", {}).get("__kvpool_version__", "?")
        return f"vLLM {version} BlockPool(N={self.num_gpu_blocks})"


def _raw(h: object) -> bool:
    return isinstance(h, bytes | bytearray)


def _tuples(v: Any) -> Any:
    """vLLM's lists (nested) as the spec's tuples."""
    if isinstance(v, list | tuple):
        return tuple(_tuples(x) for x in v)
    return v


def _no_hash_fn(*args: Any) -> Any:
    raise AssertionError("kvpool gives every block hash: vLLM need not compute one")


def spec_event(event: Any, key_of: Callable[[Any, int], Hashable]) -> Event:
    """vLLM's KV event as the spec's; ``key_of(block_hash, group)`` names a key."""
    name = type(event).__name__
    group = int(getattr(event, "group_idx", 0) or 0)
    if name == "BlockStored":
        return BlockStored(tuple(key_of(h, group) for h in event.block_hashes or ()))
    if name == "BlockRemoved":
        (h,) = event.block_hashes
        return BlockRemoved(key_of(h, group))
    return AllBlocksCleared()


def _watcher_id(fn: Any) -> int:
    fn = getattr(fn, "fn", fn)
    wid = getattr(fn, "watcher_id", None)
    return wid if type(wid) is int else id(fn)


def _walk_free(inner: Any) -> tuple[list[int], int | None]:
    """The free queue head first, as walked (a block may show twice in a broken list),
    and the pool's own free count (None if it keeps none). The walk stops after N + 1
    nodes, so a cycle cannot hang the oracle. Sentinel nodes (from ~0.9), or a head
    pointer (0.8)."""
    queue = inner.free_block_queue
    head = getattr(queue, "fake_free_list_head", None)
    if head is not None:
        node, tail = head.next_free_block, queue.fake_free_list_tail
    else:
        node, tail = getattr(queue, "free_list_head", None), None
    walked: list[int] = []
    while node is not None and node is not tail and len(walked) <= len(inner.blocks):
        walked.append(node.block_id)
        node = node.next_free_block
    count = getattr(queue, "num_free_blocks", None)
    return walked, count if type(count) is int else None


def _free_ids(inner: Any) -> OrderedDict[int, None]:
    return OrderedDict.fromkeys(_walk_free(inner)[0])


def vllm_list_violations(pool: VllmPool) -> list[Violation]:
    """What a free queue's shape breaks beyond the spec state: a block linked twice (or a
    cycle), or a free count that is not the list's length (INV-FREE)."""
    walked, count = _walk_free(pool.inner)
    out = []
    seen: set[int] = set()
    for bid in walked:
        if bid in seen:
            out.append(Violation("INV-FREE", "the free list reaches it twice", block=bid))
            break
        seen.add(bid)
    if count is not None and count != len(walked):
        out.append(Violation("INV-FREE", f"free count {count} but {len(walked)} in the list"))
    return out


def _holder_ids(held: Any) -> list[int]:
    """The block ids one index entry names: a block, a block id (0.34), or a dict of either."""
    if isinstance(held, dict):
        return [x for v in held.values() for x in _holder_ids(v)] or list(held)
    if isinstance(held, int):
        return [held]
    return [held.block_id]


def _index(inner: Any, codec: _Codec) -> dict[Hashable, dict[int, None]]:
    cached = inner.cached_block_hash_to_block
    table = getattr(cached, "_cache", cached)  # BlockHashToBlockMap, or a plain dict (<0.9)
    index: dict[Hashable, dict[int, None]] = {}
    for code, held in table.items():
        ids = _holder_ids(held)
        if ids:
            index.setdefault(codec.decode(code), {}).update(dict.fromkeys(ids))
    for code, ids in getattr(cached, "_dup_ids", {}).items():  # 0.34: keys held by several
        index.setdefault(codec.decode(code), {}).update(dict.fromkeys(ids))
    return index


def vllm_state(pool: VllmPool) -> PoolState:
    """Read a vLLM pool (any layout) as the spec state it represents, from its own data."""
    inner, codec = pool.inner, pool.codec
    blocks = inner.blocks
    watchers = getattr(inner, "_reuse_watchers", None) or {}  # from 0.30
    pending = {  # vLLM keeps one watcher per block; a fork may keep a list
        bid: [_watcher_id(x) for x in (w if isinstance(w, list | tuple) else [w])]
        for bid, w in watchers.items()
    }
    pending = {bid: ws for bid, ws in pending.items() if ws}
    events_on = bool(getattr(inner, "enable_kv_cache_events", False))
    queue = getattr(inner, "kv_event_queue", None) or []
    log = [pool.translate(e) for e in queue] if events_on else []
    view = set(pool.taken_view)
    for e in log:
        apply_event(view, e)
    key = [None if b.block_hash is None else codec.decode(b.block_hash) for b in blocks]
    # token counts and further entries (0.33): only keys in vLLM's form (bytes) have them in
    # the spec; the adapter's cache_blocks codes stand for keys cached without a token count
    tokens = {
        b.block_id: n
        for b in blocks
        if type(key[b.block_id]) is bytes
        and type(n := getattr(b, "block_hash_num_tokens", None)) is int
    }
    further = getattr(inner, "cached_block_hashes_by_block", None) or {}
    entries = {bid: [codec.decode(k) for k in ks] for bid, ks in further.items() if ks}
    return PoolState(
        num_blocks=inner.num_gpu_blocks,
        caching=bool(inner.enable_caching),
        events_on=events_on,
        ref=[b.ref_cnt for b in blocks],
        key=key,
        free=_free_ids(inner),
        index=_index(inner, codec),
        pending=pending,
        log=log,
        view=view,
        registered=pool.fired + sum(len(ws) for ws in pending.values()),
        fired=pool.fired,
        tokens=tokens,
        entries=entries,
        hash_block_size=getattr(inner, "hash_block_size", BLOCK_SIZE),
        lookahead=int(getattr(inner, "num_hash_lookahead_tokens", 0) or 0),
        medium=getattr(inner, "medium", None) or "GPU",
    )


def _decode_event(e: Any, dec: Callable[[Any], Hashable], codes: dict[bytes, Hashable]) -> Any:
    """A spec event whose keys are the adapter's hash codes, with the keys they stand for.

    An event of vLLM's multi-key calls (real hashes, none of them a code) is kept whole."""
    hashes = getattr(e, "block_hashes", None) or ()
    keys = getattr(e, "keys", None) or ((e.key,) if hasattr(e, "key") else ())
    coded = any(isinstance(h, bytes) and h in codes for h in hashes) or any(
        isinstance(k, bytes) and (k in codes or k[:-4] in codes) for k in keys
    )
    if not coded:  # (the adapter's cache_blocks always names at least one code)
        return e
    changes: dict[str, Any] = {}
    if dataclasses.is_dataclass(e):  # vLLM's own event fields: CacheBlocks models none
        for f in dataclasses.fields(e):
            if f.name not in ("keys", "key") and f.default is not dataclasses.MISSING:
                changes[f.name] = f.default
    if hasattr(e, "keys") and isinstance(e.keys, tuple):
        changes["keys"] = tuple(dec(k) for k in e.keys)
    if hasattr(e, "key"):
        changes["key"] = dec(e.key)
    return dataclasses.replace(e, **changes) if changes else e


def decoded_state(pool: VllmPool, ps: PoolState | None = None) -> PoolState:
    """A fork's own ``kvpool_state()`` (or ``ps``, a state read off the class behind the
    adapter), with the hashes the adapter gave it as the keys."""
    if ps is None:
        ps = pool.inner.kvpool_state()
    dec = pool.codec.decode
    ps.key = [None if k is None else dec(k) for k in ps.key]
    ps.index = {dec(k): v for k, v in ps.index.items()}
    codes = pool.codec.key
    ps.log = [
        _decode_event(e, dec, codes) if isinstance(e, Event) else pool.translate(e) for e in ps.log
    ]
    ps.entries = {b: [dec(k) for k in ks] for b, ks in ps.entries.items()}
    # cache_full_blocks records how many tokens each key covers; the oracle's CacheBlocks,
    # which the adapter turns into that call with its own codes, models no tokens: only
    # keys in vLLM's form (bytes, from vLLM's multi-key calls) keep theirs
    ps.tokens = {b: n for b, n in ps.tokens.items() if type(ps.key[b]) is bytes}
    # watchers may be given as the objects the adapter passed: name them as the oracle does
    ps.pending = {
        b: [w if type(w) is int else _watcher_id(w) for w in ws] for b, ws in ps.pending.items()
    }
    # what only the adapter knows: the keys taken events announced, and the firings
    ps.view = set(pool.taken_view)
    for e in ps.log:
        apply_event(ps.view, e)
    ps.fired = pool.fired
    ps.registered = pool.fired + sum(len(ws) for ws in ps.pending.values())
    return ps


def class_factory(cls: Any) -> Callable[[int, bool, bool], VllmPool]:
    """``factory(num_blocks, caching, events)`` driving any vLLM-API class (a release's, a
    fork's, a subclass, kvpool's own pool with vLLM's API) through :class:`VllmPool`,
    with its :class:`VllmApi` probed once on the class itself."""
    module = sys.modules.get(getattr(cls, "__module__", ""), None)
    namespace = types.SimpleNamespace(BlockPool=cls)
    label = getattr(module, "__kvpool_version__", None) or getattr(cls, "__qualname__", "?")
    namespace.__dict__["__kvpool_version__"] = label
    api = probe_api(cls)
    codec = _Codec()

    def factory(num_blocks: int, caching: bool, events: bool) -> VllmPool:
        return VllmPool(namespace, num_blocks, caching, events, codec, api)

    factory.__name__ = getattr(cls, "__name__", "vllm_like")
    return factory


def vllm_factory(version: str = DEFAULT_VLLM_VERSION) -> Callable[[int, bool, bool], VllmPool]:
    """``factory(num_blocks, caching, events)`` building vLLM ``version``'s real pools."""
    module = load_vllm(version)
    api = probe_api(module.BlockPool)
    codec = _Codec()

    def factory(num_blocks: int, caching: bool, events: bool) -> VllmPool:
        return VllmPool(module, num_blocks, caching, events, codec, api)

    factory.__name__ = f"vllm_{version.replace('.', '_')}"
    return factory


VLLM_LAYOUT = ("blocks", "free_block_queue", "cached_block_hash_to_block", "num_gpu_blocks")
"""What :func:`vllm_state` reads of a pool: a fork without it needs ``kvpool_state()``."""
