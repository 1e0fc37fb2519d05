# A synthetic "release" of the 0.8 epoch (tuple hashes), written for tests/test_releases.py.
from typing import NamedTuple

import torch  # noqa: F401  (not installed: the loader must stand in for it)
from vllm.config import VllmConfig  # noqa: F401
from vllm.utils import cdiv, sha256  # noqa: F401


class BlockHashType(NamedTuple):
    hash_value: bytes
    token_ids: tuple[int, ...]
    extra_keys: object = None
