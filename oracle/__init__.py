"""kvpool.oracle -- drive any vLLM-API block pool with spec operations and compare.

The user-facing entry points are loaded on first use: ``check`` (fail a test unless a
pool conforms), ``conform`` (search, returning a report), ``record`` (log a live
pool's calls for ``kvpool check-log``), ``check_log``, ``resolve`` (a target string).
"""

from typing import Any

from .driver import Driver, ScriptedWatcher, WatcherAction, WatcherRaised, error_kind_of

_LAZY = {
    "check": ("pytest_plugin", "check"),
    "NonConformance": ("pytest_plugin", "NonConformance"),
    "conform": ("conformance", "conform"),
    "replay": ("tracereplay", "replay"),
    "SavedTrace": ("traceformat", "SavedTrace"),
    "record": ("tracelog", "record"),
    "check_log": ("tracelog", "check_log"),
    "resolve": ("targets", "resolve"),
    "Target": ("target_base", "Target"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Driver",
    "NonConformance",
    "SavedTrace",
    "ScriptedWatcher",
    "Target",
    "WatcherAction",
    "WatcherRaised",
    "check",
    "check_log",
    "conform",
    "error_kind_of",
    "record",
    "replay",
    "resolve",
]
