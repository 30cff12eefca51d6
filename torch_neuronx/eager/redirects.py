"""Ops routed to other overloads: schemas that hide a mutation, and out= factories.

``aten::native_batch_norm`` updates ``running_mean`` and ``running_var`` in training mode although
its schema does not mark them as written (a legacy of the op). Its ``_native_batch_norm_legit``
overloads declare the same computation properly, so eager (and the CPU fallback, which writes back
exactly the declared mutations) stays correct by calling those.

``aten::arange.start_out``, ``aten::range.out``, ``aten::linspace.out`` and ``aten::logspace.out``
compute in the out tensor's dtype; each is the
functional factory with that dtype, copied into ``out``. ``aten::abs.out`` follows ATen's dtype rule
for it (torch/_refs' abs refuses a complex ``out`` for a complex input, which ATen accepts), and
``aten::bernoulli.out`` draws in the out tensor's dtype. ``aten::histc.out`` copies into any
``out``, as CUDA does. ``x << y`` and ``x >> y`` run as ``bitwise_left_shift``/``bitwise_right_shift``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from torch_neuronx._compat.aten_checks import stream_text
from torch_neuronx._compat.torch_internals import infer_size
from torch_neuronx.eager.dispatched_dtypes import check_dispatched_dtype
from torch_neuronx.eager.runners import resize_output
from torch_neuronx.lowering.creation import arange_bounds_rule, arange_size, counts_in_int64
from torch_neuronx.runtime.dtypes import aten_name

aten = torch.ops.aten


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``torch.native_batch_norm``: normalised output, saved mean, saved inverse std."""
    if (running_mean is None) != (running_var is None):
        provided, missing = ("running_mean", "running_var") if running_var is None else ("running_var", "running_mean")
        raise RuntimeError(f"{missing} is None, but {provided} is provided")
    if running_mean is None:
        return aten._native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
    if training:
        return aten._native_batch_norm_legit.default(
            input, weight, bias, running_mean, running_var, training, momentum, eps
        )
    return aten._native_batch_norm_legit_no_training.default(
        input, weight, bias, running_mean, running_var, momentum, eps
    )


def _into(out, result):
    """``out`` holding ``result``'s values, as ATen's range and linspace kernels write them: an ``out``
    with as many elements keeps its shape and strides and takes the values in row-major order (a
    strided view included); any other ``out`` is resized to ``result``'s shape first."""
    if out.numel() != result.numel():
        out.resize_(result.shape)
    return out.copy_(result.reshape(out.shape))


def arange_out(start, end, step=1, *, out):
    """``torch.arange(..., out=)``, which ``torch.arange(..., dtype=)`` also reaches: computed in the
    out tensor's dtype, as the CPU kernel does (an integer out truncates float bounds), not computed
    in the default dtype and then cast."""
    return _into(out, aten.arange.start_step(start, end, step, dtype=out.dtype, device=out.device))


#: int64 counts in integers (and refuses the step); bool is no dtype of arange's kernels.
_NOT_TRUNCATED = (torch.int64, torch.bool)


def arange_with_truncated_step(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::arange.start_step`` for the eager ``kernel``, also for an integer dtype other than
    int64 whose step truncates to 0: each of the ``ceil((end - start) / step)`` elements is
    ``int(start)``. ATen's ``compute_arange_size`` (RangeUtils.h, CPU and CUDA alike) checks the step
    and counts in double for those dtypes, and the kernels step in the truncated integer:
    arange(0, 2, 0.5, dtype=int32) is [0, 0, 0, 0]. int64 counts in integers and refuses the step,
    as PyTorch's meta kernel does for every integer dtype. An infinite step of a floating result
    counts 0 elements in ATen (PyTorch's meta kernel refuses it as not finite). The bounds are
    checked first as ATen checks them (the lowering's rule, ``arange_bounds_rule``)."""

    def arange(start, end, step=1, **options):
        # A complex bound with no imaginary part converts to double (c10's checked_convert) on the
        # CPU; PyTorch's meta kernel refuses any complex bound.
        start, end, step = (v.real if isinstance(v, complex) and v.imag == 0 else v for v in (start, end, step))
        dtype = options.get("dtype")
        if dtype is not None and (dtype.is_complex or dtype == torch.bool):
            # no dtype of arange's kernels: their AT_DISPATCH refuses it before any bounds check
            result = torch.empty(1, dtype=dtype, device="meta")  # one element: an empty one skips the check
            check_dispatched_dtype(aten.arange.start_step, [start, end, step, dtype], result)
        if any(isinstance(v, complex) for v in (start, end, step)):
            return kernel(start, end, step, **options)  # its bounds rule raises ATen's error
        integral = dtype is not None and not (dtype.is_floating_point or dtype in _NOT_TRUNCATED)
        finite_step = not isinstance(step, float) or math.isfinite(step)
        if (integral and finite_step and step != 0 and int(step) == 0) or not finite_step:
            arange_bounds_rule({"start": start, "end": end, "step": step, "dtype": dtype})
        if integral and finite_step and step != 0 and int(step) == 0:
            count = torch.arange(start, end, step, dtype=torch.float64, device="meta").numel()  # ATen's checks
            return torch.full((count,), int(start), dtype=dtype, device=options.get("device"))
        if not finite_step:
            result_dtype = dtype if dtype is not None else torch.get_default_dtype()
            return torch.empty(0, dtype=result_dtype, device=options.get("device"))
        if counts_in_int64(start, end, step, dtype):
            arange_bounds_rule({"start": start, "end": end, "step": step, "dtype": dtype})  # bounds fit int64
            start, end, step = _int64_counted(start, end, step, dtype)
        return kernel(start, end, step, **options)

    return arange


def _int64_counted(start, end, step, dtype) -> tuple:
    """Bounds for which an int64 arange counts as the CPU's kernel does: its count in int64
    arithmetic (:func:`arange_size`) differs from the exact one when ``end - start + step`` wraps,
    so ``arange(-2**63, 2**63 - 1, 2**62)`` is empty on the CPU; the bounds converted to int64 then
    get the ``end`` of that count. The bounds are returned as they are otherwise (an invalid count
    is the bounds rule's)."""
    size = arange_size(start, end, step, dtype)
    first, last, stride = int(start), int(end), int(step)
    if size is None or not 0 <= size < 2.0**63 or int(size) == max(-(-(last - first) // stride), 0):
        return start, end, step
    return first, first + int(size) * stride, stride


def range_out(start, end, step=1, *, out):
    """``torch.range(..., out=)``, which ``torch.range(...)`` also reaches (its composite kernel calls
    ``range_out``), computed in the out tensor's dtype."""
    return _into(out, aten.range.step(start, end, step, dtype=out.dtype, device=out.device))


def linspace_out(start, end, steps, *, out):
    """``torch.linspace(..., out=)`` (and ``dtype=``), computed in the out tensor's dtype."""
    return _into(out, aten.linspace.default(start, end, steps, dtype=out.dtype, device=out.device))


def logspace_out(start, end, steps, base=10.0, *, out):
    """``torch.logspace(..., out=)`` (and ``dtype=``), computed in the out tensor's dtype (it was
    computed in float32 and refused for an integer out, and rounded differently for a bfloat16 one)."""
    return _into(out, aten.logspace.default(start, end, steps, base, dtype=out.dtype, device=out.device))


def abs_out(self, *, out):
    """``torch.abs(..., out=)`` with ATen's dtype rule (``unary_op_impl_with_complex_to_float_out``):
    a complex input's magnitude goes into any ``out`` it casts to (its real dtype, or its own complex
    dtype), any other input's only into an ``out`` of its own dtype; ``out`` is resized when its
    shape differs (with ATen's warning if it had elements), to the input's layout as TensorIterator
    restrides it, except a real ``out`` of a complex input, which ATen copies into row-major.

    Raises:
        RuntimeError: ``out`` is on another device or of a dtype the rule refuses (the CPU's words).
    """
    if out.device != self.device:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but got out is on {out.device}, different from "
            f"other tensors on {self.device} (when checking argument out in method aten::abs.out)"
        )
    result = aten.abs.default(self)
    if not self.is_complex() and out.dtype != self.dtype:
        raise RuntimeError(f"Found dtype {aten_name(out.dtype)} but expected {aten_name(self.dtype)}")
    if self.is_complex() and out.dtype != self.dtype and not torch.can_cast(result.dtype, out.dtype):
        raise RuntimeError(
            f"result type {aten_name(result.dtype)} can't be cast to the desired output type {aten_name(out.dtype)}"
        )
    if out.shape != result.shape:
        resize_output(out, result.shape)
        if out.numel() and not (self.is_complex() and not out.is_complex()):
            out.as_strided_(result.shape, result.stride())  # TensorIterator's layout, as for any unary op
    return out.copy_(result)


def bernoulli_out(self, *, generator=None, out):
    """``torch.bernoulli(p, out=)``: draws into ``out`` in its own dtype, any dtype ``bernoulli_``
    takes (integer and bool included), as ATen's ``bernoulli_out_impl`` does (``out.resize_`` to
    ``p``'s shape, then ``out.bernoulli_(p)``); PyTorch's meta kernel refused an integer ``out``
    because it casts a float result.

    Raises:
        RuntimeError: ``out`` is on another device (the CPU's words), or ``bernoulli_``'s own errors.
    """
    if out.device != self.device:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but got out is on {out.device}, different from "
            f"other tensors on {self.device} (when checking argument out in method aten::bernoulli.out)"
        )
    if out.shape != self.shape:
        out.resize_(self.shape)
    return out.bernoulli_(self, generator=generator)


def normal_tensor_float_out(mean, std=1.0, *, generator=None, out):
    """``torch.normal(mean: Tensor, std: float, out=)`` as ATen's ``normal_out_impl``
    (DistributionTemplates.h, shared by the CPU and CUDA): ``out`` takes the broadcast of its own
    shape with ``mean``'s (a mean of shape (1,) fills an ``out`` of shape (2, 3); shapes (2,) and
    (3,) raise ``infer_size``'s error), is filled with ``normal_(0, std)`` and then ``add_(mean)``,
    so ``out``'s dtype decides the sampler's dtype checks and the cast of ``mean``. The functional
    op's shape is ``mean``'s alone.

    Raises:
        RuntimeError: ``std`` is negative or NaN (checked first, as ATen does), the shapes do not
            broadcast, ``mean`` is on another device than ``out``, or ``normal_``/``add_`` refuse
            ``out``'s dtype.
    """
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {stream_text(std)}")
    if mean.device != out.device:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but got out is on {out.device}, different from "
            f"other tensors on {mean.device} (when checking argument out in method aten::normal.Tensor_float_out)"
        )
    resize_output(out, infer_size(mean.shape, out.shape))
    out.normal_(0.0, std, generator=generator)
    return out.add_(mean)


def histc_with_cudas_checks(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::histc`` for the eager ``kernel``, checking its arguments as CUDA's
    ``_histc_cuda_template`` does (SummaryOps.cu), in its order and words: "bins must be > 0", then,
    for a given range, "range of [nan, 1] is not finite" and "max must be larger than min". PyTorch's
    meta kernel words the first and the last its own way and calls a NaN bound a reversed range.
    ``min == max`` takes the data's range, checked on the device."""

    def histc(self, bins=100, min=0, max=0):
        if bins <= 0:
            raise RuntimeError("bins must be > 0")
        if min != max:
            if not (math.isfinite(min) and math.isfinite(max)):
                raise RuntimeError(f"range of [{float(min):g}, {float(max):g}] is not finite")
            if min > max:
                raise RuntimeError("max must be larger than min")
        return kernel(self, bins, min, max)

    return histc


def histc_out(self, bins=100, min=0, max=0, *, out):
    """``torch.histc(..., out=)`` as CUDA's ``_histc_out_cuda`` does it: the histogram in the input's
    dtype, copied into ``out`` of any dtype (resized to ``bins`` elements). The CPU refuses an ``out``
    of another dtype; device behaviour follows CUDA."""
    result = aten.histc.default(self, bins, min, max)
    if out.shape != result.shape:
        out.resize_(result.shape)
    return out.copy_(result)


def convolution_recorded_by_tracer(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::convolution`` for the eager ``kernel``; under ``torch.jit.trace`` it runs as
    ``aten::_convolution``, which the tracer records. PyTorch's tracer does not record
    ``convolution`` (``DONT_RECORD_TRACE`` in tools/autograd/gen_trace_type.py) and keeps tracing
    through it, expecting ATen's kernel to call ``_convolution``; without the redirect nothing records
    the convolution and neuron's kernel would see traced sizes. The backend flags are ATen's
    (``at::native::convolution``: cuDNN's benchmark, deterministic, enabled and TF32 settings)."""

    def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        if not torch.jit.is_tracing():
            return kernel(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        cudnn = torch.backends.cudnn
        return aten._convolution.default(
            input,
            weight,
            bias,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            cudnn.benchmark,
            cudnn.deterministic or torch.are_deterministic_algorithms_enabled(),
            cudnn.enabled,
            cudnn.allow_tf32,
        )

    return convolution


def multi_head_attention_weights(kernel: Callable[..., tuple]) -> Callable[..., tuple]:
    """``aten::_native_multi_head_attention`` for the eager ``kernel``: without ``need_weights``, and
    for an empty query, the CPU and CUDA kernels return an undefined weights tensor (``None`` in
    Python, which ``nn.MultiheadAttention(need_weights=False)`` hands on); PyTorch's meta kernel,
    whose results the executable returns, gives an empty tensor."""

    def native_multi_head_attention(*args, **kwargs):
        output, weights = kernel(*args, **kwargs)
        need_weights = kwargs.get("need_weights", args[10] if len(args) > 10 else True)
        return output, weights if need_weights and output.numel() > 0 else None

    return native_multi_head_attention


#: ATen's TORCH_WARN_ONCE warnings already given in this process.
_warned_once = {"where": False}


def where_with_byte_condition(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``aten::where.self`` (and ``.self_out``) for the eager ``kernel``, also for a uint8
    ``condition``, which ATen takes as its nonzero elements with a deprecation warning
    (TensorCompare.cpp, CPU and CUDA alike: ``TORCH_WARN_ONCE``, once per process); PyTorch's meta
    kernel refuses it."""

    def where(condition, *args, **kwargs):
        if condition.dtype == torch.uint8:
            if not _warned_once["where"]:
                _warned_once["where"] = True
                warnings.warn(
                    "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
                    "future version of PyTorch. Use a boolean condition instead.",
                    UserWarning,
                    stacklevel=2,
                )
            condition = condition != 0
        return kernel(condition, *args, **kwargs)

    return where


def abs_(self):
    """``Tensor.abs_()``: a complex tensor cannot hold its magnitudes in place (ATen's words)."""
    if self.is_complex():
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return abs_out(self, out=self)


def foreach_abs_refusing_complex(kernel: Callable[..., None]) -> Callable[..., None]:
    """``torch._foreach_abs_`` for the eager ``kernel``, refusing complex tensors with the error of
    the per-tensor ``abs_`` that the CPU's and CUDA's slow path reaches for them (their magnitudes
    cannot be held in place); PyTorch's meta kernel words it as an out= dtype error."""

    def foreach_abs_(self):
        if any(tensor.is_complex() for tensor in self):
            raise RuntimeError("In-place abs is not supported for complex tensors.")
        return kernel(self)

    return foreach_abs_


def _shift(target: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``x << y`` (``__lshift__`` and its kin) as ATen computes it: ``bitwise_left_shift``'s kernel
    (BinaryOps.cpp's ``lshift`` wraps the number and runs it). PyTorch's Python meta of
    ``__lshift__`` refuses a bool tensor, which ATen shifts into int64 (``bool_tensor << 3``)."""

    def shift(self: torch.Tensor, other: object) -> torch.Tensor:
        return target(self, other)

    return shift


#: ``__lshift__``/``__rshift__`` and their in-place forms -> the bitwise shift overload computing them.
_SHIFTS = {
    aten.__lshift__.Tensor: aten.bitwise_left_shift.Tensor,
    aten.__lshift__.Scalar: aten.bitwise_left_shift.Tensor_Scalar,
    aten.__rshift__.Tensor: aten.bitwise_right_shift.Tensor,
    aten.__rshift__.Scalar: aten.bitwise_right_shift.Tensor_Scalar,
    aten.__ilshift__.Tensor: aten.bitwise_left_shift_.Tensor,
    aten.__ilshift__.Scalar: aten.bitwise_left_shift_.Tensor_Scalar,
    aten.__irshift__.Tensor: aten.bitwise_right_shift_.Tensor,
    aten.__irshift__.Scalar: aten.bitwise_right_shift_.Tensor_Scalar,
}

KERNELS = {
    **{op: _shift(target) for op, target in _SHIFTS.items()},
    aten.abs.out: abs_out,
    aten.abs_.default: abs_,
    aten.bernoulli.out: bernoulli_out,
    aten.normal.Tensor_float_out: normal_tensor_float_out,
    aten.histc.out: histc_out,
    aten.native_batch_norm.default: native_batch_norm,
    aten.arange.start_out: arange_out,
    aten.range.out: range_out,
    aten.linspace.out: linspace_out,
    aten.logspace.out: logspace_out,
}
