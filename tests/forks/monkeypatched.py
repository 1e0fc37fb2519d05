"""Shape: a plugin that monkeypatches the host's pool class at import (no subclass of its own).

Seeded bug: the plugin wants one handle on "the" pool for its metrics, so its patched
``__init__`` stores each new pool on the *class*, and its patched
``get_num_free_blocks`` reads the free count from that handle instead of ``self``. With
one pool nothing shows; with two, every pool but the newest reports the newest one's
count. Found at ``exact`` with two or more pools (``result differs: value`` on
``get_num_free_blocks``); ``--max-pools 1`` hides it.
"""

from __future__ import annotations

from typing import Any

from . import shaped


class BlockPool(shaped.BlockPool):
    """The host's pool class, before the plugin patches it."""

    current: Any = None


_original_init = BlockPool.__init__


def _patched_init(self: BlockPool, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    BlockPool.current = self  # meant as "this pool": shared by every instance


def _patched_free_count(self: BlockPool) -> int:
    return int(BlockPool.current.free_block_queue.num_free_blocks)


BlockPool.__init__ = _patched_init  # type: ignore[method-assign]
BlockPool.get_num_free_blocks = _patched_free_count  # type: ignore[method-assign]
