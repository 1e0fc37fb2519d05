"""Put kvpool's reference ``BlockPool`` into an installed vLLM.

    import kvpool.vllm_plugin; kvpool.vllm_plugin.install()

or let vLLM do it: kvpool's ``pyproject.toml`` registers :func:`register` under vLLM's
``vllm.general_plugins`` entry points, which vLLM loads in every process it starts when
``KVPOOL_VLLM_PLUGIN=1`` is set (the plugin does nothing otherwise, so installing kvpool
next to vLLM changes nothing by itself).

:func:`install` rebinds every place vLLM 0.33.0 builds or names its ``BlockPool``
(:data:`SITES`): the class in ``vllm.v1.core.block_pool`` itself (so any module imported
later gets kvpool's), the name in each module that imported it, and vLLM's two subclasses
(``SharedEventQueueBlockPool``, ``_LookupBlockPool``), which are rebuilt on kvpool's class
with their own methods. :func:`uninstall` puts vLLM's classes back. Pools built before
:func:`install` stay vLLM's.

Imports are one way: this module imports ``kvpool.impl`` and vLLM, and nothing in kvpool's
spec, impl or oracle imports it. vLLM is imported only when :func:`install` runs.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from types import CellType, FunctionType, ModuleType
from typing import Any

VLLM_VERSION = "0.33.0"
ENV_FLAG = "KVPOOL_VLLM_PLUGIN"

# (module, name): where vLLM 0.33.0 binds its BlockPool class at import time. Found with
# `grep -rn "BlockPool" vllm/` over the installed package; the modules that import it only
# under `if TYPE_CHECKING:` (kv_cache_utils, kv_connector/v1/base, multi_connector,
# simple_cpu_offload_connector) need nothing, since annotations never construct a pool.
SITES: tuple[tuple[str, str], ...] = (
    ("vllm.v1.core.block_pool", "BlockPool"),  # the definition; later imports see kvpool's
    ("vllm.v1.core.kv_cache_coordinator", "BlockPool"),  # KVCacheCoordinator builds the pool
    ("vllm.v1.core.single_type_kv_cache_manager", "BlockPool"),
    ("vllm.v1.simple_kv_offload.manager", "BlockPool"),
    ("vllm.v1.hisparse.block_pool", "BlockPool"),
    ("vllm.v1.hisparse.coordinator", "BlockPool"),
    ("vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.connector", "BlockPool"),
    ("vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.coordinator", "BlockPool"),
    ("vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.scheduler", "BlockPool"),
    ("vllm.distributed.kv_transfer.kv_connector.v1.umbp.scheduler", "BlockPool"),
)

# (module defining a subclass of vLLM's BlockPool, class name, other modules binding it).
SUBCLASSES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "vllm.v1.hisparse.block_pool",
        "SharedEventQueueBlockPool",
        ("vllm.v1.core.single_type_kv_cache_manager",),  # builds it for hisparse groups
    ),
    ("vllm.distributed.kv_transfer.kv_connector.v1.umbp.scheduler", "_LookupBlockPool", ()),
)


@dataclass
class Installed:
    """What :func:`install` rebound, and what it could not import (optional vLLM parts)."""

    patched: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    _undo: list[tuple[ModuleType, str, Any]] = field(default_factory=list, repr=False)


_state: Installed | None = None


class VllmMismatch(RuntimeError):
    """vLLM is missing, of another version, or not shaped as this plugin expects."""


def _import(name: str) -> ModuleType | str:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # an optional part of vLLM whose own dependencies are absent
        return f"{type(exc).__name__}: {exc}"


def _rebind_class_cell(fn: Any, old: type, new: type) -> Any:
    """``fn`` with its ``__class__`` cell (what zero-argument ``super()`` reads) naming ``new``.

    A method of ``old`` that calls ``super()`` finds its class in that cell; copied
    into the rebuilt class unchanged, it would still name ``old``, and ``super()``
    would refuse every instance of the rebuilt class. Anything else is returned as is.
    """
    if isinstance(fn, staticmethod | classmethod):
        return type(fn)(_rebind_class_cell(fn.__func__, old, new))
    if isinstance(fn, property):
        get, set_, delete = (_rebind_class_cell(f, old, new) for f in (fn.fget, fn.fset, fn.fdel))
        return property(get, set_, delete, fn.__doc__)
    code = getattr(fn, "__code__", None)
    if not isinstance(fn, FunctionType) or code is None or "__class__" not in code.co_freevars:
        return fn
    cells = list(fn.__closure__ or ())
    i = code.co_freevars.index("__class__")
    if cells[i].cell_contents is not old:
        return fn
    cells[i] = CellType(new)
    out = FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(cells))
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__dict__.update(fn.__dict__)
    out.__qualname__, out.__doc__, out.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
    return out


def _rebase(cls: type, base: type, original_base: type) -> type:
    """``cls`` (a subclass of vLLM's pool) rebuilt with kvpool's pool in its base's place."""
    bases = tuple(base if b is original_base else b for b in cls.__bases__)
    body = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    rebuilt = type(cls.__name__, bases, body)
    rebuilt.__qualname__ = cls.__qualname__
    for name, value in body.items():
        fixed = _rebind_class_cell(value, cls, rebuilt)
        if fixed is not value:
            setattr(rebuilt, name, fixed)
    return rebuilt


def install(*, check_version: bool = True) -> Installed:
    """Make every pool vLLM builds from now on a ``kvpool.impl.BlockPool``. Idempotent."""
    global _state
    if _state is not None:
        return _state
    try:
        from importlib.metadata import version

        found = version("vllm")
    except Exception as exc:
        raise VllmMismatch("vLLM is not installed") from exc
    if check_version and found != VLLM_VERSION:
        raise VllmMismatch(f"kvpool's pool matches vLLM {VLLM_VERSION}, found vLLM {found}")

    from kvpool.impl import BlockPool as KvpoolBlockPool

    core = importlib.import_module("vllm.v1.core.block_pool")
    original = core.BlockPool
    if original is KvpoolBlockPool:
        raise VllmMismatch("vllm.v1.core.block_pool.BlockPool is already kvpool's")
    state = Installed()

    def rebind(module: ModuleType, name: str, new: Any) -> None:
        state._undo.append((module, name, getattr(module, name)))
        setattr(module, name, new)
        state.patched.append(f"{module.__name__}.{name}")

    # Import every site first, so each binds vLLM's class, then rebind them all.
    modules = {name: _import(name) for name, _ in SITES}
    for module_name, name in SITES:
        module = modules[module_name]
        if isinstance(module, str):
            state.skipped[module_name] = module
        elif getattr(module, name, None) is original:
            rebind(module, name, KvpoolBlockPool)
    for module_name, class_name, users in SUBCLASSES:
        module = modules[module_name]
        if isinstance(module, str):
            state.skipped[f"{module_name}.{class_name}"] = module
            continue
        cls = getattr(module, class_name)
        if original not in cls.__bases__:
            raise VllmMismatch(f"{module_name}.{class_name} no longer subclasses BlockPool")
        rebuilt = _rebase(cls, KvpoolBlockPool, original)
        rebind(module, class_name, rebuilt)
        for user_name in users:
            user = _import(user_name)
            if not isinstance(user, str) and getattr(user, class_name, None) is cls:
                rebind(user, class_name, rebuilt)
    _state = state
    return state


def uninstall() -> None:
    """Put vLLM's own classes back where :func:`install` replaced them."""
    global _state
    if _state is None:
        return
    for module, name, old in reversed(_state._undo):
        setattr(module, name, old)
    _state = None


def installed() -> bool:
    return _state is not None


def register() -> None:
    """vLLM's ``vllm.general_plugins`` entry point: install when ``KVPOOL_VLLM_PLUGIN=1``."""
    if os.environ.get(ENV_FLAG) == "1":
        install()
