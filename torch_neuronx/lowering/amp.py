"""Automatic mixed precision: the two kernels torch.amp.GradScaler("neuron") runs, with CUDA's semantics.

- ``_amp_foreach_non_finite_check_and_unscale_``: every gradient is multiplied by ``inv_scale`` (in
  float32 for 16-bit gradients) and ``found_inf`` becomes 1.0 when any gradient holds an inf or NaN
  (it is left as it was otherwise), all in one executable.
- ``_amp_update_scale_``: after an overflow the scale shrinks by ``backoff_factor`` and the growth
  tracker resets; after ``growth_interval`` clean steps in a row the scale grows by ``growth_factor``
  (unless that would overflow float32) and the tracker resets.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from torch_neuronx.lowering.promotion import opmath_dtype
from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


@lowering(aten._amp_foreach_non_finite_check_and_unscale.default)
def amp_foreach_non_finite_check_and_unscale(self, found_inf, inv_scale):
    """torch._amp_foreach_non_finite_check_and_unscale_: (grads * inv_scale, found_inf set to 1.0 if
    any gradient is not finite)."""
    factor = inv_scale.reshape(())
    nonfinite = jnp.zeros((), jnp.bool_)
    unscaled = []
    for grad in self:
        nonfinite = nonfinite | jnp.any(~jnp.isfinite(grad))
        unscaled.append(grad.astype(opmath_dtype(grad.dtype)) * factor.astype(opmath_dtype(grad.dtype)))
    return unscaled, jnp.where(nonfinite, jnp.ones_like(found_inf), found_inf)


@lowering(aten._amp_update_scale.default, static=("growth_interval",))
def amp_update_scale(self, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor, growth_interval):
    """torch._amp_update_scale_: the new (scale, growth_tracker) after one step, as CUDA computes them."""
    found = found_inf.reshape(self.shape) != 0
    successful = growth_tracker + 1
    grow = successful == growth_interval
    grown = self * jnp.asarray(scale_growth_factor, self.dtype)
    scale = jnp.where(
        found,
        self * jnp.asarray(scale_backoff_factor, self.dtype),
        jnp.where(grow & jnp.isfinite(grown), grown, self),
    )
    tracker = jnp.where(found | grow, jnp.zeros_like(growth_tracker), successful)
    return scale, tracker
