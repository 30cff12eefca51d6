"""Discrete Fourier transforms: the ATen FFT primitives (``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``).

Every ``torch.fft`` function is a CompositeImplicitAutograd op that PyTorch reduces to these three
primitives (``aten/src/ATen/native/SpectralOps.cpp``): it promotes integer inputs to the default
float dtype, pads or trims to ``n``/``s``, wraps ``dim``, and conjugates where the transform needs it
(``ifft`` of a real input is ``conj(r2c)``; ``hfft`` is ``c2r`` of the conjugate). The primitives take

- ``normalization``: ``fft_norm_mode`` (0: none, 1: by 1/sqrt(n), 2: by 1/n), where n is the number
  of points of the transform (the output's signal size for ``c2r``);
- ``r2c``: a forward transform of a real input, one-sided (the last of ``dim`` keeps n // 2 + 1
  frequencies, as ``rfftn``) or full;
- ``c2c``: ``forward`` chooses the sign of the exponent, never the scale;
- ``c2r``: a backward transform of a Hermitian half-spectrum to ``last_dim_size`` real points on the
  last of ``dim`` (the imaginary parts of the self-conjugate terms are ignored, as pocketfft does).

JAX's ``jnp.fft`` computes them with XLA's FFT (unnormalised, then scaled here). XLA's CPU FFT, like
PyTorch's CPU one (pocketfft), works in float32/complex64 (and 64-bit, which neuron does not hold);
float16 and complex32 inputs compute in float32/complex64 and round to the half-precision result
CUDA's primitives give; bfloat16 raises, as cuFFT has no bfloat16 transforms.

``conj_physical`` lives here too: ``ihfft`` and the ``out=`` form of ``ifft`` of a real input end in
it, and PyTorch's decompositions (``vdot``) use its prim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


def _full_precision(self: jax.Array, op: str) -> jax.Array:
    """The input in the precision the transform computes in. float16 computes in float32 (complex32
    arrives as complex64) and the engine rounds the result to the float16/complex32 PyTorch's meta
    kernel gives, as CUDA's primitives take half precision (``torch.stft`` of float16 calls them
    directly; eager/half_fft.py covers the ``torch.fft`` functions); any size computes, where cuFFT
    takes only powers of two in half precision. bfloat16 raises: cuFFT has no bfloat16 transforms.
    """
    if jnp.dtype(self.dtype) == jnp.dtype(jnp.bfloat16):
        raise RuntimeError(
            f"Unsupported dtype BFloat16: aten::{op} on neuron computes FFTs in float32/complex64 (float16 "
            "too, as CUDA does); convert the input with .float() (or .to(torch.complex64)) first"
        )
    return self.astype(jnp.float32) if jnp.dtype(self.dtype) == jnp.dtype(jnp.float16) else self


def _scale(value: jax.Array, normalization: int, points: int) -> jax.Array:
    """Applies ``fft_norm_mode`` to an unnormalised transform of ``points`` points."""
    if normalization == 0 or points == 0:
        return value
    if normalization == 1:
        return value * (1.0 / math.sqrt(points))
    if normalization == 2:
        return value * (1.0 / points)
    raise ValueError(f"aten FFT primitive on neuron: normalization {normalization} is not 0, 1 or 2")


def _points(shape: Sequence[int], dim: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dim)


@lowering(aten._fft_r2c.default)
def _fft_r2c(self: jax.Array, dim: list[int], normalization: int, onesided: bool) -> jax.Array:
    """Forward FFT of a real input over ``dim``; one-sided halves the last of ``dim`` (torch.fft.rfftn)."""
    self = _full_precision(self, "_fft_r2c")
    if onesided:
        value = jnp.fft.rfftn(self, axes=dim, norm="backward")
    else:
        value = jnp.fft.fftn(self.astype(jnp.complex64), axes=dim, norm="backward")
    return _scale(value, normalization, _points(self.shape, dim))


@lowering(aten._fft_c2c.default)
def _fft_c2c(self: jax.Array, dim: list[int], normalization: int, forward: bool) -> jax.Array:
    """Complex FFT over ``dim``: exp(-2 pi i ...) when ``forward``, exp(+2 pi i ...) otherwise, both unscaled
    before ``normalization`` (torch.fft.fftn/ifftn pass the scale through it)."""
    self = _full_precision(self, "_fft_c2c")
    if not dim:
        return self
    if forward:
        transform = jnp.fft.fftn(self, axes=dim, norm="backward")
    else:
        transform = jnp.fft.ifftn(self, axes=dim, norm="forward")  # "forward" leaves the inverse unscaled
    return _scale(transform, normalization, _points(self.shape, dim))


@lowering(aten._fft_c2r.default)
def _fft_c2r(self: jax.Array, dim: list[int], normalization: int, last_dim_size: int) -> jax.Array:
    """Backward FFT of a Hermitian half-spectrum over ``dim`` to ``last_dim_size`` real points on the
    last of ``dim`` (torch.fft.irfftn)."""
    self = _full_precision(self, "_fft_c2r")
    sizes = [self.shape[d] for d in dim[:-1]] + [last_dim_size]
    value = jnp.fft.irfftn(self, s=sizes, axes=dim, norm="forward")
    return _scale(value, normalization, math.prod(sizes))


@lowering(aten._conj_physical.default, torch.ops.prims.conj_physical.default)
def _conj_physical(self: jax.Array) -> jax.Array:
    """torch.conj_physical: the complex conjugate, computed (not a view with the conjugate bit); real inputs
    are returned as they are. The prim is what PyTorch's decompositions (vdot's) produce."""
    return jnp.conj(self)
