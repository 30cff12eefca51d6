"""The kernel library against PyTorch on the CPU: each kernel simulated on the host CPU
(nki.simulate), and the flash attention op on the device with its backward. Small shapes here;
``make nki-sweep`` (python -m nki.sweep) runs larger ones."""

from __future__ import annotations

import pytest
import torch

import nki
from nki.kernels import flash_attention as fa
from nki.kernels.rmsnorm import rms_norm_kernel
from nki.kernels.rope import rope_kernel
from nki.kernels.swiglu import swiglu_mlp_kernel
from nki.sweep import attention_reference, rope_reference, swiglu_reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm(dtype):
    x, w = torch.randn(200, 96, dtype=dtype), torch.randn(96, dtype=dtype)
    out = nki.simulate(rms_norm_kernel)(x, w, 1e-5)
    expected = torch.nn.functional.rms_norm(x.float(), (96,), w.float(), 1e-5).to(dtype)
    torch.testing.assert_close(out, expected)


def test_rope():
    x, angles = torch.randn(150, 64), torch.randn(150, 32)
    out = nki.simulate(rope_kernel)(x, angles.cos(), angles.sin())
    torch.testing.assert_close(out, rope_reference(x, angles.cos(), angles.sin()))


def test_swiglu_mlp():
    x = torch.randn(130, 128)
    weights = [torch.randn(128, 256) * 0.05, torch.randn(128, 256) * 0.05, torch.randn(256, 128) * 0.05]
    out = nki.simulate(swiglu_mlp_kernel)(x, *weights)
    torch.testing.assert_close(out, swiglu_reference(x, *weights), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward_and_backward(causal):
    """Grouped-query attention (two query heads per key/value head), 128 tokens."""
    q, k, v = torch.randn(2, 128, 32), torch.randn(1, 128, 32), torch.randn(1, 128, 32)
    scale = 32**-0.5
    out, lse = nki.simulate(fa.flash_fwd_kernel[2])(q, k, v, scale, causal)
    expected, expected_lse, grads = attention_reference(q, k, v, scale, causal, grad_seed=1)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(lse, expected_lse)
    grad_out, *expected_grads = grads
    got = nki.simulate(fa.flash_bwd_kernel[1])(q, k, v, expected, grad_out, lse, scale, causal)
    for actual, wanted in zip(got, expected_grads, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=1e-4, atol=1e-5)


def test_flash_attention_op_on_the_device_with_autograd():
    from nki.kernels.ops import flash_attention

    q, k, v = torch.randn(1, 2, 128, 32), torch.randn(1, 1, 128, 32), torch.randn(1, 1, 128, 32)
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    out = flash_attention(qn, kn, vn, causal=True)
    out.square().sum().backward()
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    expected = torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, is_causal=True, enable_gqa=True)
    expected.square().sum().backward()
    torch.testing.assert_close(out.detach().cpu(), expected.detach())
    for got, wanted in ((qn, qc), (kn, kc), (vn, vc)):
        torch.testing.assert_close(got.grad.cpu(), wanted.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda ops, t: ops.flash_attention(t(1, 2, 100, 32), t(1, 1, 100, 32), t(1, 1, 100, 32)),
            "flash_attention: the kernel takes sequences of a multiple of 128, got S=100",
        ),
        (
            lambda ops, t: ops.flash_attention(t(1, 3, 128, 32), t(1, 2, 128, 32), t(1, 2, 128, 32)),
            "flash_attention: q's 3 heads are not a multiple of k's and v's 2",
        ),
        (
            lambda ops, t: ops.flash_attention(t(1, 2, 128, 130), t(1, 1, 128, 130), t(1, 1, 128, 130)),
            "flash_attention: the kernel takes heads of at most 128, got D=130",
        ),
        (
            lambda ops, t: ops.flash_attention(t(1, 2, 128, 8), t(1, 0, 128, 8), t(1, 0, 128, 8)),
            "flash_attention: k and v have no heads",
        ),
        (
            lambda ops, t: ops.swiglu_mlp(t(4, 128), t(128), t(128, 128), t(128, 128)),
            "swiglu_mlp: w_gate, w_up and w_down",
        ),
        (lambda ops, t: ops.rms_norm(t(2, 3, 8), t(8)), r"rms_norm: x must be \[N, H\], got \[2, 3, 8\]; flatten"),
        (lambda ops, t: ops.rms_norm(t(3, 8), t(4)), r"rms_norm: weight must be \[8\]"),
        (
            lambda ops, t: ops.swiglu_mlp(t(4, 96), t(96, 128), t(96, 128), t(128, 96)),
            "swiglu_mlp: H and I must be multiples of 128, got 96",
        ),
        (
            lambda ops, t: ops.rotary_embedding(t(4, 8), t(4, 8), t(4, 8)),
            r"rotary_embedding: cos and sin must be \[N, D / 2\]",
        ),
    ],
)
def test_library_ops_name_the_shape_they_need(call, message):
    from nki.kernels import ops

    with pytest.raises(ValueError, match=f"nki.kernels.ops.{message}"):
        call(ops, lambda *shape: torch.randn(*shape, device="neuron"))


@pytest.mark.parametrize(
    ("call", "shape"),
    [
        (lambda ops, t: ops.rms_norm(t(0, 8), t(8)), (0, 8)),
        (lambda ops, t: ops.rms_norm(t(3, 0), t(0)), (3, 0)),
        (lambda ops, t: ops.rotary_embedding(t(0, 8), t(0, 4), t(0, 4)), (0, 8)),
        (lambda ops, t: ops.swiglu_mlp(t(0, 128), t(128, 128), t(128, 128), t(128, 128)), (0, 128)),
        (lambda ops, t: ops.flash_attention(t(0, 2, 128, 16), t(0, 1, 128, 16), t(0, 1, 128, 16)), (0, 2, 128, 16)),
        (lambda ops, t: ops.flash_attention(t(1, 2, 0, 16), t(1, 1, 0, 16), t(1, 1, 0, 16)), (1, 2, 0, 16)),
    ],
)
def test_library_ops_of_empty_inputs_are_empty(call, shape):
    # Kernels write no output for no rows (err_tensor_output_not_written_to) and a grid of no
    # programs is refused: the ops return the empty result themselves (helper-83, helper-85).
    from nki.kernels import ops

    out = call(ops, lambda *size: torch.randn(*size, device="neuron"))
    assert out.shape == shape and out.device.type == "neuron"


@pytest.mark.parametrize(("tokens", "hidden", "intermediate"), [(4, 0, 128), (4, 128, 0)])
def test_swiglu_mlp_with_an_empty_feature_dimension_matches_the_matmuls(tokens, hidden, intermediate):
    # I = 0 read a PSUM tile no matmul wrote (NaNs); H = 0 returned a view of an output (helper-85's
    # follow-up). The matmuls give an empty result for H = 0 and zeros for I = 0.
    from nki.kernels import ops

    x = torch.randn(tokens, hidden)
    weights = (torch.randn(hidden, intermediate), torch.randn(hidden, intermediate), torch.randn(intermediate, hidden))
    out = ops.swiglu_mlp(x.to("neuron"), *(w.to("neuron") for w in weights))
    torch.testing.assert_close(out.cpu(), swiglu_reference(x, *weights))
