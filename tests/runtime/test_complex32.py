"""complex32 (ComplexHalf) tensors: held as float16 (real, imag) pairs, computed as complex64 and
rounded to complex32 (runtime/dtypes.py, runtime/layout.py), as CUDA stores and computes them."""

from __future__ import annotations

import pytest
import torch

import torch_neuronx

C32 = torch.complex32


def _bits(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """A complex32 CPU tensor of random bits: NaNs with payloads, infinities and subnormals included."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-(2**31), 2**31, shape, dtype=torch.int64, generator=generator).to(torch.int32).view(C32)


def _values(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)).to(C32)


def _same_bytes(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.view(torch.int32), expected.view(torch.int32), atol=0, rtol=0)


def _reference(fn, *args: torch.Tensor) -> torch.Tensor:
    """The CPU's result in complex64 (most CPU ops have no ComplexHalf kernel), rounded to complex32
    (a real result to float16)."""
    result = fn(*(a.to(torch.complex64) if a.dtype == C32 else a for a in args))
    return result.to(C32 if result.is_complex() else torch.float16)


def test_factories_make_complex32_tensors():
    zeros = torch.zeros(2, 3, dtype=C32, device="neuron")
    full = torch.full((2,), 1.5 - 2j, dtype=C32, device="neuron")
    assert zeros.dtype == C32 and zeros.element_size() == 4
    _same_bytes(zeros.cpu(), torch.zeros(2, 3, dtype=C32))
    _same_bytes(full.cpu(), torch.full((2,), 1.5 - 2j, dtype=C32))


def test_copies_to_and_from_the_device_keep_the_bytes():
    x = _bits((5, 6))
    on_device = x.to("neuron")
    _same_bytes(on_device.cpu(), x)
    _same_bytes(on_device.t().cpu(), x.t())  # a strided view of the storage
    _same_bytes(on_device[1::2, 3].cpu(), x[1::2, 3])
    _same_bytes(on_device.clone().cpu(), x)
    _same_bytes(on_device.to("neuron:1").cpu(), x)
    target = torch.zeros(6, 5, dtype=C32, device="neuron")
    target.copy_(on_device.t())  # a device copy through a transposed view
    _same_bytes(target.cpu(), x.t().contiguous())
    partial = torch.zeros(5, 6, dtype=C32, device="neuron")
    partial[2:].copy_(x[2:])  # a host copy into part of a storage
    _same_bytes(partial.cpu()[2:], x[2:])


def test_item_and_printing_match_the_cpu():
    x = _values((3,))
    on_device = x.to("neuron")
    assert on_device[1].item() == x[1].item()
    printed = " ".join(repr(on_device).replace("device='neuron:0',", "").split())
    assert printed == " ".join(repr(x).split())


def test_views_between_float16_pairs_and_complex32_keep_the_bytes():
    x = _bits((4, 3))
    pairs = torch.view_as_real(x)  # float16, (4, 3, 2)
    on_device = pairs.to("neuron")
    _same_bytes(torch.view_as_complex(on_device).cpu(), x)
    _same_bytes(torch.view_as_complex(torch.view_as_real(x.to("neuron")).cpu()), x)
    for source in (torch.float16, torch.int32, torch.float32):
        host = x.view(torch.int32).view(source)
        _same_bytes(host.to("neuron").view(C32).cpu(), host.view(C32))
    _same_bytes(x.to("neuron").view(torch.float16).cpu().view(C32), x)


def test_conversions_round_as_the_cpu():
    wide = torch.complex(torch.randn(64), torch.randn(64)) * 1000
    torch.testing.assert_close(wide.to("neuron").to(C32).cpu(), wide.to(C32), atol=0, rtol=0)
    narrow = _values((8,))
    torch.testing.assert_close(narrow.to("neuron").to(torch.complex64).cpu(), narrow.to(torch.complex64))
    halves = torch.randn(8).half()
    torch.testing.assert_close(halves.to("neuron").to(C32).cpu(), halves.to(C32), atol=0, rtol=0)


@pytest.mark.parametrize(
    "fn",
    [torch.sin, torch.exp, torch.sqrt, torch.sigmoid, torch.angle, lambda x: x.sum(0), lambda x: x.prod(-1)],
    ids=["sin", "exp", "sqrt", "sigmoid", "angle", "sum", "prod"],
)
def test_ops_compute_in_complex64_and_round(fn):
    x = _values((3, 4))
    expected = _reference(fn, x)
    torch_neuronx.clear_op_tracking()
    actual = fn(x.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-3, rtol=1e-3)


def test_in_place_and_binary_ops_round_to_complex32():
    x, y = _values((4,), 0), _values((4,), 1)
    on_device = x.to("neuron")
    on_device.mul_(y.to("neuron"))
    torch.testing.assert_close(on_device.cpu(), x * y, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close((x.to("neuron") / y.to("neuron")).cpu(), _reference(torch.div, x, y))


def test_float16_with_a_complex_scalar_promotes_to_complex32():
    halves = torch.randn(5).half()
    scalar = torch.tensor(0.5 + 1j)
    expected = halves + scalar  # the CPU's add has a ComplexHalf kernel
    actual = halves.to("neuron") + scalar
    assert actual.dtype == C32
    torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close((halves.to("neuron") * 1j).cpu(), halves * 1j)


@pytest.mark.parametrize("name", ["fft", "rfft", "ihfft2", "ifftn"])
def test_float16_transforms_with_a_complex_result_return_complex32(name):
    """CUDA's result is complex32: computed in complex64 (any size, unlike cuFFT) and rounded."""
    x = torch.randn(4, 6).half()
    expected = getattr(torch.fft, name)(x.float()).to(C32)
    actual = getattr(torch.fft, name)(x.to("neuron"))
    assert actual.dtype == C32
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("name", ["fft", "irfft"])
def test_complex32_transforms(name):
    x = _values((8,))
    expected = getattr(torch.fft, name)(x.to(torch.complex64))
    expected = expected.to(C32 if expected.is_complex() else torch.float16)
    actual = getattr(torch.fft, name)(x.to("neuron"))
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-3, rtol=1e-3)


def test_compiled_function_with_complex32_inputs_and_outputs():
    def f(x, y):
        return torch.sin(x) * y + 1j

    x, y = _values((3, 4), 0), _values((3, 4), 1)
    compiled = torch.compile(f, backend="neuron")
    actual = compiled(x.to("neuron"), y.to("neuron"))
    assert actual.dtype == C32
    expected = f(x.to(torch.complex64), y.to(torch.complex64)).to(C32)
    torch.testing.assert_close(actual.cpu(), expected, atol=2e-3, rtol=2e-3)


def test_float16_parts_make_complex32():
    generator = torch.Generator().manual_seed(0)
    first, second = torch.rand(2, 5, generator=generator).half()
    expected = torch.complex(first.float(), second.float()).to(C32)
    actual = torch.complex(first.to("neuron"), second.to("neuron"))
    assert actual.dtype == C32
    torch.testing.assert_close(actual.cpu(), expected)


def test_polar_of_float16_parts_is_refused_as_cuda_refuses_it():
    # CUDA's polar kernel dispatches float and double only (ComplexKernel.cu), the CPU's too.
    half = torch.ones(3, dtype=torch.float16, device="neuron")
    with pytest.raises(NotImplementedError, match="^\"polar_cuda\" not implemented for 'Half'$"):
        torch.polar(half, half)


COPIES_OF_LAZY_VIEWS = {
    "cpu": lambda t: t.cpu(),
    "clone": lambda t: t.clone(),
    "other_core": lambda t: t.to("neuron:1" if t.is_neuron else "cpu"),
    "copy_": lambda t: torch.zeros(t.shape, dtype=t.dtype, device=t.device).copy_(t),
    "resolved": lambda t: t.resolve_conj().resolve_neg(),
    "complex64": lambda t: t.to(torch.complex64),
}


@pytest.mark.parametrize("view", ["conj", "neg"])
@pytest.mark.parametrize("route", COPIES_OF_LAZY_VIEWS)
def test_copies_of_lazy_conj_and_neg_views_copy_their_values(view, route):
    """A lazy ``conj()`` or ``_neg_view`` of complex32 (a bit on the tensor, no computation) is
    copied by value, as on the CPU: the copy holds the conjugated or negated pairs."""
    x = _values((4, 3))
    make = torch.Tensor.conj if view == "conj" else torch._neg_view
    copy = COPIES_OF_LAZY_VIEWS[route]
    expected = copy(make(x)).resolve_conj().resolve_neg()
    actual = copy(make(x.to("neuron"))).cpu().resolve_conj().resolve_neg()
    _same_bytes(actual, expected)
