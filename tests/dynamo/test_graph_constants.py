"""Constants of a compiled graph against the CPU: tensors a compiled function builds from Python data
(``torch.tensor([...])``), which AOTAutograd keeps as attributes of the graph, and Python scalars
the graph holds as op arguments."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch._dynamo


def _scaled_and_extended(x: torch.Tensor) -> torch.Tensor:
    # an empty constant (what transformers' KV cache starts from) and a constant with values
    empty = torch.tensor([], dtype=x.dtype, device=x.device)
    scale = torch.tensor([1.5, -2.0, 0.25], dtype=x.dtype, device=x.device)
    return torch.cat([empty, x * scale, scale])


def test_constant_tensors_in_a_forward_graph_match_cpu():
    x = torch.randn(3)
    got = torch.compile(_scaled_and_extended, backend="neuron", fullgraph=True)(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), _scaled_and_extended(x))


def test_constant_tensors_in_a_graph_with_a_backward_match_cpu():
    x = torch.randn(3, requires_grad=True)
    x_neuron = x.detach().to("neuron").requires_grad_()
    got = torch.compile(_scaled_and_extended, backend="neuron", fullgraph=True)(x_neuron)
    got.square().sum().backward()
    _scaled_and_extended(x).square().sum().backward()
    torch.testing.assert_close(x_neuron.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype, value", [(torch.bool, True), (torch.int64, 3), (torch.float32, 2.5)])
def test_scatter_of_a_python_scalar_matches_cpu(dtype, value):
    # a mask built by scattering True (axk2's attention), held as a constant by the graph
    def scattered(x, index):
        return x.scatter(1, index, value)

    x = torch.zeros(3, 4, dtype=dtype)
    index = torch.tensor([[1], [2], [0]])
    got = torch.compile(scattered, backend="neuron", fullgraph=True)(x.to("neuron"), index.to("neuron"))
    torch.testing.assert_close(got.cpu(), scattered(x, index))


def _shifted_scores_masked_in_place(q: torch.Tensor, r: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # funnel's relative attention: scores re-viewed, sliced, then masked in place through the slice
    scores = torch.einsum("binh,tnh->bnit", q, r)
    batch, heads, length, relative = scores.shape
    scores = scores.reshape(batch, heads, relative, length)[:, :, 1:, :]
    scores = scores.reshape(batch, heads, length, relative - 1)[..., :length]
    scores *= mask
    return scores


def test_in_place_write_through_a_slice_of_a_strided_view_matches_cpu():
    q, r = torch.randn(2, 8, 4, 4), torch.randn(17, 4, 4)
    mask = torch.randn(8, 8)
    neuron = [t.to("neuron") for t in (q, r, mask)]
    got = torch.compile(_shifted_scores_masked_in_place, backend="neuron", fullgraph=True)(*neuron)
    torch.testing.assert_close(got.cpu(), _shifted_scores_masked_in_place(q, r, mask), atol=1e-5, rtol=1e-5)


def _scaled_by_numpy(x: torch.Tensor) -> torch.Tensor:
    # CTRL's embedding scale: Dynamo computes np.sqrt(int) as a 0-d float64 CPU tensor, a scalar to
    # the float32 product on neuron, as in eager
    y = x * 2
    y *= np.sqrt(8)
    return y


def test_numpy_scalar_computed_on_the_cpu_in_float64_scales_a_neuron_tensor_as_in_eager():
    x = torch.randn(3)
    got = torch.compile(_scaled_by_numpy, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), _scaled_by_numpy(x))
    assert got.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.uint8, torch.uint64])
def test_a_python_int_only_uint64_holds_is_a_graph_constant(dtype):
    # JAX has no weak type for ints in [2**63, 2**64): "Python int too large to convert to int64".
    # Eager passes them as numpy.uint64; compiled graphs now do too (int64 wraps, as on the CPU).
    def shifted(x):
        return x * 0 + (2**63 + 5)

    x = torch.tensor([1, 2], dtype=dtype)
    expected = torch.full((2,), 2**63 + 5, dtype=dtype) if dtype == torch.uint64 else shifted(x)
    actual = torch.compile(shifted, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
