"""Random ops, from the per-core generator's (seed, offset) (decision 11).

Values follow each op's distribution, drawn with JAX's counter-based PRNG keyed by the generator's
state, so they are reproducible under ``torch.manual_seed`` but differ from the CPU's mt19937 stream
(as CUDA's Philox stream differs).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


def _sample_dtype(dtype):
    return jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype


@lowering(aten.uniform.default, random=True)
def uniform(self, from_=0.0, to=1.0, *, generator=None, key):
    """torch.Tensor.uniform_: U[from, to)."""
    sample = jax.random.uniform(key, self.shape, _sample_dtype(self.dtype))
    return from_ + sample * (to - from_)


@lowering(aten.normal_functional.default, aten.normal_.default, random=True)
def normal(self, mean=0.0, std=1.0, *, generator=None, key):
    """torch.Tensor.normal_: N(mean, std**2)."""
    return mean + std * jax.random.normal(key, self.shape, _sample_dtype(self.dtype))
