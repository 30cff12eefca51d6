"""Flash attention: ``softmax(scale * q k^T [+ causal mask]) v`` without materialising the scores.

Layouts: ``q`` ``[B * Hq, S, D]``, ``k``/``v`` ``[B * Hkv, S, D]`` (heads flattened into the first
dimension, batch-major), with ``Hq`` a multiple of ``Hkv`` (grouped-query attention: query head
``n`` reads key/value head ``n // (Hq / Hkv)``); ``S`` a multiple of 128 and ``D <= 128``.

The forward pass (:func:`flash_fwd_kernel`, one program per query head) runs the online softmax
over 128-key tiles: a running row maximum ``m`` and sum ``l`` rescale the accumulated output, so
each tile's scores are used once. It returns the output and the log-sum-exp ``m + log(l)`` per query,
which the backward pass (:func:`flash_bwd_kernel`, one program per key/value head) uses to recompute
the probabilities tile by tile (FlashAttention-2's backward). Matmuls run on the Tensor Engine in
the inputs' dtype with float32 accumulation; the softmax statistics are float32.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

#: The score of a masked-out position (finite, so that exp() of it is 0 without inf arithmetic).
MASKED = -3.0e38


def _scores(q_t, k_t, scale, causal, diagonal):
    """``scale * q k^T`` of one 128 x 128 tile (float32 SBUF), the upper triangle masked on the
    diagonal tile of a causal attention."""
    raw = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=raw, stationary=q_t, moving=k_t)
    scores = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=scores, op=nl.copy, data=raw, scale=float(scale))
    if causal and diagonal:
        # keep key <= query: the partition index minus the free index is >= 0
        nisa.affine_select(
            dst=scores,
            pattern=[[-1, 128]],
            channel_multiplier=1,
            on_true_tile=scores,
            on_false_value=MASKED,
            cmp_op=nl.greater_equal,
        )
    return scores


def _transposed(tile, dtype):
    """A 128 x 128 SBUF tile transposed on the Tensor Engine, in ``dtype``."""
    block = nl.ndarray((128, 128), dtype=tile.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=block, data=tile)
    result = nl.ndarray((128, 128), dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result, src=block)
    return result


@nki.jit
def flash_fwd_kernel(q, k, v, scale=1.0, causal=False):
    """Attention forward for one query head per program (launch ``flash_fwd_kernel[q.shape[0]]``).

    Returns:
        ``out`` ``[B * Hq, S, D]`` in ``q``'s dtype and ``lse`` ``[B * Hq, S]`` float32.
    """
    heads, seq, d = q.shape
    kv_heads = k.shape[0]
    assert k.shape == v.shape == (kv_heads, seq, d), "k and v must be [B * Hkv, S, D] with q's S and D"
    assert heads % kv_heads == 0 and seq % 128 == 0 and d <= 128
    out = nl.ndarray((heads, seq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    lse = nl.ndarray((heads, seq), dtype=nl.float32, buffer=nl.shared_hbm)
    n = nl.program_id(0)
    kv = n // (heads // kv_heads)
    tiles = seq // 128
    for i in nl.affine_range(tiles):
        q_t = nl.load_transpose2d(q[n, i * 128 : (i + 1) * 128, :])
        row_max = nl.full((128, 1), MASKED, dtype=nl.float32)
        row_sum = nl.zeros((128, 1), dtype=nl.float32)
        acc = nl.zeros((128, d), dtype=nl.float32)
        for j in nl.sequential_range(i + 1 if causal else tiles):
            k_t = nl.load_transpose2d(k[kv, j * 128 : (j + 1) * 128, :])
            scores = _scores(q_t, k_t, scale, causal, i == j)
            tile_max = nisa.tensor_reduce(op=nl.max, data=scores, axis=1)
            new_max = nl.maximum(row_max, tile_max)
            neg_max = nisa.tensor_scalar(data=new_max, op0=nl.multiply, operand0=-1.0)
            probs = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            tile_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(
                dst=probs,
                op=nl.exp,
                data=scores,
                bias=neg_max,
                reduce_op=nl.add,
                reduce_res=tile_sum,
                reduce_cmd=nisa.reduce_cmd.reset_reduce,
            )
            alpha = nisa.activation(op=nl.exp, data=row_max, bias=neg_max)
            row_sum = nl.add(nisa.tensor_scalar(data=row_sum, op0=nl.multiply, operand0=alpha), tile_sum)
            v_tile = nl.load(v[kv, j * 128 : (j + 1) * 128, :])
            probs_t = _transposed(probs, v.dtype)
            pv = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=pv, stationary=probs_t, moving=v_tile)
            acc = nl.add(nisa.tensor_scalar(data=acc, op0=nl.multiply, operand0=alpha), pv)
            row_max = new_max
        inverse = nisa.reciprocal(data=row_sum)
        result = nisa.tensor_scalar(data=acc, op0=nl.multiply, operand0=inverse, dtype=q.dtype)
        nl.store(out[n, i * 128 : (i + 1) * 128, :], value=result)
        log_sum = nl.add(row_max, nl.log(row_sum))
        nl.store(lse[n, i * 128 : (i + 1) * 128], value=log_sum)
    return out, lse


@nki.jit
def flash_bwd_kernel(q, k, v, out, grad_out, lse, scale=1.0, causal=False):
    """Attention backward for one key/value head per program (launch
    ``flash_bwd_kernel[k.shape[0]]``), summing over the query heads of its group.

    Returns:
        ``grad_q`` ``[B * Hq, S, D]`` in ``q``'s dtype, ``grad_k`` and ``grad_v`` ``[B * Hkv, S, D]``
        in ``k``'s dtype.
    """
    heads, seq, d = q.shape
    kv_heads = k.shape[0]
    group = heads // kv_heads
    tiles = seq // 128
    grad_q = nl.ndarray((heads, seq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    grad_k = nl.ndarray((kv_heads, seq, d), dtype=k.dtype, buffer=nl.shared_hbm)
    grad_v = nl.ndarray((kv_heads, seq, d), dtype=v.dtype, buffer=nl.shared_hbm)
    kv = nl.program_id(0)
    dk_acc = nl.zeros((128, tiles, d), dtype=nl.float32)
    dv_acc = nl.zeros((128, tiles, d), dtype=nl.float32)
    for g in nl.sequential_range(group):
        n = kv * group + g
        dq_acc = nl.zeros((128, tiles, d), dtype=nl.float32)
        for j in nl.sequential_range(tiles):
            k_t = nl.load_transpose2d(k[kv, j * 128 : (j + 1) * 128, :])
            v_t = nl.load_transpose2d(v[kv, j * 128 : (j + 1) * 128, :])
            k_tile = nl.load(k[kv, j * 128 : (j + 1) * 128, :])
            for i in nl.sequential_range(j if causal else 0, tiles):
                rows = slice(i * 128, (i + 1) * 128)
                q_t = nl.load_transpose2d(q[n, rows, :])
                q_tile = nl.load(q[n, rows, :])
                do_t = nl.load_transpose2d(grad_out[n, rows, :])
                do_tile = nl.load(grad_out[n, rows, :])
                # D_i = rowsum(dO * O), and -lse for the probabilities
                delta = nisa.tensor_reduce(
                    op=nl.add, data=nl.multiply(do_tile, nl.load(out[n, rows, :]), dtype=nl.float32), axis=1
                )
                neg_lse = nl.multiply(nl.load(lse[n, rows]), -1.0)
                scores = _scores(q_t, k_t, scale, causal, i == j)
                probs = nisa.activation(op=nl.exp, data=scores, bias=neg_lse)
                probs_mm = nisa.tensor_copy(src=probs, dtype=q.dtype)
                dv = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=dv, stationary=probs_mm, moving=do_tile)
                nisa.tensor_tensor(dst=dv_acc[:, j, :], data1=dv_acc[:, j, :], data2=dv, op=nl.add)
                dp = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=dp, stationary=do_t, moving=v_t)
                ds = nl.multiply(nisa.tensor_scalar(data=dp, op0=nl.subtract, operand0=delta), probs, dtype=q.dtype)
                dk = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=dk, stationary=ds, moving=q_tile)
                nisa.tensor_tensor(
                    dst=dk_acc[:, j, :], data1=dk_acc[:, j, :], data2=nl.multiply(dk, float(scale)), op=nl.add
                )
                ds_t = _transposed(ds, q.dtype)
                dq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=dq, stationary=ds_t, moving=k_tile)
                nisa.tensor_tensor(
                    dst=dq_acc[:, i, :], data1=dq_acc[:, i, :], data2=nl.multiply(dq, float(scale)), op=nl.add
                )
        for i in nl.affine_range(tiles):
            nl.store(grad_q[n, i * 128 : (i + 1) * 128, :], value=dq_acc[:, i, :])
    for j in nl.affine_range(tiles):
        nl.store(grad_k[kv, j * 128 : (j + 1) * 128, :], value=dk_acc[:, j, :])
        nl.store(grad_v[kv, j * 128 : (j + 1) * 128, :], value=dv_acc[:, j, :])
    return grad_q, grad_k, grad_v
