"""tests/vllm: vLLM 0.33.0's own KVCacheManager and Scheduler on vLLM's pool and on kvpool's.

They need vLLM and torch, so they run only in the vLLM venv, by ``make test-vllm`` (which
sets KVPOOL_VLLM_TESTS=1); ``make test`` does not collect them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if os.environ.get("KVPOOL_VLLM_TESTS") != "1":
    collect_ignore_glob = ["*.py"]
else:
    sys.path.insert(0, str(Path(__file__).parent))
