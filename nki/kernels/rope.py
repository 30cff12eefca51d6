"""Rotary position embedding, the rotate-half form (Llama, GPT-NeoX)."""

from __future__ import annotations

import nki
import nki.language as nl


@nki.jit
def rope_kernel(x, cos, sin):
    """Rotates ``x`` ``[N, D]`` by the angles whose cosines and sines are ``cos``/``sin`` ``[N, D/2]``:
    with ``x1, x2`` the halves of each row, ``out = [x1 cos - x2 sin, x2 cos + x1 sin]`` (float32 math,
    ``x``'s dtype out). Rows go 128 to a tile; written with ``nl`` index expressions and masks (the
    last tile masks the rows past ``N``)."""
    n, d = x.shape
    half = d // 2
    assert d % 2 == 0 and cos.shape == (n, half) and sin.shape == (n, half), "cos/sin must be [N, D/2]"
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_h = nl.arange(half)[None, :]
    for t in nl.affine_range((n + 127) // 128):
        rows = t * 128 + i_p
        inside = rows < n
        x1 = nl.load(x[rows, i_h], mask=inside)
        x2 = nl.load(x[rows, half + i_h], mask=inside)
        c = nl.load(cos[rows, i_h], mask=inside)
        s = nl.load(sin[rows, i_h], mask=inside)
        first = nl.subtract(nl.multiply(x1, c, dtype=nl.float32), nl.multiply(x2, s, dtype=nl.float32), mask=inside)
        second = nl.add(nl.multiply(x2, c, dtype=nl.float32), nl.multiply(x1, s, dtype=nl.float32), mask=inside)
        nl.store(out[rows, i_h], value=first, mask=inside)
        nl.store(out[rows, half + i_h], value=second, mask=inside)
    return out
