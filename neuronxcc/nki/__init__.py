"""``neuronxcc.nki``: the legacy import path of :mod:`nki` (the same objects)."""

from __future__ import annotations

import sys

import nki as _nki
from nki import (
    Kernel,
    baremetal,
    benchmark,
    errors,
    isa,
    jit,
    language,
    simulate,
    simulate_kernel,
    tensor,
    trace,
    typing,
)

for _name, _module in (("language", language), ("isa", isa), ("typing", typing), ("errors", errors)):
    sys.modules[f"{__name__}.{_name}"] = _module
del _name, _module

__all__ = [
    "Kernel",
    "baremetal",
    "benchmark",
    "errors",
    "isa",
    "jit",
    "language",
    "simulate",
    "simulate_kernel",
    "tensor",
    "trace",
    "typing",
]
__version__ = _nki.__version__
