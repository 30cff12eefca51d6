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
