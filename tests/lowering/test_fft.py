"""FFT lowerings (torch_neuronx/lowering/fft.py) against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from torch.testing import make_tensor

import torch_neuronx
from tests.utils import assert_matches_cpu

NORMS = [None, "forward", "ortho"]
REAL_IN = ["fft", "ifft", "rfft", "ihfft"]
COMPLEX_IN = ["fft", "ifft", "irfft", "hfft"]


def _input(shape, dtype):
    return make_tensor(shape, dtype=dtype, device="cpu", low=-4, high=4)


@pytest.mark.parametrize("name", REAL_IN)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 5, 12])
def test_1d_transforms_of_real_inputs(name, dtype, norm, n):
    """Real and integer inputs (promoted to float32) reach _fft_r2c, one-sided or not, with every
    normalization; n trims or zero-pads the signal (odd and even lengths)."""
    x = _input((3, 8), dtype)
    assert_matches_cpu(lambda x: getattr(torch.fft, name)(x, n=n, dim=-1, norm=norm), x)


@pytest.mark.parametrize("name", COMPLEX_IN)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 7, 10])
@pytest.mark.parametrize("dim", [0, -1])
def test_1d_transforms_of_complex_inputs(name, norm, n, dim):
    """Complex inputs reach _fft_c2c (both directions) and _fft_c2r (with last_dim_size n)."""
    x = _input((6, 5), torch.complex64)
    assert_matches_cpu(lambda x: getattr(torch.fft, name)(x, n=n, dim=dim, norm=norm), x, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fft2", "irfft2"])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(("s", "dim"), [(None, None), (None, (0, 2)), ((4, 6), (2, 0)), ((3, 5, 4), None)])
def test_nd_transforms(name, norm, s, dim):
    """Several dims, in any order, with sizes: the one-sided dim is the last of ``dim``."""
    if name.endswith("2") and (dim is None or s is not None and len(s) != 2):
        dim, s = (0, 2), None if s is None else s[:2]
    dtype = torch.float32 if name in ("rfftn", "ihfftn") else torch.complex64
    x = _input((3, 4, 5), dtype)
    assert_matches_cpu(lambda x: getattr(torch.fft, name)(x, s=s, dim=dim, norm=norm), x, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["fft", "rfft", "ifft"])
def test_out_forms(name):
    """The out= overloads of the primitives are derived from the functional lowerings."""
    x = _input((4, 6), torch.float32)

    def run(x):
        out = torch.empty(0, dtype=torch.complex64, device=x.device)
        getattr(torch.fft, name)(x, out=out)
        return out

    assert_matches_cpu(run, x)


def test_irfft_ignores_imaginary_parts_of_self_conjugate_terms():
    """c2r of a non-Hermitian input: the DC and Nyquist imaginary parts are ignored, as on CPU."""
    x = _input((2, 5), torch.complex64)
    assert_matches_cpu(lambda x: torch.fft.irfft(x, n=8), x, atol=1e-5, rtol=1e-5)


def test_fft_of_a_conjugate_view():
    """A conjugate view as the input: PyTorch resolves the bit before the primitive."""
    x = _input((3, 8), torch.complex64)
    assert_matches_cpu(lambda x: torch.fft.fft(x.conj()), x)


@pytest.mark.parametrize("name", ["fft", "rfft", "ifft", "irfft"])
def test_bfloat16_inputs_raise_as_on_cpu_and_cuda(name):
    """Neither PyTorch's CPU nor its CUDA FFT has a bfloat16 kernel; torch.fft raises the same error on neuron."""
    x = _input((8,), torch.bfloat16)
    with pytest.raises(RuntimeError, match="Unsupported dtype BFloat16"):
        getattr(torch.fft, name)(x)
    with pytest.raises(RuntimeError, match="Unsupported dtype BFloat16"):
        getattr(torch.fft, name)(x.to("neuron"))


@pytest.mark.parametrize(("name", "kwargs"), [("irfft", {"n": 10}), ("hfftn", {})])
def test_float16_transforms_with_a_real_result_compute_as_cuda(name, kwargs):
    """CUDA computes a float16 irfft/hfft into float16 (the CPU refuses it): neuron computes it in
    float32 and rounds once, matching the CPU's float32 result rounded to float16."""
    x = _input((4, 8), torch.float16)
    expected = getattr(torch.fft, name)(x.float(), **kwargs).half()
    torch_neuronx.clear_op_tracking()
    actual = getattr(torch.fft, name)(x.to("neuron"), **kwargs)
    assert torch_neuronx.get_fallback_ops() == {}
    assert actual.dtype == torch.float16
    torch.testing.assert_close(actual.cpu(), expected)


def test_float16_irfft_gradient_matches_the_cpu_in_float32():
    x = _input((4, 8), torch.float16)  # the shapes of the test above: its executables are reused
    wide = x.float().requires_grad_()
    torch.fft.irfft(wide, n=10).sum().backward()
    leaf = x.to("neuron").requires_grad_()
    torch.fft.irfft(leaf, n=10).sum().backward()
    assert leaf.grad.dtype == torch.float16
    torch.testing.assert_close(leaf.grad.cpu(), wide.grad.half())


def test_bfloat16_primitive_raises_with_the_fix():
    """Called directly, the primitive raises a RuntimeError (as CPU's) that names the op and the fix."""
    x = _input((8,), torch.bfloat16)
    with pytest.raises(RuntimeError, match="doesn't support"):
        torch.ops.aten._fft_r2c(x, [0], 0, True)
    with pytest.raises(RuntimeError, match=r"Unsupported dtype .*aten::_fft_r2c.*\.float\(\)"):
        torch.ops.aten._fft_r2c(x.to("neuron"), [0], 0, True)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_float16_stft_computes_as_on_cuda(compiled):
    # torch.stft calls the FFT primitives directly, which CUDA computes in half precision (the CPU
    # refuses): eager refused float16 while the compiled graph computed it.
    signal = _input((64,), torch.float16)
    window = torch.hann_window(16)

    def stft(x, w):
        return torch.stft(x, 16, window=w, return_complex=True)

    run = torch.compile(stft, backend="neuron") if compiled else stft
    actual = run(signal.to("neuron"), window.half().to("neuron"))
    assert actual.dtype == torch.complex32
    expected = stft(signal.float(), window.half().float())
    torch.testing.assert_close(actual.cpu().to(torch.complex64), expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32, torch.int64])
def test_conj_physical(dtype):
    """conj_physical computes the conjugate (real inputs unchanged), also of a conjugate view."""
    x = _input((3, 4), dtype)
    assert_matches_cpu(torch.conj_physical, x)
    if dtype.is_complex:
        assert_matches_cpu(lambda x: torch.conj_physical(x.conj()), x)
        assert_matches_cpu(lambda x: torch.vdot(x[0], x[1]), x)  # decomposes to prims.conj_physical


@pytest.mark.parametrize("form", ["out", "in_place"])
def test_conj_physical_out_and_in_place(form):
    """conj_physical.out (ifft's out= form ends in it) and conj_physical_ write the conjugate."""

    def run(x):
        if form == "in_place":
            return x.clone().conj_physical_()
        out = torch.empty(0, dtype=x.dtype, device=x.device)
        torch.conj_physical(x, out=out)
        return out

    assert_matches_cpu(run, _input((3, 4), torch.complex64))
