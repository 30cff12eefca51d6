"""RMSNorm: ``y = x / sqrt(mean(x ** 2, -1) + eps) * weight`` over the last dimension."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rms_norm_kernel(x, weight, eps=1e-6):
    """RMSNorm of the rows of ``x`` ``[N, H]`` (any float dtype) scaled by ``weight`` ``[H]``; returns
    ``[N, H]`` in ``x``'s dtype. Rows go 128 to a tile (the partitions); the sum of squares is the
    Scalar Engine's reduction of ``square`` and the normalisation a per-partition ``tensor_scalar``,
    both in float32. ``H`` is limited by SBUF (a float32 row per partition)."""
    n, h = x.shape
    assert weight.shape == (h,), f"weight must be [{h}], got {list(weight.shape)}"
    out = nl.ndarray((n, h), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    weight_row = nl.ndarray((1, h), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=weight_row, src=weight.reshape((1, h)))
    weights = nl.broadcast_to(weight_row, (pmax, h))
    for t in nl.affine_range((n + pmax - 1) // pmax):
        rows = min(pmax, n - t * pmax)
        tile = nl.ndarray((pmax, h), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows], src=x[t * pmax : t * pmax + rows])
        squares = nl.ndarray((pmax, h), dtype=nl.float32, buffer=nl.sbuf)
        sums = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=squares[0:rows],
            op=nl.square,
            data=tile[0:rows],
            reduce_op=nl.add,
            reduce_res=sums[0:rows],
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inverse = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=inverse[0:rows], data=sums[0:rows], op0=nl.multiply, operand0=1.0 / h, op1=nl.add, operand1=eps
        )
        nisa.activation(dst=inverse[0:rows], op=nl.rsqrt, data=inverse[0:rows])
        normed = nl.ndarray((pmax, h), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed[0:rows], data=tile[0:rows], op0=nl.multiply, operand0=inverse[0:rows])
        result = nl.ndarray((pmax, h), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=result[0:rows], data1=normed[0:rows], data2=weights[0:rows], op=nl.multiply)
        nisa.dma_copy(dst=out[t * pmax : t * pmax + rows], src=result[0:rows])
    return out
