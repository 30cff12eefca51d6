"""Dtype policy (decision 8): no FP64 on the device, int64 native, nothing narrowed silently."""

from __future__ import annotations

import pytest
import torch

FP64_MESSAGE = "not supported because Trainium has no FP64 arithmetic"


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(3, dtype=torch.float64).to("neuron"),
        lambda: torch.zeros(3, dtype=torch.float64, device="neuron"),
        lambda: torch.tensor([1.0], dtype=torch.float64, device="neuron"),
        lambda: torch.ones(2, device="neuron").double(),
        lambda: torch.ones(2, device="neuron").to(torch.complex128),
        lambda: torch.nn.Linear(2, 2).double().to("neuron"),
    ],
)
def test_float64_raises_type_error_with_the_fix(make):
    with pytest.raises(TypeError, match=FP64_MESSAGE) as info:
        make()
    assert "torch.float32" in str(info.value) or "torch.complex64" in str(info.value)


@pytest.mark.parametrize("source", [torch.float32, torch.int16, torch.uint8, torch.complex64, torch.bfloat16])
@pytest.mark.parametrize("target", [torch.float64, torch.complex128])
def test_view_as_float64_or_complex128_raises_the_policy_error(source, target):
    # A view reinterprets bytes without creating a tensor through the allocator: it must not become a
    # way around the policy (a complex128 view read back wrong values in every element).
    x = torch.zeros(8, dtype=source, device="neuron")
    with pytest.raises(TypeError, match=f"aten::view.dtype on neuron: .*{FP64_MESSAGE}"):
        x.view(target)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (torch.float32, torch.int32),
        (torch.float32, torch.int16),
        (torch.float32, torch.complex64),
        (torch.int64, torch.float32),
        (torch.uint8, torch.bfloat16),
        (torch.complex64, torch.int64),
        (torch.int16, torch.bool),
    ],
)
def test_view_as_another_dtype_keeps_the_bytes(source, target):
    torch.manual_seed(0)
    x = torch.randint(0, 2 if target == torch.bool else 100, (4, 8), dtype=torch.uint8).view(source)
    view = x.to("neuron").view(target)
    assert view.dtype == target
    torch.testing.assert_close(view.cpu(), x.view(target), atol=0, rtol=0, equal_nan=True)


def test_explicit_conversion_to_float32_is_allowed():
    x = torch.randn(4, dtype=torch.float64)
    y = x.to("neuron", torch.float32)
    torch.testing.assert_close(y.cpu(), x.float())


def test_int64_is_native_and_exact():
    big = torch.tensor([2**40 + 1, -(2**50) - 3], dtype=torch.int64)
    y = big.to("neuron")
    torch.testing.assert_close((y * 3 + 1).cpu(), big * 3 + 1)
    assert (y + 1).dtype == torch.int64


def test_python_float_scalars_do_not_promote_to_float64():
    x = torch.ones(3, device="neuron")
    assert (x * 0.1).dtype == torch.float32
    assert (torch.arange(3, device="neuron") * 0.5).dtype == torch.float32


_FLOAT64_SCALAR = torch.tensor(2.5, dtype=torch.float64)  # a 0-dim CPU double: promotes an integer tensor


@pytest.mark.parametrize(
    "operation",
    [
        lambda t: t * _FLOAT64_SCALAR,
        lambda t: _FLOAT64_SCALAR + t,
        lambda t: t / _FLOAT64_SCALAR,
        lambda t: _FLOAT64_SCALAR - t,  # Tensor.__rsub__, defined in torch/_tensor.py
        lambda t: t**_FLOAT64_SCALAR,
    ],
    ids=["mul", "radd", "truediv", "rsub", "pow"],
)
def test_a_python_operator_promoting_to_float64_names_the_policy(operation):
    # Python operators turn an op's TypeError into NotImplemented, then into "unsupported operand
    # type(s) for *: 'Tensor' and 'Tensor'" (helper-88; MPS has this, pytorch/pytorch#100461): the
    # policy's words come as a RuntimeError there.
    integers = torch.arange(1, 3, device="neuron")
    with pytest.raises(RuntimeError, match=r"on neuron: float64 \(double\) tensors are not supported"):
        operation(integers)
    with pytest.raises(TypeError, match=r"aten::mul.Tensor on neuron: float64 \(double\) tensors"):
        torch.mul(integers, _FLOAT64_SCALAR)  # outside an operator: the policy's TypeError


def test_the_operators_refusal_holds_under_a_default_device_and_only_inside_an_operator():
    # torch.set_default_device / `with torch.device(...)` put a TorchFunctionMode between the
    # operator and the op (helper-91); a reflected operator called as a method is not swallowed, so
    # it keeps upstream's NotImplemented.
    integers = torch.arange(1, 3, device="neuron")
    with torch.device("neuron"):
        with pytest.raises(RuntimeError, match=r"aten::mul.Tensor on neuron: float64"):
            integers * _FLOAT64_SCALAR
        with pytest.raises(TypeError, match=r"aten::mul.Tensor on neuron: float64"):
            torch.mul(integers, _FLOAT64_SCALAR)
    assert integers.__rsub__(_FLOAT64_SCALAR) is NotImplemented
