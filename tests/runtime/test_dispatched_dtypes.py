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
    "pdist-of-float16": (
        lambda d: torch.pdist(torch.ones(4, 3, dtype=torch.float16, device=d)),
        NotImplementedError,
        "\"pdist_cuda\" not implemented for 'Half'",
    ),
    "logspace-of-uint32": (
        lambda d: torch.logspace(-2, 2, 9, dtype=torch.uint32, device=d),
        NotImplementedError,
        "\"logspace_cuda\" not implemented for 'UInt32'",
    ),
    # helper-66: AT_DISPATCH_INTEGRAL_TYPES and AT_DISPATCH_ALL_TYPES_AND* leave uint16/32/64 out.
    "neg-of-uint32": (
        lambda d: -torch.tensor([1, 7], dtype=torch.uint32, device=d),
        NotImplementedError,
        "\"neg_cuda\" not implemented for 'UInt32'",
    ),
    "right-shift-of-uint32": (
        lambda d: torch.tensor([1, 7], dtype=torch.uint32, device=d) >> 1,
        NotImplementedError,
        "\"rshift_cuda\" not implemented for 'UInt32'",
    ),
    "left-shift-of-uint64": (
        lambda d: torch.tensor([1, 7], dtype=torch.uint64, device=d) << 1,
        NotImplementedError,
        "\"lshift_cuda\" not implemented for 'UInt64'",
    ),
    "floor-divide-of-uint16": (
        lambda d: torch.tensor([1, 7], dtype=torch.uint16, device=d) // 2,
        NotImplementedError,
        "\"div_floor_cuda\" not implemented for 'UInt16'",
    ),
    "trunc-division-of-uint32": (
        lambda d: torch.div(torch.tensor([1, 7], dtype=torch.uint32, device=d), 2, rounding_mode="trunc"),
        NotImplementedError,
        "\"div_trunc_cuda\" not implemented for 'UInt32'",
    ),
    "remainder-of-uint32": (
        lambda d: torch.tensor([1, 7], dtype=torch.uint32, device=d) % 2,
        NotImplementedError,
        "\"remainder_cuda\" not implemented for 'UInt32'",
    ),
    # helper-67: the same macros in abs, sign, bitwise_not, logical_not and fmod.
    **{
        f"{name}-of-uint32": (
            lambda d, call=call: call(torch.tensor([1, 7], dtype=torch.uint32, device=d)),
            NotImplementedError,
            f"\"{kernel}\" not implemented for 'UInt32'",
        )
        for name, call, kernel in (
            ("abs", torch.abs, "abs_cuda"),
            ("sign", torch.sign, "sign_cuda"),
            ("sgn", torch.sgn, "sign_cuda"),
            ("bitwise-not", torch.bitwise_not, "bitwise_not_cuda"),
            ("logical-not", torch.logical_not, "logical_not_cuda"),
            ("fmod", lambda t: torch.fmod(t, 2), "fmod_cuda"),
        )
    },
    "linspace-of-uint16": (
        lambda d: torch.linspace(0, 10, 5, dtype=torch.uint16, device=d),
        NotImplementedError,
        "\"linspace_cuda\" not implemented for 'UInt16'",
    ),
    "arange-of-uint32": (
        lambda d: torch.arange(0, 10, 3, dtype=torch.uint32, device=d),
        NotImplementedError,
        "\"arange_cuda\" not implemented for 'UInt32'",
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
    # JAX's and numpy's errors leaked (TypeError, ValueError, KeyError of numpy.float16).
    "argmax-of-complex64": (
        lambda d: torch.ones(3, dtype=torch.complex64, device=d).argmax(),
        RuntimeError,
        "argmax(): does not support complex input",
    ),
    "erf-of-complex64": (
        lambda d: torch.erf(torch.ones(3, dtype=torch.complex64, device=d)),
        NotImplementedError,
        "\"erf_cuda\" not implemented for 'ComplexFloat'",
    ),
    "i1-of-complex64": (
        lambda d: torch.special.i1(torch.ones(3, dtype=torch.complex64, device=d)),
        NotImplementedError,
        "\"i1_cuda\" not implemented for 'ComplexFloat'",
    ),
    "signbit-of-complex64": (
        lambda d: torch.signbit(torch.ones(3, dtype=torch.complex64, device=d)),
        NotImplementedError,
        "signbit is not implemented for complex tensors.",
    ),
    "copysign-of-complex64": (
        lambda d: torch.copysign(torch.ones(3, dtype=torch.complex64, device=d), 1.0),
        NotImplementedError,
        "\"copysign_cuda\" not implemented for 'ComplexFloat'",
    ),
    "round-of-bool": (
        lambda d: torch.round(torch.ones(3, dtype=torch.bool, device=d)),
        NotImplementedError,
        "\"round_cuda\" not implemented for 'Bool'",
    ),
    "cholesky-of-float16": (
        lambda d: torch.linalg.cholesky(torch.eye(3, dtype=torch.float16, device=d)),
        NotImplementedError,
        "\"cholesky_cusolver\" not implemented for 'Half'",
    ),
    "cholesky-of-int32": (  # the meta's check comes before the kernel's dispatch
        lambda d: torch.linalg.cholesky(torch.eye(3, dtype=torch.int32, device=d)),
        RuntimeError,
        "linalg.cholesky: Expected a floating point or complex tensor as input. Got Int",
    ),
    "svdvals-of-bfloat16": (
        lambda d: torch.linalg.svdvals(torch.eye(3, dtype=torch.bfloat16, device=d)),
        NotImplementedError,
        "\"svd_cuda_gesvdjBatched\" not implemented for 'BFloat16'",
    ),
    "lu_factor-of-int32": (
        lambda d: torch.linalg.lu_factor(torch.eye(3, dtype=torch.int32, device=d)),
        NotImplementedError,
        "\"lu_factor_cusolver\" not implemented for 'Int'",
    ),
    "householder_product-of-int64": (
        lambda d: torch.linalg.householder_product(
            torch.ones(3, 2, dtype=torch.int64, device=d), torch.ones(2, dtype=torch.int64, device=d)
        ),
        NotImplementedError,
        "\"orgqr_cuda\" not implemented for 'Long'",
    ),
    "scatter_reduce-amax-of-complex64": (
        lambda d: torch.zeros(3, dtype=torch.complex64, device=d).scatter_reduce(
            0, torch.zeros(3, dtype=torch.int64, device=d), torch.ones(3, dtype=torch.complex64, device=d), "amax"
        ),
        NotImplementedError,
        "\"cuda_scatter_gather_base_kernel_func\" not implemented for 'ComplexFloat'",
    ),
    "scatter_reduce-mean-of-bool": (
        lambda d: torch.zeros(3, dtype=torch.bool, device=d).scatter_reduce(
            0, torch.zeros(3, dtype=torch.int64, device=d), torch.ones(3, dtype=torch.bool, device=d), "mean"
        ),
        NotImplementedError,
        "\"cuda_scatter_gather_base_kernel_func\" not implemented for 'Bool'",
    ),
    "safe_softmax-of-complex64": (
        lambda d: torch.ops.aten._safe_softmax(torch.ones(3, dtype=torch.complex64, device=d), 0),
        NotImplementedError,
        "\"host_softmax\" not implemented for 'ComplexFloat'",
    ),
    # Python references refused in their own words (mean's "could not infer output dtype").
    "layer_norm-of-int64": (
        lambda d: torch.nn.functional.layer_norm(torch.ones(2, 3, dtype=torch.int64, device=d), (3,)),
        NotImplementedError,
        "\"LayerNormKernelImpl\" not implemented for 'Long'",
    ),
    "var_mean-of-int64": (
        lambda d: torch.var_mean(torch.arange(3, device=d)),
        RuntimeError,
        "var_mean only support floating point and complex dtypes",
    ),
    "binary_cross_entropy_with_logits-of-int64": (  # the target shares the refused dtype
        lambda d: torch.nn.functional.binary_cross_entropy_with_logits(
            torch.arange(3, device=d), torch.arange(3, device=d)
        ),
        NotImplementedError,
        "\"log_sigmoid_forward_cuda\" not implemented for 'Long'",
    ),
    "replication_pad-of-bool": (
        lambda d: torch.nn.functional.pad(torch.ones(1, 2, 3, dtype=torch.bool, device=d), (1, 1), mode="replicate"),
        NotImplementedError,
        "\"replication_pad1d_cuda\" not implemented for 'Bool'",
    ),
    "logaddexp-of-bool": (
        lambda d: torch.logaddexp(torch.ones(3, dtype=torch.bool, device=d), torch.ones(3, dtype=torch.bool, device=d)),
        NotImplementedError,
        "\"logaddexp_cuda\" not implemented for 'Bool'",
    ),
    "cross-of-bool": (
        lambda d: torch.linalg.cross(
            torch.ones(3, dtype=torch.bool, device=d), torch.ones(3, dtype=torch.bool, device=d)
        ),
        NotImplementedError,
        "\"cross_cuda\" not implemented for 'Bool'",
    ),
    "floor-division-of-complex64": (  # div's rounding_mode picks the kernel
        lambda d: torch.div(torch.ones(3, dtype=torch.complex64, device=d), 2, rounding_mode="floor"),
        NotImplementedError,
        "\"div_floor_cuda\" not implemented for 'ComplexFloat'",
    ),
    "polar-of-bfloat16-and-float32": (
        lambda d: torch.polar(torch.ones(3, dtype=torch.bfloat16, device=d), torch.ones(3, device=d)),
        RuntimeError,
        "Expected both inputs to be Half, Float or Double tensors but got BFloat16 and Float",
    ),
    "solve-of-float16-and-float32": (  # the meta's dtype mismatch comes before the kernel's dispatch
        lambda d: torch.linalg.solve(torch.eye(3, dtype=torch.float16, device=d), torch.eye(3, device=d)),
        RuntimeError,
        "linalg.solve: Expected A and B to have the same dtype, but found A of type Half and B of type Float instead",
    ),
    # unique's host computation sorts: CUDA's unique kernels refuse complex before sorting.
    "unique-of-complex64": (
        lambda d: torch.unique(torch.ones(3, dtype=torch.complex64, device=d)),
        NotImplementedError,
        "\"unique\" not implemented for 'ComplexFloat'",
    ),
    "unique-dim-of-complex64": (
        lambda d: torch.unique(torch.ones(3, dtype=torch.complex64, device=d), dim=0),
        NotImplementedError,
        "\"unique_dim\" not implemented for 'ComplexFloat'",
    ),
    "unique-consecutive-of-complex64": (
        lambda d: torch.unique_consecutive(torch.ones(3, dtype=torch.complex64, device=d)),
        NotImplementedError,
        "\"unique\" not implemented for 'ComplexFloat'",
    ),
    "tril-indices-of-float32": (  # a factory: PyTorch's meta refuses it as a RuntimeError
        lambda d: torch.tril_indices(3, 3, dtype=torch.float32, device=d),
        NotImplementedError,
        "\"tril_indices_cuda\" not implemented for 'Float'",
    ),
    "fmod-of-complex64-and-a-number": (  # JAX's "rem does not accept dtype complex64" leaked
        lambda d: torch.fmod(torch.ones(3, dtype=torch.complex64, device=d), 2),
        NotImplementedError,
        "\"fmod_cuda\" not implemented for 'ComplexFloat'",
    ),
    "remainder-of-complex64-and-a-number": (
        lambda d: torch.ones(3, dtype=torch.complex64, device=d) % 2,
        NotImplementedError,
        "\"remainder_cuda\" not implemented for 'ComplexFloat'",
    ),
    "searchsorted-of-bool": (  # on the promoted dtype of both operands
        lambda d: torch.searchsorted(torch.tensor([False, True], device=d), torch.tensor([True], device=d)),
        NotImplementedError,
        "\"searchsorted_out_cuda\" not implemented for 'Bool'",
    ),
    "minimum-of-float-and-complex": (  # the promoted result is complex (only self was checked)
        lambda d: torch.minimum(torch.ones(2, device=d), torch.ones(2, dtype=torch.complex64, device=d)),
        RuntimeError,
        "minimum not implemented for complex tensors.",
    ),
    "pow-of-bools": (  # computed as int64, PyTorch's meta's result dtype
        lambda d: torch.tensor([True, False], device=d) ** torch.tensor([True, True], device=d),
        NotImplementedError,
        "\"pow_cuda\" not implemented for 'Bool'",
    ),
    "clamp-min-of-bool": (
        lambda d: torch.clamp(torch.tensor([True, False], device=d), min=False),
        NotImplementedError,
        "\"clamp_scalar_cuda\" not implemented for 'Bool'",
    ),
    "round-of-complex64": (
        lambda d: torch.round(torch.ones(3, dtype=torch.complex64, device=d)),
        NotImplementedError,
        "\"round_cuda\" not implemented for 'ComplexFloat'",
    ),
    # Linear algebra of 16-bit floats: eigvals leaked JAX's KeyError, the others computed.
    "eigvals-of-float16": (
        lambda d: torch.linalg.eigvals(torch.eye(2, dtype=torch.float16, device=d)),
        NotImplementedError,
        "\"linalg_eig_out_cuda\" not implemented for 'Half'",
    ),
    "cholesky_inverse-of-bfloat16": (
        lambda d: torch.cholesky_inverse(torch.eye(2, dtype=torch.bfloat16, device=d)),
        NotImplementedError,
        "\"cholesky_inverse_out_cuda\" not implemented for 'BFloat16'",
    ),
    "triangular_solve-of-float16": (
        lambda d: torch.triangular_solve(
            torch.eye(2, dtype=torch.float16, device=d), torch.eye(2, dtype=torch.float16, device=d)
        ),
        NotImplementedError,
        "\"triangular_solve_cuda\" not implemented for 'Half'",
    ),
    "cholesky_solve-of-int32": (  # JAX's TypeError leaked
        lambda d: torch.cholesky_solve(
            torch.eye(2, dtype=torch.int32, device=d), torch.eye(2, dtype=torch.int32, device=d)
        ),
        NotImplementedError,
        "\"cholesky_solve_cuda\" not implemented for 'Int'",
    ),
    "lu_solve-of-float16": (
        lambda d: torch.linalg.lu_solve(
            torch.eye(2, dtype=torch.float16, device=d),
            torch.ones(2, dtype=torch.int32, device=d),
            torch.eye(2, dtype=torch.float16, device=d),
        ),
        NotImplementedError,
        "\"lu_solve_cublas\" not implemented for 'Half'",
    ),
    "_safe_softmax-of-complex64-into-float32": (  # computed
        lambda d: torch.ops.aten._safe_softmax(torch.ones(3, dtype=torch.complex64, device=d), 0, dtype=torch.float32),
        RuntimeError,
        "isneginf does not support complex inputs.",
    ),
}

#: ATen's own checks, which come before any dispatch: the same words on CPU and neuron.
ATEN_CHECKS = {
    "lu_solve-of-int32": lambda d: torch.linalg.lu_solve(
        torch.eye(2, dtype=torch.int32, device=d), torch.ones(2, dtype=torch.int32, device=d), torch.eye(2, device=d)
    ),
    "lu_solve-of-two-dtypes": lambda d: torch.linalg.lu_solve(
        torch.eye(2, device=d), torch.ones(2, dtype=torch.int32, device=d), torch.eye(2, dtype=torch.float16, device=d)
    ),
    "lu_solve-with-int64-pivots": lambda d: torch.linalg.lu_solve(
        torch.eye(2, device=d), torch.ones(2, dtype=torch.int64, device=d), torch.eye(2, device=d)
    ),
    "argmax-of-an-empty-complex64": lambda d: torch.empty(0, dtype=torch.complex64, device=d).argmax(),
    "argmin-of-an-empty-complex64-along-1": lambda d: torch.empty(2, 0, dtype=torch.complex64, device=d).argmin(1),
    "clamp-of-complex32": lambda d: torch.ones(2, dtype=torch.complex32, device=d).clamp(max=1.0),
    "relu-of-complex32": lambda d: torch.ones(2, dtype=torch.complex32, device=d).relu(),
    "clamp_max-of-complex64": lambda d: torch.ones(2, dtype=torch.complex64, device=d).clamp_max(1.0),
    "maximum-of-complex32": lambda d: torch.maximum(*[torch.ones(2, dtype=torch.complex32, device=d)] * 2),
    "inv-of-int32": lambda d: torch.linalg.inv(torch.eye(2, dtype=torch.int32, device=d)),
    "inv-of-float16": lambda d: torch.linalg.inv(torch.eye(2, dtype=torch.float16, device=d)),
    "masked_fill-with-a-1-d-cpu-value": lambda d: torch.zeros(3, device=d).masked_fill(
        torch.ones(3, dtype=torch.bool, device=d), torch.ones(1)
    ),
}


@pytest.mark.parametrize("case", ATEN_CHECKS)
def test_atens_checks_before_the_dispatch_raise_the_cpus_words(case):
    with pytest.raises(RuntimeError) as expected:
        ATEN_CHECKS[case]("cpu")
    with pytest.raises(type(expected.value)) as actual:
        ATEN_CHECKS[case]("neuron")
    assert str(actual.value) == str(expected.value)


@pytest.mark.parametrize("case", REFUSALS)
def test_dtypes_cuda_and_the_cpu_refuse_raise_cudas_error(case):
    call, exception, message = REFUSALS[case]
    with pytest.raises(RuntimeError):  # NotImplementedError is a RuntimeError
        call("cpu")
    with pytest.raises(exception) as refused:
        call("neuron")
    assert str(refused.value) == message
    assert not getattr(refused.value, "__notes__", None)  # raised before tracing: no JAX notes


#: Calls a rule on one operand would refuse, which the CPU computes: addcdiv refuses only two
#: integer operands, bucketize and searchsorted dispatch on their operands' promoted dtype.
COMPUTED_BY_OPERANDS = {
    "addcdiv-of-an-integer-and-a-float": lambda d: torch.addcdiv(
        torch.ones(2, device=d), torch.tensor([1, 2], device=d), torch.tensor([2.0, 4.0], device=d)
    ),
    "bucketize-of-bool-in-integers": lambda d: torch.bucketize(
        torch.tensor([True, False], device=d), torch.tensor([0, 1], device=d)
    ),
    "searchsorted-of-bool-in-integers": lambda d: torch.searchsorted(
        torch.tensor([0, 1], device=d), torch.tensor([True], device=d)
    ),
}


@pytest.mark.parametrize("case", COMPUTED_BY_OPERANDS)
def test_a_rule_on_several_operands_lets_what_the_cpu_computes(case):
    call = COMPUTED_BY_OPERANDS[case]
    torch.testing.assert_close(call("neuron").cpu(), call("cpu"))


def test_a_dtype_the_cpu_computes_and_cuda_refuses_still_computes():
    # The tables join the CPU's dtypes: integer matrix products run on the CPU, so they run here.
    a = torch.arange(6).view(2, 3)
    torch.testing.assert_close((a.to("neuron") @ a.T.to("neuron")).cpu(), a @ a.T)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda d: torch.div(torch.ones(3, dtype=torch.complex64, device=d), 2, rounding_mode=None),
            id="true-division",
        ),
        pytest.param(
            lambda d: torch.ones(3, dtype=torch.complex64, device=d).scatter_reduce(
                0, torch.zeros(3, dtype=torch.int64, device=d), torch.ones(3, dtype=torch.complex64, device=d), "sum"
            ),
            id="scatter_reduce-sum",
        ),
    ],
)
def test_a_kernel_chosen_by_an_argument_refuses_only_when_chosen(call):
    # div's trunc and floor kernels refuse complex numbers, its true division does not; scatter_reduce's
    # sum kernel takes them, its amax, amin, prod and mean kernels do not.
    torch.testing.assert_close(call("neuron").cpu(), call("cpu"))


def test_an_empty_input_is_not_refused_as_kernels_return_before_dispatching():
    empty = torch.empty(0, 3, dtype=torch.int64)
    torch.testing.assert_close(torch.softmax(empty.to("neuron"), 1).cpu(), torch.softmax(empty, 1))


def test_the_table_names_functional_overloads_and_checked_dtypes():
    for op, rules in CUDA_DISPATCH.items():
        assert isinstance(op, torch._ops.OpOverload), op
        assert not op._schema.is_mutable, f"{op} is not functional"
        names = {argument.name for argument in op._schema.arguments}
        for rule in rules:
            on = rule.on if isinstance(rule.on, tuple) else (rule.on,)
            assert on == ("result",) or set(on) <= names, f"{op}: no argument {rule.on!r}"
            if isinstance(rule, Check):
                assert set(rule.together) <= names, f"{op}: no argument in {rule.together!r}"
            if isinstance(rule, Dispatch) and rule.when:
                assert rule.when[0] in names, f"{op}: no argument {rule.when[0]!r}"
            if isinstance(rule, Dispatch):
                assert rule.dtypes & VERIFIED, f"{op}: {rule.kernel} dispatches no checked dtype"
            else:
                # complex32 only where a meta's isComplexType() refuses every complex dtype (clamp's)
                assert isinstance(rule, Check) and rule.refused - {torch.complex32} <= VERIFIED, op
