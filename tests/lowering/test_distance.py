"""Pairwise distances against the CPU (lowering/distance.py)."""

from __future__ import annotations

import pytest
import torch

import torch_neuronx


def _general(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape)


def _run(fn, *inputs):
    """fn on the CPU inputs and on their neuron copies (result copied back); no op may fall back."""
    expected = fn(*inputs)
    torch_neuronx.clear_op_tracking()
    actual = fn(*[t.to("neuron") for t in inputs]).cpu()
    assert torch_neuronx.get_fallback_ops() == {}
    return actual, expected


@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, float("inf")])
def test_cdist_pdist_match_cpu(p):
    x = _general(2, 5, 3)
    y = _general(2, 4, 3) + 1
    x[0, 0, 0] = y[0, 0, 0]  # one zero difference, which p = 0 does not count
    actual, expected = _run(lambda a, b: torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist"), x, y)
    torch.testing.assert_close(actual, expected)
    actual, expected = _run(lambda a: torch.pdist(a, p=p), x[0])
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_pdist_gradients_match_cpu(p):
    """Zero distances and zero differences have zero gradient (PyTorch's rules, not autodiff's NaN)."""
    x = _general(2, 5, 3)
    y = _general(2, 4, 3) + 1
    x[0, 0] = y[0, 0]
    x[1, 1, 0] = y[1, 2, 0]
    rows = x[0].clone()
    rows[3] = rows[1]
    grads = []
    torch_neuronx.clear_op_tracking()
    for device in ("cpu", "neuron"):
        a, b, c = (t.to(device).detach().requires_grad_() for t in (x, y, rows))
        torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist").pow(2).sum().backward()
        torch.pdist(c, p=p).pow(2).sum().backward()
        grads.append([t.grad.cpu() for t in (a, b, c)])
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-4)


def _scaled_minkowski(diff: torch.Tensor, p: float) -> torch.Tensor:
    """The p-norm over the last axis in float64 with the largest magnitude factored out: exact where
    |d| ** p leaves even float64's range."""
    magnitude = diff.double().abs()
    largest = magnitude.amax(-1, keepdim=True)
    return largest.squeeze(-1) * ((magnitude / largest) ** p).sum(-1) ** (1 / p)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 5.0])
@pytest.mark.parametrize("p", [50.0, 200.0])
def test_cdist_of_a_large_p_keeps_its_powers_in_range(p, scale):
    # 0.6 ** 200 is a subnormal XLA flushes (cdist gave 0 for 0.6, its gradient NaN); 5 ** 50
    # overflows (the CPU gives inf, and NaN gradients). The largest magnitude is factored out there.
    x, y = _general(6, 4) * scale, _general(5, 4) * scale + scale
    diff = x[:, None, :] - y[None, :, :]
    expected = _scaled_minkowski(diff, p)
    a = x.to("neuron").requires_grad_()
    distance = torch.cdist(a, y.to("neuron"), p=p)
    torch.testing.assert_close(distance.detach().cpu().double(), expected, rtol=1e-6, atol=0)
    distance.sum().backward()
    ratio = diff.double().abs() / expected[..., None]
    gradient = (diff.double().sign() * ratio ** (p - 1)).sum(1)
    torch.testing.assert_close(a.grad.cpu().double(), gradient, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(
        torch.pdist(x.to("neuron"), p=p).cpu().double(),
        _scaled_minkowski(x[torch.triu_indices(6, 6, 1)[0]] - x[torch.triu_indices(6, 6, 1)[1]], p),
        rtol=1e-6,
        atol=0,
    )


def test_cdist_gradient_of_an_empty_broadcast_is_zeros_of_x1():
    """The CPU's _cdist_backward returns zeros shaped like x1 itself when the broadcast batch is empty."""
    grads = []
    for device in ("cpu", "neuron"):
        x1 = torch.ones(3, 5, device=device, requires_grad=True)
        x2 = torch.ones(0, 4, 5, device=device, requires_grad=True)
        torch.cdist(x1, x2).sum().backward()
        grads.append(x1.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
