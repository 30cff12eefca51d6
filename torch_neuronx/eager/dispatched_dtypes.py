"""The dtypes CUDA's kernels dispatch, for ops whose lowering computes more (decision 8).

A lowering is written in JAX, which computes most ops in any dtype; ATen's kernels dispatch on the
data's dtype (``AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...)``) and raise for the others:
``NotImplementedError: "host_softmax" not implemented for 'Long'``. Which dtypes an op accepts
follows CUDA, so a call in a dtype that CUDA's kernel does not dispatch raises CUDA's exception and
message here, though the lowering could compute it (softmax of integers, convolutions of bool,
orderings of complex numbers: results of no defined meaning, which the CPU refuses too).

:data:`CUDA_DISPATCH` holds, for each functional overload, its CUDA kernel's name and dtypes, read
from PyTorch's CUDA sources (``aten/src/ATen/native/cuda``; each entry names its file). The eager
kernel checks a call against it once per call signature, after PyTorch's meta kernel and
TensorIterator's checks, where ATen's kernel would dispatch (eager/kernel.py); a compiled graph
checks each of its nodes at its first call (dynamo/graph.py), as the same ops raise eagerly.

Dtypes CUDA computes and the CPU refuses are another table's (``testing/cuda_dtypes.py``: the
CUDA-dtype phase); float64 and complex128 are the FP64 policy's.
"""

from __future__ import annotations

import dataclasses
import functools
import traceback
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import schema_of
from torch_neuronx.eager.plan import call
from torch_neuronx.lowering import registry
from torch_neuronx.lowering.foreach import element_calls
from torch_neuronx.runtime.arguments import flat_tensors
from torch_neuronx.runtime.dtypes import aten_name

__all__ = ["CUDA_DISPATCH", "Check", "Dispatch", "check_dispatched_dtype", "check_refusal_by_dtype"]

aten = torch.ops.aten

_F, _D, _H, _BF = torch.float32, torch.float64, torch.float16, torch.bfloat16
_C64, _C128 = torch.complex64, torch.complex128
_INTEGRAL = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)

FLOATING = frozenset((_F, _D))
INTEGRAL = frozenset(_INTEGRAL)
COMPLEX = frozenset((_C64, _C128))
#: Every complex dtype, complex32 included: what a ``TORCH_CHECK(!x.is_complex())`` refuses.
ANY_COMPLEX = COMPLEX | {torch.complex32}
BOOL = frozenset((torch.bool,))
HALVES = frozenset((_H, _BF))

#: The dtypes refusals are checked in: those PyTorch's test_ops ``test_dtypes`` verifies every
#: OpInfo's CPU and CUDA lists in. complex32, the barebones unsigned and the float8 dtypes are
#: verified only where an OpInfo claims them, so what CUDA does with them is not known well
#: enough to refuse (neuron computes complex32 in complex64, as its design says).
VERIFIED = FLOATING | INTEGRAL | COMPLEX | BOOL | {_H, _BF}
#: The barebones unsigned dtypes, which no ``AT_DISPATCH_*_TYPES`` macro's integral cases hold: a
#: kernel whose macro is known to leave them out refuses them too (``Dispatch.checked``).
BAREBONES_UNSIGNED = frozenset((torch.uint16, torch.uint32, torch.uint64))


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """The dtypes one CUDA kernel's ``AT_DISPATCH`` macro dispatches: any other raises
    ``NotImplementedError: "<kernel>" not implemented for '<Dtype>'``.

    ``on`` names whose dtype it dispatches on: an argument, ``"result"`` for TensorIterator's
    common dtype (the op's first result), or a tuple of arguments whose dtypes the kernel promotes
    to one first. ``source`` is the kernel's file under
    ``aten/src/ATen/native/cuda`` (PyTorch 2.4). ``when`` is ``(argument, values)`` for a kernel
    that the op runs only for those values of a string argument (scatter_reduce's ``reduce``).
    ``checked`` is the dtypes refused when not dispatched: :data:`VERIFIED`, with
    :data:`BAREBONES_UNSIGNED` for a kernel whose macro was read to leave them out.
    """

    kernel: str
    dtypes: frozenset[torch.dtype]
    on: str | tuple[str, ...]
    source: str
    when: tuple[str, frozenset[object]] | None = None
    checked: frozenset[torch.dtype] = VERIFIED

    def check(self, dtype: torch.dtype, names: dict[str, str] | None = None) -> None:
        if dtype in self.checked and dtype not in self.dtypes:
            raise NotImplementedError(f"\"{self.kernel}\" not implemented for '{aten_name(dtype)}'")


@dataclasses.dataclass(frozen=True)
class Check:
    """A ``TORCH_CHECK`` that refuses ``refused`` dtypes of ``on`` before any dispatch, with its own
    exception and message (``{dtype}`` is the ATen dtype name, ``{<argument>}`` that of a tensor
    argument): a structured meta that CPU and CUDA share and PyTorch's Python meta kernel lacks, or a
    CUDA kernel's own check."""

    refused: frozenset[torch.dtype]
    on: str
    exception: type[Exception]
    message: str
    source: str
    together: tuple[str, ...] = ()  # arguments that must be of a refused dtype too (addcdiv's operands)

    def check(self, dtype: torch.dtype, names: dict[str, str] | None = None) -> None:
        if dtype in self.refused:
            raise self.exception(self.message.format(dtype=aten_name(dtype), **(names or {})))


#: addcdiv's check of integer operands (PointwiseOps.cpp), which CPU and CUDA share.
_ADDCDIV_MESSAGE = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
    "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
    "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
    "for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes."
)


#: polar's ``complex_check_floating`` (TensorFactories.cpp), before CUDA's kernel refuses float16.
_NOT_HALF_FLOAT_DOUBLE = INTEGRAL | BOOL | COMPLEX | {_BF}
_POLAR_MESSAGE = "Expected both inputs to be Half, Float or Double tensors but got {abs} and {angle}"

#: ATen's ``checkFloatingOrComplex`` (LinalgUtils.h), made by a linalg op's structured meta on CPU
#: and CUDA alike, before the dispatch to a kernel that also refuses float16 and bfloat16.
_LINALG_FLOATING_MESSAGE = "{op}: Expected a floating point or complex tensor as input. Got {{dtype}}"


def _linalg_floating_check(op_name: str, on: str) -> Check:
    """The meta's ``checkFloatingOrComplex(A, op_name)``: integers and bool are refused before the
    kernel's dispatch, in the meta's words (which the kernel's own refusal must not replace)."""
    message = _LINALG_FLOATING_MESSAGE.format(op=op_name)
    return Check(INTEGRAL | BOOL, on, RuntimeError, message, "BatchLinearAlgebra.cpp")


def _fast_path_dispatches(operand: str, norm_first: bool = False) -> tuple[Dispatch, ...]:
    """The kernels the fused MHA / encoder-layer fast path dispatches on ``operand``, in order; an
    encoder layer's (``norm_first`` an argument) starts with its layer norm when ``norm_first``."""
    layer_norm = Dispatch(
        "LayerNormKernelImpl",
        FLOATING | HALVES,
        operand,
        "layer_norm_kernel.cu",
        when=("norm_first", frozenset((True,))),
    )
    return (
        *((layer_norm,) if norm_first else ()),
        Dispatch("addmm_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, operand, "Blas.cpp"),
        Dispatch("transform_bias_rescale_qkv", FLOATING | HALVES, operand, "attention.cu"),
    )


def _table(*entries: tuple[Any, Dispatch | Check]) -> dict[Any, tuple[Dispatch | Check, ...]]:
    """The table of ``(overload or tuple of overloads, rule)`` entries: overload -> its rules."""
    table: dict[Any, tuple[Dispatch | Check, ...]] = {}
    for ops, rule in entries:
        for op in ops if isinstance(ops, tuple) else (ops,):
            table[op] = (*table.get(op, ()), rule)
    return table


#: RangeFactories.cu's macros (AT_DISPATCH_INTEGRAL_TYPES, AT_DISPATCH_ALL_TYPES_AND2) leave out the
#: barebones unsigned dtypes, which the CPU's kernels refuse too ("logspace_cpu" for 'UInt32').
_RANGES = VERIFIED | BAREBONES_UNSIGNED
#: The integer division kernels (BinaryDivTruncKernel.cu, BinaryDivFloorKernel.cu,
#: BinaryRemainderKernel.cu: div, remainder, fmod), neg and sign (UnarySignKernels.cu), abs
#: (AbsKernel.cu) and logical_not (UnaryLogicalOpsKernels.cu) dispatch integers with
#: AT_DISPATCH_INTEGRAL_TYPES / AT_DISPATCH_ALL_TYPES_AND*, which leave the barebones unsigned out;
#: the CPU refuses them too ("div_floor_cpu" for 'UInt32', helper-66 and helper-67).
_INTEGRAL_MACROS = VERIFIED | BAREBONES_UNSIGNED

#: floor_divide's kernel, which div(rounding_mode="floor") runs too.
_DIV_FLOOR = Dispatch(
    "div_floor_cuda", FLOATING | INTEGRAL | HALVES, "result", "BinaryDivFloorKernel.cu", checked=_INTEGRAL_MACROS
)

#: Functional overload -> its refusals, checked in order. Each dtype set is CUDA's (the macro in the
#: named file) joined with the CPU's (OpInfo's ``supported_dtypes("cpu")``): a dtype either computes
#: stays computed, so code that runs on the CPU keeps running here.
CUDA_DISPATCH: dict[Any, tuple[Dispatch | Check, ...]] = _table(
    (
        (aten.arange.default, aten.arange.start, aten.arange.start_step),
        Dispatch("arange_cuda", FLOATING | INTEGRAL | HALVES, "result", "RangeFactories.cu", checked=_RANGES),
    ),
    (
        aten.range.step,
        Dispatch("range_cuda", FLOATING | INTEGRAL | HALVES, "result", "RangeFactories.cu", checked=_RANGES),
    ),
    (
        aten.linspace.default,
        Dispatch(
            "linspace_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "result", "RangeFactories.cu", checked=_RANGES
        ),
    ),
    (
        aten.logspace.default,
        Dispatch(
            "logspace_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "result", "RangeFactories.cu", checked=_RANGES
        ),
    ),
    (
        aten.max.dim,
        Check(ANY_COMPLEX, "self", RuntimeError, "max(): does not support complex input", "TensorCompare.cpp"),
    ),
    (
        aten.min.dim,
        Check(ANY_COMPLEX, "self", RuntimeError, "min(): does not support complex input", "TensorCompare.cpp"),
    ),
    (aten.silu.default, Dispatch("silu_cuda", FLOATING | COMPLEX | HALVES, "result", "ActivationSiluKernel.cu")),
    (
        aten._adaptive_avg_pool2d.default,
        Dispatch("adaptive_avg_pool2d_cuda", FLOATING | HALVES, "self", "AdaptiveAveragePooling.cu"),
    ),
    (aten.gelu.default, Dispatch("GeluCUDAKernelImpl", FLOATING | HALVES, "result", "ActivationGeluKernel.cu")),
    (
        aten.adaptive_max_pool3d.default,
        Dispatch("adaptive_max_pool3d_cuda", FLOATING | HALVES, "self", "AdaptiveMaxPooling3d.cu"),
    ),
    (aten.addmv.default, Dispatch("addmv_impl_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "mat", "Blas.cpp")),
    (aten.mv.default, Dispatch("addmv_impl_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "Blas.cpp")),
    (
        aten.atan2.default,
        Dispatch("atan2_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "BinaryGeometricKernels.cu"),
    ),
    (aten.baddbmm.default, Dispatch("baddbmm_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "Blas.cpp")),
    (aten.special_bessel_j1.default, Dispatch("bessel_j1_cuda", FLOATING | INTEGRAL | BOOL, "result", "bessel_j1.cu")),
    (
        aten.binary_cross_entropy.default,
        Dispatch("binary_cross_entropy_out_cuda", FLOATING | HALVES, "result", "Loss.cu"),
    ),
    (aten.ceil.default, Dispatch("ceil_cuda", FLOATING | INTEGRAL | HALVES, "self", "UnaryFractionKernels.cu")),
    (
        aten.special_chebyshev_polynomial_v.default,
        Dispatch("chebyshev_polynomial_v_cuda", FLOATING | INTEGRAL | BOOL, "result", "chebyshev_polynomial_v.cu"),
    ),
    (aten.cummax.default, Dispatch("cummax_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "CumminmaxKernel.cu")),
    (aten.cumsum.default, Dispatch("cumsum_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "result", "CumsumKernel.cu")),
    (
        aten.logcumsumexp.default,
        Dispatch("logcumsumexp_cuda", FLOATING | COMPLEX | HALVES, "self", "LogcumsumexpKernel.cu"),
    ),
    (
        (aten.elu.default, aten.celu.default),
        Dispatch("elu_cuda", FLOATING | HALVES, "result", "ActivationEluKernel.cu"),
    ),
    (aten.floor.default, Dispatch("floor_cuda", FLOATING | INTEGRAL | HALVES, "self", "UnaryFractionKernels.cu")),
    (aten.gcd.default, Dispatch("gcd_cuda", INTEGRAL, "result", "GcdLcmKernel.cu")),
    (aten.grid_sampler_2d.default, Dispatch("grid_sampler_2d_cuda", FLOATING | HALVES, "input", "GridSampler.cu")),
    (aten.hardswish.default, Dispatch("hardswish_cuda", FLOATING | HALVES, "result", "ActivationHardswishKernel.cu")),
    (aten.huber_loss.default, Dispatch("huber_cuda", FLOATING | HALVES, "result", "BinaryMiscOpsKernels.cu")),
    (aten.igammac.default, Dispatch("igammac_cuda", FLOATING | HALVES, "result", "IGammaKernel.cu")),
    (aten.kthvalue.default, Dispatch("kthvalue_cuda", FLOATING | INTEGRAL | HALVES, "self", "Sorting.cu")),
    (aten.leaky_relu.default, Dispatch("leaky_relu_cuda", FLOATING | HALVES, "result", "ActivationLeakyReluKernel.cu")),
    (
        aten.special_log_ndtr.default,
        Dispatch("log_ndtr_cuda", FLOATING | INTEGRAL | BOOL, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.logit.default,
        Dispatch("logit_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.max_pool2d_with_indices_backward.default,
        Dispatch("max_pool2d_with_indices_out_cuda_frame", FLOATING | HALVES, "self", "DilatedMaxPool2d.cu"),
    ),
    (
        aten.max_unpool3d.default,
        Dispatch("max_unpooling3d_forward_kernel", FLOATING | INTEGRAL | HALVES, "self", "MaxUnpooling.cu"),
    ),
    (
        (aten.median.dim, aten.nanmedian.dim),
        Dispatch("median_out_impl", FLOATING | INTEGRAL | HALVES, "self", "Sorting.cu"),
    ),
    (
        (aten.median.default, aten.nanmedian.default),
        Check(BOOL, "self", RuntimeError, "Sort currently does not support bool dtype on CUDA.", "Sort.cpp"),
    ),
    (
        (aten.median.default, aten.nanmedian.default),
        Check(ANY_COMPLEX, "self", RuntimeError, "Sort currently does not support complex dtypes on CUDA.", "Sort.cpp"),
    ),
    (
        aten.clamp_max.Tensor,
        Dispatch("min_elementwise_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "MaxMinElementwiseKernel.cu"),
    ),
    (
        aten.special_modified_bessel_i0.default,
        Dispatch("modified_bessel_i0_cuda", FLOATING | INTEGRAL | BOOL, "result", "modified_bessel_i0.cu"),
    ),
    (
        aten.special_modified_bessel_k1.default,
        Dispatch("modified_bessel_k1_cuda", FLOATING | INTEGRAL | BOOL, "result", "modified_bessel_k1.cu"),
    ),
    (
        aten.multilabel_margin_loss_forward.default,
        Dispatch("multilabel_margin_loss_forward_kernel", FLOATING | HALVES, "self", "MultiLabelMarginCriterion.cu"),
    ),
    (
        aten.nll_loss_forward.default,
        Dispatch("nll_loss_forward_reduce_cuda_kernel_2d", FLOATING | HALVES, "self", "Loss.cu"),
    ),
    (aten.nll_loss2d_forward.default, Dispatch("nll_loss2d_forward_kernel", FLOATING | HALVES, "self", "NLLLoss2d.cu")),
    (
        aten.reflection_pad1d.default,
        Dispatch("reflection_pad1d_out_template", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "ReflectionPad.cu"),
    ),
    (
        aten.reflection_pad2d.default,
        Dispatch("reflection_pad2d_out_template", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "ReflectionPad.cu"),
    ),
    (
        aten.reflection_pad3d.default,
        Dispatch("reflection_pad3d_out_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "ReflectionPad.cu"),
    ),
    (aten.round.decimals, Dispatch("round_cuda", FLOATING | HALVES, "result", "UnaryFractionKernels.cu")),
    (
        aten.bucketize.Tensor,  # on the promoted dtype: Bucketization.cu promotes both first
        Dispatch("searchsorted_out_cuda", FLOATING | INTEGRAL | HALVES, ("self", "boundaries"), "Bucketization.cu"),
    ),
    (
        aten.searchsorted.Tensor,
        Dispatch(
            "searchsorted_out_cuda", FLOATING | INTEGRAL | HALVES, ("sorted_sequence", "self"), "Bucketization.cu"
        ),
    ),
    (
        aten.special_shifted_chebyshev_polynomial_v.default,
        Dispatch(
            "shifted_chebyshev_polynomial_v_cuda",
            FLOATING | INTEGRAL | BOOL,
            "result",
            "shifted_chebyshev_polynomial_v.cu",
        ),
    ),
    (aten.smooth_l1_loss.default, Dispatch("smooth_l1_cuda", FLOATING | HALVES, "result", "BinaryMiscOpsKernels.cu")),
    (aten.softshrink.default, Dispatch("softshrink_check", FLOATING | HALVES, "self", "ActivationSoftshrinkKernel.cu")),
    (
        aten.linalg_solve_triangular.default,
        Dispatch("triangular_solve_cuda", FLOATING | COMPLEX, "self", "BatchLinearAlgebraLibBlas.cpp"),
    ),
    (
        aten.triangular_solve.default,
        Dispatch("triangular_solve_cuda", FLOATING | COMPLEX, "A", "BatchLinearAlgebraLibBlas.cpp"),
    ),
    (
        aten._cholesky_solve_helper.default,
        Dispatch("cholesky_solve_cuda", FLOATING | COMPLEX, "self", "linalg/BatchLinearAlgebra.cpp"),
    ),
    (
        (aten._unique2.default, aten.unique_consecutive.default),
        Dispatch("unique", FLOATING | INTEGRAL | BOOL | HALVES, "self", "Unique.cu"),
    ),
    (
        aten.hash_tensor.default,
        Dispatch("xor_sum_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "ReduceSumProdKernel.cu"),
    ),
    (
        (
            aten.clamp.Tensor,
            aten.clamp.default,
            aten.hardtanh.default,
            aten.relu.default,
            aten.clamp_min.default,
            aten.clamp_max.default,
        ),
        Check(
            ANY_COMPLEX,
            "self",
            NotImplementedError,
            "clamp is not supported for complex types",
            "TensorCompare.cpp",
        ),
    ),
    (aten.relu.default, Check(BOOL, "self", RuntimeError, "Boolean inputs not supported for relu", "Activation.cpp")),
    (
        aten.fmax.default,
        Check(ANY_COMPLEX, "result", RuntimeError, "fmax not implemented for complex tensors.", "BinaryOps.cpp"),
    ),
    (
        aten.maximum.default,
        Check(ANY_COMPLEX, "result", RuntimeError, "maximum not implemented for complex tensors.", "BinaryOps.cpp"),
    ),
    (
        aten.soft_margin_loss.default,
        Check(
            INTEGRAL | BOOL,
            "self",
            RuntimeError,
            "result type Float can't be cast to the desired output type {dtype}",
            "Loss.cpp",
        ),
    ),
    (
        aten.native_group_norm.default,
        Dispatch("GroupNormKernelImpl", FLOATING | HALVES, "input", "group_norm_kernel.cu"),
    ),
    (
        aten._adaptive_avg_pool3d.default,
        Dispatch("adaptive_avg_pool3d_cuda", FLOATING | HALVES, "self", "AdaptiveAveragePooling3d.cu"),
    ),
    (
        aten.addcmul.default,
        Dispatch("addcmul_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "result", "PointwiseOpsKernel.cu"),
    ),
    (aten.special_airy_ai.default, Dispatch("airy_ai_cuda", FLOATING | INTEGRAL | BOOL, "result", "airy_ai.cu")),
    (
        aten.avg_pool2d.default,
        Dispatch("avg_pool2d_out_cuda_frame", FLOATING | {torch.int64} | HALVES, "self", "AveragePool2d.cu"),
    ),
    (
        (
            aten.native_batch_norm.default,
            aten._native_batch_norm_legit_functional.default,
            aten._native_batch_norm_legit.no_stats,
        ),
        Dispatch("batch_norm_stats_cuda", FLOATING | HALVES, "input", "Normalization.cu"),
    ),
    (
        aten._batch_norm_with_update_functional.default,
        Check(
            INTEGRAL | COMPLEX | BOOL,
            "input",
            RuntimeError,
            "getCudnnDataTypeFromScalarType() not supported for {dtype}",
            "Types.cpp",
        ),
    ),
    (aten.special_bessel_y0.default, Dispatch("bessel_y0_cuda", FLOATING | INTEGRAL | BOOL, "result", "bessel_y0.cu")),
    (aten.bmm.default, Dispatch("baddbmm_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "Blas.cpp")),
    (aten._trilinear.default, Dispatch("baddbmm_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "i1", "Blas.cpp")),
    (
        aten.special_chebyshev_polynomial_t.default,
        Dispatch("chebyshev_polynomial_t_cuda", FLOATING | INTEGRAL | BOOL, "result", "chebyshev_polynomial_t.cu"),
    ),
    (
        aten.special_chebyshev_polynomial_w.default,
        Dispatch("chebyshev_polynomial_w_cuda", FLOATING | INTEGRAL | BOOL, "result", "chebyshev_polynomial_w.cu"),
    ),
    (aten.cummin.default, Dispatch("cummin_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "CumminmaxKernel.cu")),
    (
        aten.div.Tensor_mode,
        Dispatch(
            "div_trunc_cuda",
            FLOATING | INTEGRAL | HALVES,
            "result",
            "BinaryDivTruncKernel.cu",
            checked=_INTEGRAL_MACROS,
            when=("rounding_mode", frozenset(("trunc",))),
        ),
    ),
    (aten.div.Tensor_mode, dataclasses.replace(_DIV_FLOOR, when=("rounding_mode", frozenset(("floor",))))),
    (aten.floor_divide.default, _DIV_FLOOR),
    (
        aten.special_entr.default,
        Dispatch("entr_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        (aten.fmod.Tensor, aten.fmod.Scalar),
        Dispatch(
            "fmod_cuda", FLOATING | INTEGRAL | HALVES, "result", "BinaryRemainderKernel.cu", checked=_INTEGRAL_MACROS
        ),
    ),
    (
        aten.abs.default,
        Dispatch(
            "abs_cuda", FLOATING | INTEGRAL | COMPLEX | BOOL | HALVES, "self", "AbsKernel.cu", checked=_INTEGRAL_MACROS
        ),
    ),
    (
        aten.sign.default,
        Dispatch(
            "sign_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "UnarySignKernels.cu", checked=_INTEGRAL_MACROS
        ),
    ),
    (  # sgn of a real tensor is sign's kernel
        aten.sgn.default,
        Dispatch(
            "sign_cuda",
            FLOATING | INTEGRAL | COMPLEX | BOOL | HALVES,
            "self",
            "UnarySignKernels.cu",
            checked=_INTEGRAL_MACROS,
        ),
    ),
    (
        aten.logical_not.default,
        Dispatch(
            "logical_not_cuda",
            FLOATING | INTEGRAL | COMPLEX | BOOL | HALVES,
            "self",
            "UnaryLogicalOpsKernels.cu",
            checked=_INTEGRAL_MACROS,
        ),
    ),
    (aten.glu.default, Dispatch("glu_cuda", FLOATING | HALVES, "result", "ActivationGluKernel.cu")),
    (
        aten.hardshrink.default,
        Dispatch("hardshrink_cuda", FLOATING | HALVES, "result", "ActivationHardshrinkKernel.cu"),
    ),
    (
        aten.special_hermite_polynomial_h.default,
        Dispatch("hermite_polynomial_h_cuda", FLOATING | INTEGRAL | BOOL, "result", "hermite_polynomial_h.cu"),
    ),
    (aten.hypot.default, Dispatch("hypot_cuda", FLOATING | HALVES, "result", "BinaryGeometricKernels.cu")),
    (aten.im2col.default, Dispatch("im2col_out_cuda", FLOATING | COMPLEX | BOOL | HALVES, "self", "Im2Col.cu")),
    (
        aten.special_laguerre_polynomial_l.default,
        Dispatch("laguerre_polynomial_l_cuda", FLOATING | INTEGRAL | BOOL, "result", "laguerre_polynomial_l.cu"),
    ),
    (
        aten.special_legendre_polynomial_p.default,
        Dispatch("legendre_polynomial_p_cuda", FLOATING | INTEGRAL | BOOL, "result", "legendre_polynomial_p.cu"),
    ),
    (
        (aten.log_sigmoid_forward.default, aten.binary_cross_entropy_with_logits.default),
        Dispatch("log_sigmoid_forward_cuda", FLOATING | HALVES, "self", "ActivationLogSigmoidKernel.cu"),
    ),
    (
        aten.max.default,
        Dispatch("max_all_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "ReduceMaxValuesKernel.cu"),
    ),
    (
        aten.max_pool3d_with_indices.default,
        Dispatch("max_pool3d_with_indices_out_frame", FLOATING | INTEGRAL | HALVES, "self", "DilatedMaxPool3d.cu"),
    ),
    (
        aten.amax.default,
        Dispatch("max_values_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "ReduceMaxValuesKernel.cu"),
    ),
    (
        aten.min.default,
        Dispatch("min_all_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "ReduceMinValuesKernel.cu"),
    ),
    (aten.mish.default, Dispatch("mish_cuda", FLOATING | HALVES, "result", "ActivationMishKernel.cu")),
    (
        aten.special_modified_bessel_i1.default,
        Dispatch("modified_bessel_i1_cuda", FLOATING | INTEGRAL | BOOL, "result", "modified_bessel_i1.cu"),
    ),
    (aten.mse_loss.default, Dispatch("mse_cuda", FLOATING | HALVES, "result", "BinaryMiscOpsKernels.cu")),
    (
        aten.special_ndtri.default,
        Dispatch("ndtri_cuda", FLOATING | INTEGRAL | BOOL, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (aten.polar.default, Check(_NOT_HALF_FLOAT_DOUBLE, "abs", RuntimeError, _POLAR_MESSAGE, "TensorFactories.cpp")),
    (aten.polar.default, Check(_NOT_HALF_FLOAT_DOUBLE, "angle", RuntimeError, _POLAR_MESSAGE, "TensorFactories.cpp")),
    (aten.polar.default, Dispatch("polar_cuda", FLOATING, "abs", "ComplexKernel.cu")),
    (
        (aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor),
        Dispatch(
            "remainder_cuda",
            FLOATING | INTEGRAL | HALVES,
            "result",
            "BinaryRemainderKernel.cu",
            checked=_INTEGRAL_MACROS,
        ),
    ),
    (
        aten.neg.default,
        Dispatch(
            "neg_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "UnarySignKernels.cu", checked=_INTEGRAL_MACROS
        ),
    ),
    (
        aten.special_scaled_modified_bessel_k0.default,
        Dispatch(
            "scaled_modified_bessel_k0_cuda", FLOATING | INTEGRAL | BOOL, "result", "scaled_modified_bessel_k0.cu"
        ),
    ),
    (
        aten.special_shifted_chebyshev_polynomial_t.default,
        Dispatch(
            "shifted_chebyshev_polynomial_t_cuda",
            FLOATING | INTEGRAL | BOOL,
            "result",
            "shifted_chebyshev_polynomial_t.cu",
        ),
    ),
    (
        aten.special_shifted_chebyshev_polynomial_w.default,
        Dispatch(
            "shifted_chebyshev_polynomial_w_cuda",
            FLOATING | INTEGRAL | BOOL,
            "result",
            "shifted_chebyshev_polynomial_w.cu",
        ),
    ),
    (aten._softmax.default, Dispatch("host_softmax", FLOATING | HALVES, "self", "SoftMax.cu")),
    (
        aten.special_spherical_bessel_j0.default,
        Dispatch("spherical_bessel_j0_cuda", FLOATING | INTEGRAL | BOOL, "result", "spherical_bessel_j0.cu"),
    ),
    (
        aten.polygamma.default,
        Dispatch("polygamma_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnaryGammaKernels.cu"),
    ),
    (
        aten.special_xlog1py.default,
        Dispatch("xlog1py_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "BinaryMiscOpsKernels.cu"),
    ),
    (aten.special_zeta.default, Dispatch("zeta_cuda", FLOATING | INTEGRAL | BOOL, "result", "ZetaKernel.cu")),
    (
        (aten.sort.default, aten.sort.stable),
        Check(ANY_COMPLEX, "self", RuntimeError, "Sort currently does not support complex dtypes on CUDA.", "Sort.cpp"),
    ),
    (  # refused only when both operands are integers (bool counts as one)
        aten.addcdiv.default,
        Check(INTEGRAL | BOOL, "tensor1", RuntimeError, _ADDCDIV_MESSAGE, "PointwiseOps.cpp", ("tensor2",)),
    ),
    (
        aten.fmin.default,
        Check(ANY_COMPLEX, "result", RuntimeError, "fmin not implemented for complex tensors.", "BinaryOps.cpp"),
    ),
    (
        aten.minimum.default,
        Check(ANY_COMPLEX, "result", RuntimeError, "minimum not implemented for complex tensors.", "BinaryOps.cpp"),
    ),
    (aten.topk.default, Dispatch("topk_out_cuda", FLOATING | INTEGRAL | HALVES, "self", "TensorTopK.cu")),
    (aten.segment_reduce.default, Dispatch("segment_reduce_cuda", FLOATING | HALVES, "data", "SegmentReduce.cu")),
    (
        aten.adaptive_max_pool2d.default,
        Dispatch("adaptive_max_pool2d_cuda", FLOATING | HALVES, "self", "AdaptiveMaxPooling2d.cu"),
    ),
    (
        (aten.addmm.default, aten.mm.default, aten.addbmm.default),
        Dispatch("addmm_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "Blas.cpp"),
    ),
    (
        aten.aminmax.default,
        Dispatch("aminmax_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "self", "ReduceAMinMaxKernel.cu"),
    ),
    (
        aten.avg_pool3d.default,
        Dispatch("avg_pool3d_out_cuda", FLOATING | {torch.int64} | HALVES, "self", "AveragePool3d.cu"),
    ),
    (aten.special_bessel_j0.default, Dispatch("bessel_j0_cuda", FLOATING | INTEGRAL | BOOL, "result", "bessel_j0.cu")),
    (aten.special_bessel_y1.default, Dispatch("bessel_y1_cuda", FLOATING | INTEGRAL | BOOL, "result", "bessel_y1.cu")),
    # cdist_impl's floating-point checks come first: the lowering's dtype rule (lowering/distance.py).
    (aten._cdist_forward.default, Dispatch("cdist_cuda", FLOATING, "x1", "DistanceKernel.cu")),
    (aten._pdist_forward.default, Dispatch("pdist_cuda", FLOATING, "self", "DistanceKernel.cu")),
    (aten._pdist_backward.default, Dispatch("pdist_cuda_backward", FLOATING, "self", "DistanceKernel.cu")),
    (
        aten.special_chebyshev_polynomial_u.default,
        Dispatch("chebyshev_polynomial_u_cuda", FLOATING | INTEGRAL | BOOL, "result", "chebyshev_polynomial_u.cu"),
    ),
    (
        aten.cumprod.default,
        Dispatch("cumprod_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "result", "CumprodKernel.cu"),
    ),
    (
        (aten.dot.default, aten.vdot.default),
        Dispatch("dot", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "Blas.cpp"),
    ),
    (
        aten.special_erfcx.default,
        Dispatch("erfcx_cuda", FLOATING | INTEGRAL | BOOL, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (aten.frac.default, Dispatch("frac_cuda", FLOATING | HALVES, "result", "UnaryFractionKernels.cu")),
    (aten.grid_sampler_3d.default, Dispatch("grid_sampler_3d_cuda", FLOATING | HALVES, "input", "GridSampler.cu")),
    (
        aten.hardsigmoid.default,
        Dispatch("hardsigmoid_cuda", FLOATING | HALVES, "result", "ActivationHardsigmoidKernel.cu"),
    ),
    (
        aten.special_hermite_polynomial_he.default,
        Dispatch("hermite_polynomial_he_cuda", FLOATING | INTEGRAL | BOOL, "result", "hermite_polynomial_he.cu"),
    ),
    (aten.igamma.default, Dispatch("igamma_cuda", FLOATING | HALVES, "result", "IGammaKernel.cu")),
    (aten.index_reduce.default, Dispatch("index_reduce", FLOATING | INTEGRAL | HALVES, "self", "Indexing.cu")),
    (aten.lcm.default, Dispatch("lcm_cuda", INTEGRAL, "result", "GcdLcmKernel.cu")),
    ((aten.lerp.Scalar, aten.lerp.Tensor), Dispatch("lerp_cuda", FLOATING | COMPLEX | HALVES, "result", "Lerp.cu")),
    (aten._log_softmax.default, Dispatch("host_softmax", FLOATING | HALVES, "self", "SoftMax.cu")),
    (
        aten.max_pool2d_with_indices.default,
        Dispatch("max_pool2d_with_indices_out_cuda_frame", FLOATING | INTEGRAL | HALVES, "self", "DilatedMaxPool2d.cu"),
    ),
    (
        aten.max_unpool2d.default,
        Dispatch("max_unpooling2d_forward_kernel", FLOATING | INTEGRAL | HALVES, "self", "MaxUnpooling.cu"),
    ),
    (
        aten.clamp_min.Tensor,
        Dispatch("max_elementwise_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "MaxMinElementwiseKernel.cu"),
    ),
    (
        aten.amin.default,
        Dispatch("min_values_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "ReduceMinValuesKernel.cu"),
    ),
    (aten.mode.default, Dispatch("cuda_mode", FLOATING | INTEGRAL | BOOL | HALVES, "self", "TensorModeKernel.cu")),
    (
        aten.special_modified_bessel_k0.default,
        Dispatch("modified_bessel_k0_cuda", FLOATING | INTEGRAL | BOOL, "result", "modified_bessel_k0.cu"),
    ),
    (
        aten.multi_margin_loss.default,
        Dispatch("multi_margin_loss_cuda", FLOATING | HALVES, "self", "MultiMarginLoss.cu"),
    ),
    (aten.nextafter.default, Dispatch("nextafter_cuda", FLOATING | HALVES, "result", "StepKernel.cu")),
    (  # on the operands' common dtype: PyTorch's meta gives bool ** bool an int64 result
        aten.pow.Tensor_Tensor,
        Dispatch("pow_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, ("self", "exponent"), "PowKernel.cu"),
    ),
    (  # every Scalar-bounded clamp reaches launch_clamp_scalar (TensorCompare.cu)
        (aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default),
        Dispatch("clamp_scalar_cuda", FLOATING | INTEGRAL | HALVES, "result", "TensorCompare.cu"),
    ),
    (
        aten.special_scaled_modified_bessel_k1.default,
        Dispatch(
            "scaled_modified_bessel_k1_cuda", FLOATING | INTEGRAL | BOOL, "result", "scaled_modified_bessel_k1.cu"
        ),
    ),
    (
        aten.special_shifted_chebyshev_polynomial_u.default,
        Dispatch(
            "shifted_chebyshev_polynomial_u_cuda",
            FLOATING | INTEGRAL | BOOL,
            "result",
            "shifted_chebyshev_polynomial_u.cu",
        ),
    ),
    (aten.softplus.default, Dispatch("softplus_cuda", FLOATING | HALVES, "result", "ActivationSoftplusKernel.cu")),
    (
        aten.threshold.default,
        Dispatch("threshold_cuda", FLOATING | INTEGRAL | HALVES, "result", "ActivationThresholdKernel.cu"),
    ),
    (aten.trunc.default, Dispatch("trunc_cuda", FLOATING | INTEGRAL | HALVES, "result", "UnaryFractionKernels.cu")),
    (
        aten.xlogy.Tensor,
        Dispatch("xlogy_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "BinaryMiscOpsKernels.cu"),
    ),
    (aten.erf.default, Dispatch("erf_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu")),
    (
        aten.erfc.default,
        Dispatch("erfc_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.erfinv.default,
        Dispatch("erfinv_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.lgamma.default,
        Dispatch("lgamma_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnaryGammaKernels.cu"),
    ),
    (
        aten.digamma.default,
        Dispatch("digamma_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnaryGammaKernels.cu"),
    ),
    (aten.i0.default, Dispatch("i0_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu")),
    (
        aten.special_i0e.default,
        Dispatch("i0e_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.special_i1.default,
        Dispatch("i1_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.special_i1e.default,
        Dispatch("i1e_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "UnarySpecialOpsKernel.cu"),
    ),
    (
        aten.signbit.default,
        Check(
            ANY_COMPLEX, "self", NotImplementedError, "signbit is not implemented for complex tensors.", "UnaryOps.cpp"
        ),
    ),
    (
        (aten.copysign.Tensor, aten.copysign.Scalar),
        Dispatch("copysign_cuda", FLOATING | INTEGRAL | BOOL | HALVES, "result", "CopysignKernel.cu"),
    ),
    # round_out copies integers without dispatching (UnaryOps.cpp); bool and complex reach the kernel.
    (aten.round.default, Dispatch("round_cuda", FLOATING | INTEGRAL | HALVES, "self", "UnaryFractionKernels.cu")),
    # The CPU's OpInfo lists every dtype, but its samples are float32 whatever the dtype asked:
    # the CPU's kernel refuses integers and bool as CUDA's does.
    (aten._safe_softmax.default, Dispatch("host_softmax", FLOATING | HALVES, "result", "SoftMax.cu")),
    # _safe_softmax (SoftMax.cpp, every device) then masks the rows where isneginf(self) holds.
    (
        aten._safe_softmax.default,
        Check(ANY_COMPLEX, "self", RuntimeError, "isneginf does not support complex inputs.", "UnaryOps.cpp"),
    ),
    (
        aten.native_layer_norm.default,
        Dispatch("LayerNormKernelImpl", FLOATING | HALVES, "input", "layer_norm_kernel.cu"),
    ),
    # The fused fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer (transformers/
    # cuda/attention.cu, transformer.cpp): the QKV projection's gemm, then the bias-rescale kernel;
    # with norm_first the layer's first kernel is the layer norm's.
    *(
        (op, rule)
        for op, operand, norm_first in (
            (aten._native_multi_head_attention.default, "query", False),
            (aten._transformer_encoder_layer_fwd.default, "src", True),
        )
        for rule in _fast_path_dispatches(operand, norm_first)
    ),
    # scatter_reduce's amax, amin, prod and mean run cuda_scatter_gather_base_kernel's generic
    # reduction (AT_DISPATCH_ALL_TYPES_AND2); sum runs its ReduceAdd one, which takes every dtype.
    (
        aten.scatter_reduce.two,
        Dispatch(
            "cuda_scatter_gather_base_kernel_func",
            FLOATING | INTEGRAL | BOOL | HALVES,
            "self",
            "ScatterGatherKernel.cu",
            when=("reduce", frozenset(("amax", "amin", "prod"))),
        ),
    ),
    (
        aten.scatter_reduce.two,
        Dispatch(
            "cuda_scatter_gather_base_kernel_func",
            FLOATING | INTEGRAL | HALVES,
            "self",
            "ScatterGatherKernel.cu",
            when=("reduce", frozenset(("mean",))),
        ),
    ),
    (
        aten.var_mean.correction,
        Check(
            INTEGRAL | BOOL,
            "self",
            RuntimeError,
            "var_mean only support floating point and complex dtypes",
            "ReduceOps.cpp",
        ),
    ),
    (
        aten.std_mean.correction,
        Check(
            INTEGRAL | BOOL,
            "self",
            RuntimeError,
            "std_mean only support floating point and complex dtypes",
            "ReduceOps.cpp",
        ),
    ),
    (
        aten.replication_pad1d.default,
        Dispatch("replication_pad1d_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "ReplicationPadding.cu"),
    ),
    (
        aten.replication_pad2d.default,
        Dispatch("replication_pad2d_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "ReplicationPadding.cu"),
    ),
    (
        aten.replication_pad3d.default,
        Dispatch("replication_pad3d_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "self", "ReplicationPadding.cu"),
    ),
    (aten.logaddexp.default, Dispatch("logaddexp_cuda", FLOATING | COMPLEX | HALVES, "result", "LogAddExpKernel.cu")),
    (aten.logaddexp2.default, Dispatch("logaddexp2_cuda", FLOATING | HALVES, "result", "LogAddExpKernel.cu")),
    (
        aten.linalg_cross.default,
        Dispatch("cross_cuda", FLOATING | INTEGRAL | COMPLEX | HALVES, "result", "CrossKernel.cu"),
    ),
    # Linear algebra: the cuSOLVER kernels (linalg/BatchLinearAlgebraLib.cpp) that CUDA's default
    # backend runs for one small square matrix (up to 32 by 32 for the SVD). Other shapes and batches
    # may run another cuSOLVER, cuBLAS or MAGMA kernel (lu_factor_magma_batched for a rectangular
    # LU), which dispatches the same dtypes under its own name.
    (aten.cholesky.default, Dispatch("cholesky_cusolver", FLOATING | COMPLEX, "self", "BatchLinearAlgebraLib.cpp")),
    (aten.linalg_cholesky_ex.default, _linalg_floating_check("linalg.cholesky", "self")),
    (
        aten.linalg_cholesky_ex.default,
        Dispatch("cholesky_cusolver", FLOATING | COMPLEX, "self", "BatchLinearAlgebraLib.cpp"),
    ),
    (
        (aten.linalg_lu.default, aten.linalg_lu_factor_ex.default),
        Dispatch("lu_factor_cusolver", FLOATING | COMPLEX, "A", "BatchLinearAlgebraLib.cpp"),
    ),
    (aten.linalg_ldl_factor_ex.default, _linalg_floating_check("torch.linalg.ldl_factor_ex", "self")),
    (
        aten.linalg_ldl_factor_ex.default,
        Dispatch("ldl_factor_looped_cusolver", FLOATING | COMPLEX, "self", "BatchLinearAlgebraLib.cpp"),
    ),
    (
        aten.linalg_ldl_solve.default,
        Dispatch("ldl_solve_looped_cusolver", FLOATING | COMPLEX, "LD", "BatchLinearAlgebraLib.cpp"),
    ),
    (aten._linalg_solve_ex.default, _linalg_floating_check("linalg.solve", "A")),
    (aten._linalg_det.default, _linalg_floating_check("linalg.det", "A")),
    (
        (aten._linalg_solve_ex.default, aten._linalg_det.default),
        Dispatch("lu_factor_cusolver", FLOATING | COMPLEX, "A", "BatchLinearAlgebraLib.cpp"),
    ),
    (aten._linalg_svd.default, _linalg_floating_check("linalg.svd", "A")),
    (
        aten._linalg_svd.default,
        Dispatch("svd_cuda_gesvdjBatched", FLOATING | COMPLEX, "A", "BatchLinearAlgebraLib.cpp"),
    ),
    (aten.linalg_qr.default, _linalg_floating_check("linalg.qr", "A")),
    (aten.linalg_qr.default, Dispatch("geqrf_cuda", FLOATING | COMPLEX, "A", "BatchLinearAlgebraLib.cpp")),
    (
        aten.linalg_householder_product.default,
        Dispatch("orgqr_cuda", FLOATING | COMPLEX, "input", "BatchLinearAlgebraLib.cpp"),
    ),
    (aten.ormqr.default, Dispatch("orgmr_cuda", FLOATING | COMPLEX, "self", "BatchLinearAlgebraLib.cpp")),
    (
        aten._linalg_eigh.default,
        Dispatch("linalg_eigh_cuda", FLOATING | COMPLEX, "A", "BatchLinearAlgebraLib.cpp"),
    ),
    # Integers and bool never reach the kernel: linalg_eig's toComplexType refuses them first.
    (
        (aten.linalg_eig.default, aten._linalg_eigvals.default),
        Dispatch("linalg_eig_out_cuda", FLOATING | COMPLEX | INTEGRAL | BOOL, "self", "BatchLinearAlgebra.cpp"),
    ),
    (
        aten.cholesky_inverse.default,
        Dispatch("cholesky_inverse_out_cuda", FLOATING | COMPLEX, "self", "BatchLinearAlgebra.cpp"),
    ),
    # lu_solve_kernel's choice for one small square system (n <= 16): batched cuBLAS.
    (
        aten.linalg_lu_solve.default,
        Dispatch("lu_solve_cublas", FLOATING | COMPLEX, "LU", "BatchLinearAlgebraLibBlas.cpp"),
    ),
)


def check_dispatched_dtype(op: Any, metas: list[Any], result: Any) -> None:
    """Raises CUDA's error if ``op`` (a functional overload) is called in a dtype its CUDA kernel
    refuses.

    Args:
        op: the functional ATen overload the call runs.
        metas: the call's arguments as PyTorch sees them (meta tensors), in schema order.
        result: PyTorch's meta result (a tensor, or a tuple whose first item is one), or None when
            the meta kernel refused the call: a refusal by the CUDA kernel's dtype then comes
            first, in CUDA's words, where PyTorch's Python meta kernel words its own (or fails).

    Raises:
        NotImplementedError: ``"<kernel>" not implemented for '<Dtype>'``, as ``AT_DISPATCH`` words
            it, or the exception and message of the ``TORCH_CHECK`` that refuses the dtype.
    """
    elements = element_calls(op, metas)
    if elements is not None:  # a foreach op: CUDA's slow path makes each per-tensor call
        for element_op, element_metas in elements:
            registry.check_rule_first(element_op, element_metas)
            try:
                element_result = call(element_op, element_metas)
            except NotImplementedError:  # ATen's own check of the dtype ("trunc is not supported ...")
                raise
            except RuntimeError as error:
                if _raised_by_python_reference(error):  # its words stand in for CUDA's dispatch
                    check_refusal_by_dtype(element_op, element_metas)
                raise  # ATen's own check, before any dispatch ("minimum not implemented for complex")
            except Exception:  # noqa: BLE001 - a reference's TypeError: the dispatch refuses first
                element_result = None
            if element_result is not None:
                registry.check_dtype_rule(element_op, element_metas)
            check_dispatched_dtype(element_op, element_metas, element_result)
        return
    rules = CUDA_DISPATCH.get(op)
    if rules is None:
        return
    names = [argument.name for argument in schema_of(op).arguments]
    arguments = dict(zip(names, metas, strict=False))
    for rule in _applying(rules, arguments):
        if isinstance(rule.on, tuple):  # the kernel dispatches on its operands' promoted dtype
            operands = [arguments.get(name) for name in rule.on]
            if not all(isinstance(operand, torch.Tensor) for operand in operands):
                continue
            tensor, dtype = operands[0], functools.reduce(torch.promote_types, (o.dtype for o in operands))
        else:
            if rule.on == "result" and result is not None:
                tensor = result[0] if isinstance(result, (tuple, list)) else result
            elif rule.on == "result":  # the meta kernel refused: the result's dtype is its input's
                tensor = arguments.get("self", arguments.get("input"))
                if tensor is None and "dtype" in arguments:  # a factory's: the requested one
                    dtype = arguments["dtype"] or torch.get_default_dtype()
                    tensor = torch.empty(1, dtype=dtype, device="meta")
            else:
                tensor = arguments.get(rule.on)
            if not isinstance(tensor, torch.Tensor):
                continue
            dtype = tensor.dtype
        if isinstance(rule, Dispatch) and tensor.numel() == 0 and torch.Tag.pointwise not in op.tags:
            # kernels return before dispatching when there is nothing to compute, but TensorIterator's
            # dispatch their dtype first (erfc of an empty complex tensor raises on CPU and CUDA)
            continue
        if isinstance(rule, Check) and not all(
            isinstance(arguments.get(name), torch.Tensor) and arguments[name].dtype in rule.refused
            for name in rule.together
        ):
            continue
        rule.check(dtype, _dtype_names(arguments))


#: Where PyTorch's Python meta kernels and references live (their checks are not ATen's).
_PYTHON_REFERENCE_FILES = ("torch/_refs/", "torch/_prims", "torch/_decomp/", "torch/_meta_registrations.py")


def _raised_by_python_reference(error: BaseException) -> bool:
    """Whether ``error`` was raised in a Python meta kernel or reference rather than by ATen's C++."""
    frames = traceback.extract_tb(error.__traceback__)
    return any(marker in frame.filename.replace("\\", "/") for frame in frames for marker in _PYTHON_REFERENCE_FILES)


def check_refusal_by_dtype(op: Any, metas: list[Any]) -> None:
    """Raises CUDA's dtype error for a call PyTorch's meta kernel refused, if the dtype caused the
    refusal: when CUDA's kernel refuses the dtype and the meta kernel accepts the same call with the
    refused tensor (alone, or with the tensors that share its dtype) in float32 (float64 where
    another tensor is float32). Python references refuse such dtypes in their own words, deeper in
    (mean's "could not infer output dtype" for group_norm of integers, "Subtraction ... with two
    bool tensors" for frac of bool), where CUDA's dispatch names its kernel. Returns otherwise: the
    meta kernel's error then stands (a shape error, or a dtype mismatch, comes before any dispatch).

    Raises:
        NotImplementedError, RuntimeError: CUDA's error, as :func:`check_dispatched_dtype`.
    """
    elements = element_calls(op, metas)
    if elements is not None:  # a foreach op: each per-tensor call of CUDA's slow path
        for element_op, element_metas in elements:
            check_refusal_by_dtype(element_op, element_metas)
        return
    try:
        check_dispatched_dtype(op, metas, None)
    except RuntimeError as cuda_error:  # NotImplementedError too
        refused = _refused_tensor(op, metas)
        if refused is None:
            return
        dtype = _substitute_dtype(refused, metas)
        alone = [torch.empty_like(m, dtype=dtype) if m is refused else m for m in metas]
        shared = [  # with the tensors that share its dtype: binary_cross_entropy_with_logits' target
            torch.empty_like(m, dtype=dtype) if isinstance(m, torch.Tensor) and m.dtype == refused.dtype else m
            for m in metas
        ]
        for accepted in (alone, shared):
            try:
                call(op, accepted)
            except Exception:  # noqa: BLE001, S112 - refused for another reason too
                continue
            raise cuda_error from None


def _substitute_dtype(refused: Any, metas: list[Any]) -> torch.dtype:
    """The dtype the refused tensor takes to ask the meta kernel whether its dtype caused the
    refusal: float32, or float64 where a tensor argument of another dtype is float32, so that a
    mismatch of the two (``linalg.solve`` of a float16 ``A`` and a float32 ``B``) stays the meta's
    error, as ATen's same-dtype checks come before its dispatch."""
    others = {m.dtype for m in flat_tensors(metas) if isinstance(m, torch.Tensor)} - {refused.dtype}
    return torch.float64 if torch.float32 in others else torch.float32


def _refused_tensor(op: Any, metas: list[Any]) -> Any:
    """The argument whose dtype :func:`check_dispatched_dtype` refused (``self``/``input`` for a
    rule on the result, whose dtype is then its input's)."""
    names = [argument.name for argument in schema_of(op).arguments]
    arguments = dict(zip(names, metas, strict=False))
    for rule in _applying(CUDA_DISPATCH[op], arguments):
        name = rule.on if rule.on != "result" else ("self" if "self" in arguments else "input")
        tensor = arguments.get(name)
        if isinstance(tensor, torch.Tensor):
            try:
                rule.check(tensor.dtype, _dtype_names(arguments))
            except RuntimeError:
                return tensor
    return None


def _dtype_names(arguments: dict[str, Any]) -> dict[str, str]:
    """Tensor argument -> its ATen dtype name, for a :class:`Check`'s message."""
    return {name: aten_name(value.dtype) for name, value in arguments.items() if isinstance(value, torch.Tensor)}


def _applying(rules: tuple[Dispatch | Check, ...], arguments: dict[str, Any]) -> list[Dispatch | Check]:
    """The rules whose kernel the call runs: a :class:`Dispatch` with ``when`` applies only for
    those values of its argument."""
    return [
        rule
        for rule in rules
        if not (isinstance(rule, Dispatch) and rule.when) or arguments.get(rule.when[0]) in rule.when[1]
    ]
