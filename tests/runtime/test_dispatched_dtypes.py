"""Dtypes that CUDA's kernels and the CPU's both refuse are refused on neuron with CUDA's error
(torch_neuronx/eager/dispatched_dtypes.py), though XLA could compute them."""

from __future__ import annotations

import pytest
import torch

from torch_neuronx.eager.dispatched_dtypes import CUDA_DISPATCH, VERIFIED, Check, Dispatch

# (call, CUDA's exception, CUDA's message); each refused on the CPU too, in the CPU's own words.
REFUSALS = {
    "softmax-of-int64": (
        lambda d: torch.softmax(torch.arange(6, device=d).view(2, 3), 1),
        NotImplementedError,
        "\"host_softmax\" not implemented for 'Long'",
    ),
    "mm-of-bool": (
        lambda d: torch.ones(2, 2, dtype=torch.bool, device=d) @ torch.ones(2, 2, dtype=torch.bool, device=d),
        NotImplementedError,
        "\"addmm_cuda\" not implemented for 'Bool'",
    ),
    "gelu-of-int32": (
        lambda d: torch.nn.functional.gelu(torch.arange(4, dtype=torch.int32, device=d)),
        NotImplementedError,
        "\"GeluCUDAKernelImpl\" not implemented for 'Int'",
    ),
    "gcd-of-float32": (
        lambda d: torch.gcd(torch.ones(3, device=d), torch.ones(3, device=d)),
        NotImplementedError,
        "\"gcd_cuda\" not implemented for 'Float'",
    ),
    "sort-of-complex64": (
        lambda d: torch.sort(torch.ones(3, dtype=torch.complex64, device=d)),
        RuntimeError,
        "Sort currently does not support complex dtypes on CUDA.",
    ),
    "maximum-of-complex64": (
        lambda d: torch.maximum(torch.ones(3, dtype=torch.complex64, device=d), torch.ones(3, device=d)),
        RuntimeError,
        "maximum not implemented for complex tensors.",
    ),
    "relu-of-bool": (
        lambda d: torch.relu(torch.ones(3, dtype=torch.bool, device=d)),
        RuntimeError,
        "Boolean inputs not supported for relu",
    ),
    # PyTorch's Python meta kernels fail their own way first (ValueError, torch.finfo's TypeError).
    "leaky_relu-of-int64": (
        lambda d: torch.nn.functional.leaky_relu(torch.arange(3, device=d)),
        NotImplementedError,
        "\"leaky_relu_cuda\" not implemented for 'Long'",
    ),
    "softshrink-of-int64": (
        lambda d: torch.nn.functional.softshrink(torch.arange(3, device=d)),
        NotImplementedError,
        "\"softshrink_check\" not implemented for 'Long'",
    ),
    "silu-of-int64": (
        lambda d: torch.nn.functional.silu(torch.arange(3, device=d)),
        NotImplementedError,
        "\"silu_cuda\" not implemented for 'Long'",
    ),
    "max-dim-of-complex64": (  # JAX's TypeError leaked
        lambda d: torch.ones(2, 2, dtype=torch.complex64, device=d).max(1),
        RuntimeError,
        "max(): does not support complex input",
    ),
    "arange-of-bool": (
        lambda d: torch.arange(3, dtype=torch.bool, device=d),
        NotImplementedError,
        "\"arange_cuda\" not implemented for 'Bool'",
    ),
    "linspace-of-bool": (
        lambda d: torch.linspace(0, 1, 3, dtype=torch.bool, device=d),
        NotImplementedError,
        "\"linspace_cuda\" not implemented for 'Bool'",
    ),
    "bessel_j0-of-float16": (
        lambda d: torch.special.bessel_j0(torch.ones(3, dtype=torch.float16, device=d)),
        NotImplementedError,
        "\"bessel_j0_cuda\" not implemented for 'Half'",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_dtypes_cuda_and_the_cpu_refuse_raise_cudas_error(case):
    call, exception, message = REFUSALS[case]
    with pytest.raises(RuntimeError):  # NotImplementedError is a RuntimeError
        call("cpu")
    with pytest.raises(exception) as refused:
        call("neuron")
    assert str(refused.value) == message
    assert not getattr(refused.value, "__notes__", None)  # raised before tracing: no JAX notes


def test_a_dtype_the_cpu_computes_and_cuda_refuses_still_computes():
    # The tables join the CPU's dtypes: integer matrix products run on the CPU, so they run here.
    a = torch.arange(6).view(2, 3)
    torch.testing.assert_close((a.to("neuron") @ a.T.to("neuron")).cpu(), a @ a.T)


def test_an_empty_input_is_not_refused_as_kernels_return_before_dispatching():
    empty = torch.empty(0, 3, dtype=torch.int64)
    torch.testing.assert_close(torch.softmax(empty.to("neuron"), 1).cpu(), torch.softmax(empty, 1))


def test_the_table_names_functional_overloads_and_checked_dtypes():
    for op, rules in CUDA_DISPATCH.items():
        assert isinstance(op, torch._ops.OpOverload), op
        assert not op._schema.is_mutable, f"{op} is not functional"
        names = {argument.name for argument in op._schema.arguments}
        for rule in rules:
            assert rule.on == "result" or rule.on in names, f"{op}: no argument {rule.on!r}"
            if isinstance(rule, Dispatch):
                assert rule.dtypes & VERIFIED, f"{op}: {rule.kernel} dispatches no checked dtype"
            else:
                assert isinstance(rule, Check) and rule.refused <= VERIFIED, op
