"""The SwiGLU MLP of Llama-style models: ``(silu(x @ w_gate) * (x @ w_up)) @ w_down``."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def swiglu_mlp_kernel(x, w_gate, w_up, w_down):
    """``x`` ``[T, H]``, ``w_gate``/``w_up`` ``[H, I]``, ``w_down`` ``[I, H]`` -> ``[T, H]`` in ``x``'s
    dtype; H and I multiples of 128.

    Tokens go 128 to a tile. The gate and up projections contract H on the partitions
    (``x`` transposed by DMA, 128 x 128 blocks) into float32 PSUM, 512 intermediate columns at a time;
    the down projection contracts I the same way, the activations transposed on the Tensor Engine.
    """
    t_total, h = x.shape
    inter = w_gate.shape[1]
    assert w_gate.shape == (h, inter) and w_up.shape == (h, inter) and w_down.shape == (inter, h)
    assert h % 128 == 0 and inter % 128 == 0, "H and I must be multiples of 128"
    out = nl.ndarray((t_total, h), dtype=x.dtype, buffer=nl.shared_hbm)
    hb, ib = h // 128, inter // 128
    for t in nl.affine_range((t_total + 127) // 128):
        rows = min(128, t_total - t * 128)
        x_tile = nl.ndarray((128, h), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[0:rows], src=x[t * 128 : t * 128 + rows])
        # x^T blocks [h 128, tokens]: the stationary operand of the projections.
        x_t = nl.ndarray((128, hb, 128), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(hb):
            nisa.dma_transpose(dst=x_t[:, k, 0:rows], src=x_tile[0:rows, k * 128 : (k + 1) * 128])
        act = nl.ndarray((128, inter), dtype=x.dtype, buffer=nl.sbuf)
        for c in nl.affine_range((inter + 511) // 512):
            width = min(512, inter - c * 512)
            gate = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            up = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(hb):
                wg = nl.ndarray((128, 512), dtype=w_gate.dtype, buffer=nl.sbuf)
                wu = nl.ndarray((128, 512), dtype=w_up.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wg[:, 0:width], src=w_gate[k * 128 : (k + 1) * 128, c * 512 : c * 512 + width])
                nisa.dma_copy(dst=wu[:, 0:width], src=w_up[k * 128 : (k + 1) * 128, c * 512 : c * 512 + width])
                nisa.nc_matmul(dst=gate[0:rows, 0:width], stationary=x_t[:, k, 0:rows], moving=wg[:, 0:width])
                nisa.nc_matmul(dst=up[0:rows, 0:width], stationary=x_t[:, k, 0:rows], moving=wu[:, 0:width])
            silu = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=silu[0:rows, 0:width], op=nl.silu, data=gate[0:rows, 0:width])
            nisa.tensor_tensor(
                dst=act[0:rows, c * 512 : c * 512 + width],
                data1=silu[0:rows, 0:width],
                data2=up[0:rows, 0:width],
                op=nl.multiply,
            )
        # act^T blocks [i 128, tokens] for the down projection.
        act_t = nl.ndarray((128, ib, 128), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(ib):
            block = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=block[:, 0:rows], data=act[0:rows, k * 128 : (k + 1) * 128])
            nisa.tensor_copy(dst=act_t[:, k, 0:rows], src=block[:, 0:rows])
        for c in nl.affine_range((h + 511) // 512):
            width = min(512, h - c * 512)
            down = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(ib):
                wd = nl.ndarray((128, 512), dtype=w_down.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wd[:, 0:width], src=w_down[k * 128 : (k + 1) * 128, c * 512 : c * 512 + width])
                nisa.nc_matmul(dst=down[0:rows, 0:width], stationary=act_t[:, k, 0:rows], moving=wd[:, 0:width])
            result = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result[0:rows, 0:width], src=down[0:rows, 0:width])
            nisa.dma_copy(dst=out[t * 128 : t * 128 + rows, c * 512 : c * 512 + width], src=result[0:rows, 0:width])
    return out
