"""Discrete Fourier transforms: the ATen FFT primitives (``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``)."""

from __future__ import annotations
