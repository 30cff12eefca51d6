"""Assertions on a tensor's value: ``_assert_async`` and its functional form.

``torch._assert_async(t)`` (and ``aten._assert_async.msg``, which PyTorch's ``one_hot`` calls to
check its class values) returns nothing and raises when the one element of ``t`` is zero. CUDA
checks on the host that ``t`` has exactly one element, then launches a kernel that asserts the
element is nonzero, so a false condition raises at the next synchronisation (a device-side assert,
aten/src/ATen/native/cuda/TensorCompare.cu). Here the element's check is a device check
(:func:`~torch_neuronx.runtime.tracing.device_check`, decision 9): a false condition raises a
RuntimeError at the next synchronisation point, worded as the CPU kernel's error
(aten/src/ATen/native/TensorCompare.cpp: "Expected Tensor with single nonzero value, but got
zero", or the op's ``assert_msg``, "Assertion is failed" when it is empty); in a compiled graph its
executable carries the check. A true condition does nothing. As on the CPU and CUDA, NaN counts as
nonzero, and a complex element is zero only when both its parts are.
"""

from __future__ import annotations

import math

import jax
import torch

from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten

_ZERO = "Expected Tensor with single nonzero value, but got zero"
_EMPTY_MESSAGE = "Assertion is failed"


def _check_nonzero(self: jax.Array, message: str) -> None:
    """Records the device check that the one element of ``self`` is nonzero.

    Raises:
        RuntimeError: ``self`` has no element or several (ATen's ``is_nonzero``, which CUDA checks
            on the host before it launches).
    """
    count = math.prod(self.shape)
    if count == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if count > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    # The fault's message is a format string (its {detail}); the user's braces stay literal.
    device_check(self.reshape(()) == 0, 0, message.replace("{", "{{").replace("}", "}}"))


@lowering(aten._assert_async.default)
def assert_async(self):
    _check_nonzero(self, _ZERO)


@lowering(aten._assert_async.msg)
def assert_async_msg(self, assert_msg):
    _check_nonzero(self, assert_msg or _EMPTY_MESSAGE)


@lowering(aten._functional_assert_async.msg)
def functional_assert_async_msg(self, assert_msg, dep_token):
    """The functional form threads a dependency token through (the CPU returns a copy of it)."""
    _check_nonzero(self, assert_msg or _EMPTY_MESSAGE)
    return dep_token
