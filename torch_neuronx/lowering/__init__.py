"""ATen -> JAX lowerings, one module per op family, registered against exact overloads.

See :mod:`torch_neuronx.lowering.registry` for how a lowering is written and what the registry does
for it (promotion, result dtypes, scalars, random keys, device checks).
"""

from __future__ import annotations

import importlib

FAMILIES = (
    "pointwise",
    "reduction",
    "linalg",
    "factorization",
    "ldl",
    "distance",
    "shape",
    "creation",
    "random",
    "indexing",
    "sorting",
    "activation",
    "normalization",
    "convolution",
    "pooling",
    "sampling",
    "attention",
    "transformer",
    "loss",
    "foreach",
    "optimizer",
    "amp",
    "recurrent",
    "fft",
    "special",
    "polynomials",
    "assertions",
)


def load_lowerings() -> None:
    """Imports every family module, which registers its lowerings."""
    for family in FAMILIES:
        importlib.import_module(f"torch_neuronx.lowering.{family}")
