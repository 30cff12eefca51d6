"""Shape ops that build or scatter into new layouts, on neuron against CPU."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.testing import make_tensor

import torch_neuronx
from tests.utils import assert_matches_cpu


@pytest.mark.parametrize("offset, dim1, dim2", [(0, -2, -1), (2, 0, 2), (-1, 2, 0)])
def test_diag_embed_matches_cpu(offset, dim1, dim2):
    x = make_tensor((2, 3), dtype=torch.float32, device="cpu")
    assert_matches_cpu(lambda x: torch.diag_embed(x, offset, dim1, dim2), x)


@pytest.mark.parametrize("offset, dim1, dim2", [(0, 0, 1), (1, 1, 2), (-2, 2, 0)])
def test_diagonal_scatter_matches_cpu(offset, dim1, dim2):
    x = make_tensor((4, 5, 3), dtype=torch.bfloat16, device="cpu")
    src = make_tensor(x.diagonal(offset, dim1, dim2).shape, dtype=torch.bfloat16, device="cpu")
    assert_matches_cpu(lambda x, src: torch.diagonal_scatter(x, src, offset, dim1, dim2), x, src)


@pytest.mark.parametrize("size, stride, offset", [((2, 2), (4, 1), 0), ((3,), (5,), 1), ((2, 3), (1, 2), 3)])
def test_as_strided_scatter_matches_cpu(size, stride, offset):
    x = make_tensor((4, 4), dtype=torch.int32, device="cpu")
    src = make_tensor(size, dtype=torch.int32, device="cpu")
    assert_matches_cpu(lambda x, src: torch.as_strided_scatter(x, src, size, stride, offset), x, src)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.float32])
@pytest.mark.parametrize("start, end, step", [(-0.9, 2.1, 2.0), (2.1, -2.9, -1.0), (0.1, -7.9, -4.0), (0, 10, 3)])
def test_arange_with_float_bounds_and_an_integer_dtype_matches_cpu(start, end, step, dtype):
    # Integer results truncate start and step first; int64 also counts in integers (as the CPU does).
    expected = torch.arange(start, end, step, dtype=dtype)
    torch.testing.assert_close(torch.arange(start, end, step, dtype=dtype, device="neuron").cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32])
@pytest.mark.parametrize("start, end, step", [(0, 2, 0.5), (1.7, 3, 0.25), (0, -2, -0.5)])
def test_arange_with_a_step_that_truncates_to_zero_matches_cpu(start, end, step, dtype):
    # ATen counts in double for these dtypes and steps in the truncated integer: int(start) each time
    # (PyTorch's meta kernel refused the step). int64 counts in integers and refuses it, as the CPU does.
    expected = torch.arange(start, end, step, dtype=dtype)
    torch.testing.assert_close(torch.arange(start, end, step, dtype=dtype, device="neuron").cpu(), expected)
    with pytest.raises(ValueError, match="step must be nonzero"):
        torch.arange(start, end, step, dtype=torch.int64, device="neuron")


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("start", "end", "step", "dtype"),
    [
        # ATen checks the step in double first: NaN is not nonzero (PyTorch's meta kernel said "step
        # must be finite but got nan").
        (0, 5, NAN, None),
        (0, 5, NAN, torch.int64),
        (0, 5, NAN, torch.float16),
        (NAN, 5, 1, None),
        (0, -INF, 1, None),
        (0, 5, -INF, None),
        (0, 5, 1e-300, None),
        # An integer result converts start and step to int64 (end too for int64), infinities included.
        (0, 5, INF, torch.int64),
        (0, 1e20, 1e19, torch.int32),
        (0.5, 1e19, 1e18, torch.int64),
        (0, 5, INF, torch.int8),  # the truncated-step path raised Python's OverflowError
        (0, NAN, NAN, None),  # it said "unsupported range: 0 -> nan" before ATen's step check
        (1j, 5, 1, None),  # c10's conversion of a complex bound (it said "does not support complex")
        (0, 3, 1j, torch.int32),  # it raised Python's TypeError from int(step)
        (0, 1, 1e-30, torch.int32),  # ATen's size check (it failed in prims::iota)
        (0, 2**62, 0.5, torch.int16),  # a count of 2**63 passes ATen's check and resize_ refuses it
        (0, 2**63 - 1, 2**62, None),  # int64 counts in int64: end - start + step wraps negative
        (-(2**63), 2**63 - 1, -1, None),
    ],
)
def test_arange_bounds_raise_the_cpus_error(start, end, step, dtype):
    with pytest.raises(RuntimeError) as cpu_error:
        torch.arange(start, end, step, dtype=dtype)
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(cpu_error.value))}$"):
        torch.arange(start, end, step, dtype=dtype, device="neuron")


@pytest.mark.parametrize(
    ("start", "end", "step", "dtype"),
    [(0, 5, INF, None), (5, 0, -INF, None), (0, 5, INF, torch.float16), (1 + 0j, 5, 1, None)],
)
def test_arange_of_an_infinite_step_or_a_real_complex_bound_matches_cpu(start, end, step, dtype):
    # ATen counts ceil(5 / inf) = 0 elements where PyTorch's meta kernel refuses the step as not
    # finite, and converts a complex bound with no imaginary part where the meta kernel refuses it.
    expected = torch.arange(start, end, step, dtype=dtype)
    torch.testing.assert_close(torch.arange(start, end, step, dtype=dtype, device="neuron").cpu(), expected)


@pytest.mark.parametrize(
    ("start", "end", "step", "dtype"),
    [
        (-(2**63), 2**63 - 1, 2**62, None),
        (2**63 - 1, -(2**63), -(2**62), None),
        (-9.2e18, 9.2e18, 2.3e18, torch.int64),
        (-(2**63), 2**63 - 1, 2**62, torch.int32),
    ],
)
def test_arange_of_an_int64_span_that_wraps_counts_as_cpu(start, end, step, dtype):
    # The int64 kernel counts (end - start + step - 1) / step in int64 arithmetic: the span wraps
    # and the CPU's result is empty, where neuron counted exactly (4 elements); int32 counts in double.
    expected = torch.arange(start, end, step, dtype=dtype)
    torch.testing.assert_close(torch.arange(start, end, step, dtype=dtype, device="neuron").cpu(), expected)


@pytest.mark.parametrize(("step", "dtype"), [(INF, torch.complex64), (1, torch.complex64), (INF, torch.bool)])
def test_arange_of_a_dtype_its_kernel_does_not_dispatch_raises_before_its_bounds(step, dtype):
    # CUDA's AT_DISPATCH refuses the dtype first; an infinite step gave [] for complex64.
    name = {torch.complex64: "ComplexFloat", torch.bool: "Bool"}[dtype]
    with pytest.raises(NotImplementedError, match=f"^\"arange_cpu\" not implemented for '{name}'$"):
        torch.arange(0, 1, step, dtype=dtype)
    with pytest.raises(NotImplementedError, match=f"^\"arange_cuda\" not implemented for '{name}'$"):
        torch.arange(0, 1, step, dtype=dtype, device="neuron")


def test_arange_of_an_int32_result_converts_no_float_end_as_cpu():
    # The int32 kernel counts in double and steps from the converted start: an end past int64 is fine.
    expected = torch.arange(0, 9.3e18, 1e18, dtype=torch.int32)
    torch.testing.assert_close(torch.arange(0, 9.3e18, 1e18, dtype=torch.int32, device="neuron").cpu(), expected)


def test_arange_of_integers_that_double_counts_otherwise_is_refused_naming_arange():
    # The CPU counts float32's arange(2**62, 2**63 + 2**62 + 1, 2**62) in double (2 elements), PyTorch's
    # meta kernel, which gives the result's shape, in integers (3): neuron raised "lowering of
    # aten.arange.start_step returned shape (2,), PyTorch's meta kernel says (3,)".
    start, end, step = 2**62, 2**63 + 2**62 + 1, 2**62
    assert torch.arange(start, end, step, dtype=torch.float32).numel() == 2
    message = r"^arange\(4611686018427387904, .* on neuron: the CPU counts 2 elements .* meta kernel, .* 3 "
    with pytest.raises(RuntimeError, match=message):
        torch.arange(start, end, step, dtype=torch.float32, device="neuron")
    expected = torch.arange(float(start), end, step, dtype=torch.float32)  # as floats, both count 2
    actual = torch.arange(float(start), end, step, dtype=torch.float32, device="neuron").cpu()
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "fill",
    [lambda out: torch.arange(0, 4, out=out), lambda out: torch.linspace(0, 3, 4, out=out)],
    ids=["arange", "linspace"],
)
@pytest.mark.parametrize(
    "view", [lambda t: t.narrow(1, 1, 2), lambda t: t[:, :2].t(), lambda t: t[0]], ids=["narrow", "transposed", "row"]
)
def test_range_into_an_out_view_of_as_many_elements_matches_cpu(fill, view):
    # ATen's range kernels keep an out= of the right number of elements (its shape and strides) and
    # write the values in row-major order; any other out is resized.
    results = []
    for device in ("cpu", "neuron"):
        base = torch.zeros(2, 4, device=device)
        returned = fill(view(base))
        results.append((base.cpu(), returned.shape, returned.stride()))
    assert results[1][1:] == results[0][1:]
    torch.testing.assert_close(results[1][0], results[0][0])


def test_arange_into_an_integer_out_tensor_computes_in_its_dtype():
    out = torch.empty(0, dtype=torch.int16, device="neuron")
    torch.arange(0.5, 7.5, 2.5, out=out)
    torch.testing.assert_close(out.cpu(), torch.arange(0.5, 7.5, 2.5, out=torch.empty(0, dtype=torch.int16)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.float32])
@pytest.mark.parametrize("start, end, steps", [(-2.0, 1, 50), (4.3, -3, 50), (0, 10, 7)])
def test_linspace_matches_cpu(start, end, steps, dtype):
    # Integer results convert the endpoints to integers first, as the CPU kernel does.
    expected = torch.linspace(start, end, steps, dtype=dtype)
    torch.testing.assert_close(torch.linspace(start, end, steps, dtype=dtype, device="neuron").cpu(), expected)


def test_linspace_of_a_negative_start_into_an_unsigned_dtype_wraps_the_start_first():
    # The CPU converts the endpoints to uint8 before stepping: -10 becomes 246.
    expected = torch.linspace(-10, 255, 7, dtype=torch.uint8)
    torch.testing.assert_close(torch.linspace(-10, 255, 7, dtype=torch.uint8, device="neuron").cpu(), expected)


@pytest.mark.parametrize(
    "start, end, dtype, name", [(0, 255, torch.int8, "int8_t"), (-3.7, 10.2, torch.uint8, "uint8_t")]
)
def test_linspace_endpoints_that_do_not_fit_the_dtype_raise_as_on_cpu(start, end, dtype, name):
    message = f"value cannot be converted to type {name} without overflow"
    with pytest.raises(RuntimeError, match=message):
        torch.linspace(start, end, 5, dtype=dtype)
    with pytest.raises(RuntimeError, match=message):
        torch.linspace(start, end, 5, dtype=dtype, device="neuron")


@pytest.mark.parametrize("dtype", [torch.float16, torch.int8], ids=str)
@pytest.mark.parametrize("steps", [0, 1])
def test_linspace_converts_only_the_endpoints_its_steps_use(steps, dtype):
    # CUDA's linspace_cuda_out: no step converts neither endpoint, one step fills with the start.
    torch.testing.assert_close(
        torch.linspace(0, 1e6, steps, dtype=dtype, device="neuron").cpu(), torch.linspace(0, 1e6, steps, dtype=dtype)
    )
    if steps == 1:  # the start is converted, as CUDA's fill_ converts it (the CPU gives inf for float16)
        with pytest.raises(RuntimeError, match="^value cannot be converted to type .* without overflow$"):
            torch.linspace(1e6, 0, steps, dtype=dtype, device="neuron")


_FILLS = {
    "full": lambda dtype, value, device: torch.full((2,), value, dtype=dtype, device=device),
    "fill_": lambda dtype, value, device: torch.zeros(2, dtype=dtype, device=device).fill_(value),
    "full_like": lambda dtype, value, device: torch.full_like(torch.zeros(2, dtype=dtype, device=device), value),
    "scalar_tensor": lambda dtype, value, device: torch.scalar_tensor(value, dtype=dtype, device=device),
    "where": lambda dtype, value, device: torch.where(
        torch.tensor([True, False], device=device), torch.ones(2, dtype=dtype, device=device), value
    ),
}


@pytest.mark.parametrize("fill", list(_FILLS), ids=list(_FILLS))
@pytest.mark.parametrize(
    "dtype, value, name",
    [
        (torch.uint16, 70000, "uint16_t"),
        (torch.uint16, -70000, "uint16_t"),
        (torch.uint32, 2**32 + 5, "uint32_t"),
    ],
)
def test_fills_of_wider_unsigned_dtypes_that_do_not_fit_raise_as_on_cpu(fill, dtype, value, name):
    # They wrapped on neuron (full((2,), 70000, dtype=uint16) was [4464, 4464]).
    message = f"^value cannot be converted to type {name} without overflow$"
    with pytest.raises(RuntimeError, match=message):
        _FILLS[fill](dtype, value, "cpu")
    with pytest.raises(RuntimeError, match=message):
        _FILLS[fill](dtype, value, "neuron")


@pytest.mark.parametrize("fill", ["full", "fill_", "scalar_tensor"])
def test_a_float_fill_of_a_wider_unsigned_dtype_that_does_not_fit_raises_as_on_cpu(fill):
    # A float value into an integer dtype, beyond it (or NaN): where() would promote it to float.
    message = "^value cannot be converted to type uint32_t without overflow$"
    for value in (5e9, -1.5e10, float("nan")):
        with pytest.raises(RuntimeError, match=message):
            _FILLS[fill](torch.uint32, value, "cpu")
        with pytest.raises(RuntimeError, match=message):
            _FILLS[fill](torch.uint32, value, "neuron")


@pytest.mark.parametrize("fill", list(_FILLS), ids=list(_FILLS))
@pytest.mark.parametrize("dtype, value", [(torch.uint16, -65535), (torch.uint32, 2**32 - 1), (torch.uint64, 2**64 - 1)])
def test_fills_of_wider_unsigned_dtypes_that_fit_match_cpu(fill, dtype, value):
    # c10's check lets a negative integer down to -max into an unsigned type, which wraps it.
    torch.testing.assert_close(_FILLS[fill](dtype, value, "neuron").cpu(), _FILLS[fill](dtype, value, "cpu"))


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view({2: torch.int16, 4: torch.int32}[x.element_size()])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(
    "start, end, steps",
    [(-2.0, 1, 50), (4.3, -3, 50), (0, 1, 1000), (-3.7, 7.77, 4097), (0, -2, 3), (1e4, -65000, 7), (0.1, 5, 1)],
)
def test_floating_linspace_has_the_cpus_bits(start, end, steps, dtype):
    # The CPU rounds each 16-bit operation to the dtype and fuses float32's multiply-add; neuron
    # differed by 1-2 ulp (235 of 336 float16 cases) when it rounded the float64 value once.
    expected = torch.linspace(start, end, steps, dtype=dtype)
    actual = torch.linspace(start, end, steps, dtype=dtype, device="neuron").cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert torch.equal(_bits(actual), _bits(expected))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("factory", [torch.linspace, torch.logspace], ids=["linspace", "logspace"])
@pytest.mark.parametrize(
    "start, end, steps",
    [(0, math.inf, 5), (math.inf, math.inf, 4), (math.nan, 1, 4), (1, -math.nan, 7), (-math.nan, math.nan, 3)],
)
def test_range_factories_give_nans_the_cpus_sign(factory, start, end, steps, dtype):
    # A NaN step's sign flipped where the second half subtracts it (the CPU leaves a NaN operand's
    # sign alone), and c10::BFloat16 writes every NaN positive where ml_dtypes kept its sign.
    expected = factory(start, end, steps, dtype=dtype)
    actual = factory(start, end, steps, dtype=dtype, device="neuron").cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert torch.equal(_bits(actual), _bits(expected))


_RANGE_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.uint8, torch.int32, torch.int64]
_RANGE_BOUNDS = [(0, 10, 1), (0, 1, 0.1), (-3.7, 7.77, 0.3), (5, -5, -0.7), (0.5, 5, 1.5), (0.2, 1000.7, 0.0101)]


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize(
    "start, end, step, dtype",
    # An integer step of 0 is the next test's: the CPU's meta kernel divides by it (SIGFPE).
    [(*b, d) for b in _RANGE_BOUNDS for d in _RANGE_DTYPES if d.is_floating_point or int(b[2]) != 0],
)
def test_range_runs_on_the_device_with_the_cpus_values(start, end, step, dtype):
    # It fell back to the CPU (aten::range.out had no kernel), with a second warning.
    expected = torch.range(start, end, step, dtype=dtype)
    actual = torch.range(start, end, step, dtype=dtype, device="neuron")
    assert torch_neuronx.get_fallback_ops() == {}
    assert torch.equal(actual.cpu(), expected)
    out = torch.empty(0, dtype=dtype, device="neuron")
    assert torch.equal(torch.range(start, end, step, out=out).cpu(), expected)


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
def test_range_refusals_are_cudas_and_an_integer_step_of_zero_raises():
    # torch 2.13's meta kernel divides by the truncated step first: SIGFPE stops the interpreter.
    with pytest.raises(RuntimeError, match="^step must be nonzero$"):
        torch.range(0, 1, 0.1, dtype=torch.int32, device="neuron")
    with pytest.raises(NotImplementedError, match=re.escape("\"range_cuda\" not implemented for 'Bool'")):
        torch.range(0, 3, dtype=torch.bool, device="neuron")
    with pytest.raises(RuntimeError, match="^upper bound and lower bound inconsistent with step sign$"):
        torch.range(3, 0, device="neuron")
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(
    "start, end, step", [(-100.5, 7.77, 0.3), (-1, 7.77, 0.1), (0, -50, -0.7), (2.3, 100, 1.7), (0.1, 700, 0.01)]
)
def test_floating_arange_has_the_cpus_bits(start, end, step, dtype):
    # The CPU steps from each 32-byte vector register's rounded first element, in float for the
    # 16-bit dtypes; the last case has 69990 elements, split between threads.
    expected = torch.arange(start, end, step, dtype=dtype)
    actual = torch.arange(start, end, step, dtype=dtype, device="neuron").cpu()
    torch.testing.assert_close(actual, expected)
    assert torch.equal(_bits(actual), _bits(expected))


PADS = {
    "1d": ((2, 3, 5), (2, 1)),
    "2d": ((2, 3, 4, 5), (1, 2, 0, 3)),
    "3d": ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2)),
    "crop": ((2, 3, 4, 5), (-1, 2, 1, -2)),
}


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("case", PADS)
def test_pad_and_its_gradient_match_cpu(mode, case):
    shape, padding = PADS[case]
    if case == "crop" and mode == "reflect":
        pytest.skip("PyTorch's reflect padding rejects negative padding")
    x = torch.randn(shape, requires_grad=True)

    def run(x):
        y = torch.nn.functional.pad(x, padding, mode=mode)
        (grad,) = torch.autograd.grad(y, x, torch.linspace(-2, 2, y.numel()).reshape(y.shape).to(y))
        return y, grad

    assert_matches_cpu(run, x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("case", ["1d", "2d", "3d"])
def test_16_bit_pad_gradients_sum_in_the_dtype_as_the_cpu(case, mode, dtype):
    # cpu_padding_backward adds each output's gradient to its source in the 16-bit dtype, output by
    # output: float32 rounded once differed by up to 23x bfloat16 tolerance at the edges.
    shape, padding = PADS[case]
    x = torch.randn(shape).to(dtype)
    grad = torch.randn(torch.nn.functional.pad(x, padding, mode=mode).shape).to(dtype)

    def run(x, grad):
        return torch.autograd.grad(torch.nn.functional.pad(x.requires_grad_(), padding, mode=mode), x, grad)[0]

    assert_matches_cpu(run, x, grad, atol=0, rtol=0)


@pytest.mark.parametrize("dims", [(0, 0), (0, -1), (-1, -1)])
def test_transpose_of_a_zero_dim_tensor_is_itself(dims):
    x = torch.tensor(3.5)
    torch.testing.assert_close(torch.transpose_copy(x.neuron(), *dims).cpu(), torch.transpose_copy(x, *dims))
    torch.testing.assert_close(x.neuron().transpose(*dims).cpu(), x.transpose(*dims))


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((3,), {}),
        ((10,), {"periodic": False}),
        ((7, True, 5.5), {}),
        ((1,), {}),
        ((0,), {}),
        ((9,), {"dtype": torch.bfloat16}),
    ],
)
def test_kaiser_window_matches_cpu(args, kwargs):
    # ATen's composite ends in a DispatchStub with no neuron kernel (an INTERNAL ASSERT before); the
    # lowering replaces it once the device has started (see the CHANGELOG for a first op of a process).
    torch.ones(1, device="neuron")
    expected = torch.kaiser_window(*args, **kwargs)
    torch.testing.assert_close(torch.kaiser_window(*args, device="neuron", **kwargs).cpu(), expected)


def test_linspace_of_one_complex_step_matches_cpu():
    expected = torch.linspace(0.3 + 0.2j, 7.3 + 0.2j, 1)
    torch.testing.assert_close(torch.linspace(0.3 + 0.2j, 7.3 + 0.2j, 1, device="neuron").cpu(), expected)


def test_unsafe_view_shares_its_inputs_memory_as_on_cpu():
    # It computed a new tensor (its schema declares no alias), so a C++ composite writing through
    # it lost the write: torch.kron(a, b, out=out) left out unwritten (upstream test_kron).
    x = torch.zeros(2, 3, device="neuron")
    torch.ops.aten._unsafe_view(x, [3, 2]).fill_(1)
    torch.testing.assert_close(x.cpu(), torch.ones(2, 3))


@pytest.mark.parametrize("shapes", [((4,), (2, 2)), ((2, 2), (1, 2, 3)), ((1, 2, 3, 3), (4,))], ids=str)
def test_kron_into_an_out_tensor_matches_cpu(shapes):
    a, b = (torch.rand(shape) for shape in shapes)
    expected = torch.kron(a, b)
    out = torch.empty(expected.shape, device="neuron")
    result = torch.kron(a.to("neuron"), b.to("neuron"), out=out)
    assert result.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out.cpu(), expected)
