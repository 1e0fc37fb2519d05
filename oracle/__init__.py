"""kvpool.oracle -- drive any vLLM-API block pool with spec operations and compare."""

from .driver import Driver, ScriptedWatcher, WatcherAction, WatcherRaised, error_kind_of

__all__ = ["Driver", "ScriptedWatcher", "WatcherAction", "WatcherRaised", "error_kind_of"]
