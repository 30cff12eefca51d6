"""The distributed tests: a short two-process sample in the default run (``test_sample.py``), the
full suite in ``full/``, collected only by ``make test-distributed``
(``TORCH_NEURONX_DISTRIBUTED_FULL=1``), since its jobs take minutes."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("TORCH_NEURONX_DISTRIBUTED_FULL") == "1" else ["full"]
