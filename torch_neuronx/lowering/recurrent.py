"""Recurrent cells: the fused LSTM and GRU cell kernels PyTorch calls on every non-CPU device.

nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell compute their matrix products as ordinary ops and hand
the gate pre-activations to ``aten::_thnn_fused_lstm_cell`` / ``aten::_thnn_fused_gru_cell``, which
PyTorch implements only for CUDA (``aten/src/ATen/native/cuda/RNN.cu``). The lowerings follow those
kernels, including the workspace each forward saves for its backward (same shape, same layout):

- LSTM: [batch, 4 * hidden], the activated gates i, f, g, o.
- GRU: [batch, 5 * hidden], the activated gates r, z, n, then hx and the hidden new-gate
  pre-activation (hidden_gates[n] + hidden_bias[n]).

16-bit inputs compute in float32 (PyTorch DEFAULT promotion, as CUDA computes in its accumulate
type) and round once at the end. Gradients of undefined outputs count as zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from torch_neuronx._compat import meta_kernels
from torch_neuronx.lowering.registry import Promotion, lowering

aten = torch.ops.aten


def _with_bias(gates: jax.Array, bias: jax.Array | None) -> jax.Array:
    return gates if bias is None else gates + bias


@lowering(aten._thnn_fused_lstm_cell.default, promotion=Promotion.DEFAULT)
def thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """The LSTM cell of nn.LSTM/nn.LSTMCell: gates = input_gates + hidden_gates (+ both biases), split
    into i, f, g, o; cy = sigmoid(f) * cx + sigmoid(i) * tanh(g); hy = sigmoid(o) * tanh(cy).
    Returns (hy, cy, workspace)."""
    gates = _with_bias(_with_bias(input_gates + hidden_gates, input_bias), hidden_bias)
    i, f, g, o = jnp.split(gates, 4, axis=1)
    i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
    cy = f * cx + i * g
    return o * jnp.tanh(cy), cy, jnp.concatenate([i, f, g, o], axis=1)


@lowering(aten._thnn_fused_lstm_cell_backward_impl.default, promotion=Promotion.DEFAULT)
def thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """Gradient of _thnn_fused_lstm_cell: (grad of the gate pre-activations [batch, 4 * hidden],
    grad of cx, grad of the bias = the gate gradient summed over the batch, or None without bias).
    Both output gradients undefined give undefined results, as on CUDA."""
    if grad_hy is None and grad_cy is None:
        return None, None, None
    i, f, g, o = jnp.split(workspace, 4, axis=1)
    tanh_cy = jnp.tanh(cy)
    grad_hy = jnp.zeros_like(cy) if grad_hy is None else grad_hy
    grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy
    grad_gates = jnp.concatenate(
        [
            grad_c * g * i * (1 - i),
            grad_c * cx * f * (1 - f),
            grad_c * i * (1 - g * g),
            grad_hy * tanh_cy * o * (1 - o),
        ],
        axis=1,
    )
    return grad_gates, grad_c * f, jnp.sum(grad_gates, axis=0) if has_bias else None


@lowering(aten._thnn_fused_gru_cell.default, promotion=Promotion.DEFAULT)
def thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """The GRU cell of nn.GRU/nn.GRUCell: with both gate inputs (plus their biases) split into r, z, n,
    r = sigmoid(ir + hr), z = sigmoid(iz + hz), n = tanh(in + r * hn), hy = n + z * (hx - n).
    Returns (hy, workspace)."""
    input_r, input_z, input_n = jnp.split(_with_bias(input_gates, input_bias), 3, axis=1)
    hidden_r, hidden_z, hidden_n = jnp.split(_with_bias(hidden_gates, hidden_bias), 3, axis=1)
    r = jax.nn.sigmoid(input_r + hidden_r)
    z = jax.nn.sigmoid(input_z + hidden_z)
    n = jnp.tanh(input_n + r * hidden_n)
    return n + z * (hx - n), jnp.concatenate([r, z, n, hx, hidden_n], axis=1)


@lowering(aten._thnn_fused_gru_cell_backward.default, promotion=Promotion.DEFAULT)
def thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias):
    """Gradient of _thnn_fused_gru_cell: (grad of input_gates, grad of hidden_gates, grad of hx,
    grad of input_bias, grad of hidden_bias); the bias gradients are the gate gradients summed over
    the batch, or None without bias."""
    r, z, n, hx, hidden_n = jnp.split(workspace, meta_kernels.GRU_WORKSPACE_MULTIPLIER, axis=1)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_r = grad_n * hidden_n * r * (1 - r)
    grad_input_gates = jnp.concatenate([grad_r, grad_z, grad_n], axis=1)
    grad_hidden_gates = jnp.concatenate([grad_r, grad_z, grad_n * r], axis=1)
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hy * z, None, None
    return (
        grad_input_gates,
        grad_hidden_gates,
        grad_hy * z,
        jnp.sum(grad_input_gates, axis=0),
        jnp.sum(grad_hidden_gates, axis=0),
    )
