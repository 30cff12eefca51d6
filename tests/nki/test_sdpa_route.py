"""``TORCH_NEURONX_ENABLE_NKI_SDPA``: ``F.scaled_dot_product_attention`` on the flash kernels in
eager and compiled code, forward and backward, against PyTorch's attention on the CPU; calls the
kernels do not take keep the default lowering. Shapes are ones no other test uses, so no executable
built before the route is reused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from nki.kernels import sdpa
from nki.kernels.flash_attention import flash_bwd_kernel, flash_fwd_kernel
from torch_neuronx.lowering import registry


@pytest.fixture
def routed():
    torch.zeros(1, device="neuron")  # the device's start registers the default lowerings first
    saved = {op: registry.LOWERINGS[op] for op in (sdpa._FORWARD, sdpa._BACKWARD)}
    sdpa.route_sdpa()
    yield
    registry.LOWERINGS.update(saved)
    sdpa._default.clear()


def _traces() -> tuple[int, int]:
    return len(flash_fwd_kernel.traces.entries), len(flash_bwd_kernel.traces.entries)


def _attention(fn, q, k, v, *args, **kwargs):
    """fn's output and the gradients of q, k and v for a fixed upstream gradient."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = fn(*leaves, *args, **kwargs)
    out.backward(torch.ones_like(out).mul_(0.5).to(out.device))
    return out.detach().cpu(), [t.grad.cpu() for t in leaves]


@pytest.mark.parametrize(
    ("heads", "kv_heads", "length", "dim", "causal", "dtype"),
    [
        (4, 2, 256, 24, True, torch.float32),  # grouped-query attention, two key tiles
        (2, 2, 128, 56, False, torch.bfloat16),
    ],
)
def test_eager_attention_runs_the_flash_kernels(routed, heads, kv_heads, length, dim, causal, dtype):
    torch.manual_seed(0)
    q = torch.randn(2, heads, length, dim, dtype=dtype)
    k, v = (torch.randn(2, kv_heads, length, dim, dtype=dtype) for _ in range(2))
    gqa = {"enable_gqa": kv_heads != heads}
    before = _traces()
    device_qkv = (t.to("neuron") for t in (q, k, v))
    out, grads = _attention(F.scaled_dot_product_attention, *device_qkv, is_causal=causal, **gqa)
    assert _traces() == (before[0] + 1, before[1] + 1)
    expected, expected_grads = _attention(F.scaled_dot_product_attention, q, k, v, is_causal=causal, **gqa)
    tolerance = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, expected, **tolerance)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, **tolerance)


def test_compiled_attention_runs_the_flash_kernels(routed):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 384, 16) for _ in range(3))
    compiled = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend="neuron")
    before = _traces()
    out, grads = _attention(compiled, *(t.to("neuron") for t in (q, k, v)))
    assert _traces() == (before[0] + 1, before[1] + 1)
    expected, expected_grads = _attention(F.scaled_dot_product_attention, q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad)


def test_calls_the_kernels_do_not_take_keep_the_default_lowering(routed):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 128, 8) for _ in range(3))
    mask = torch.rand(128, 128) > 0.3
    before = _traces()
    out, grads = _attention(F.scaled_dot_product_attention, *(t.to("neuron") for t in (q, k, v, mask)))
    assert _traces() == before
    expected, expected_grads = _attention(F.scaled_dot_product_attention, q, k, v, mask)
    torch.testing.assert_close(out, expected)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad)


def test_the_environment_variable_routes_attention_when_the_device_starts():
    code = (
        "import torch, torch.nn.functional as F\n"
        "from nki.kernels.flash_attention import flash_fwd_kernel\n"
        "q = torch.randn(1, 1, 128, 8)\n"
        "out = F.scaled_dot_product_attention(*(q.to('neuron'),) * 3, is_causal=True).cpu()\n"
        "torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q, is_causal=True))\n"
        "print(len(flash_fwd_kernel.traces.entries))\n"
    )
    env = dict(os.environ, TORCH_NEURONX_ENABLE_NKI_SDPA="1")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"
