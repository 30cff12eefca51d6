"""Tensors a compiled function builds from Python data (``torch.tensor([...])``), which AOTAutograd
keeps as constants of the graph, against the CPU."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


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
