"""What an eager call must satisfy before its executable is built, decided from its metas alone.

PyTorch's meta kernels describe a call's results, but some (Python refs among them) skip rules that
ATen's TensorIterator and its kernels apply: an in-place ``self`` is never resized, a result is
written into its argument whole, a written tensor must not partly overlap an input, and a result's
dtype must cast into the tensor it is written to. Those rules are stated here (ATen's
TensorIterator.cpp, MemoryOverlap.cpp), with the CPU's messages. Aliasing, offsets and strides are
part of a call's cache key, so checking once, when the executable is built, covers every call that
reuses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import infer_size, is_non_overlapping_and_dense_or_false, schema_of
from torch_neuronx.eager import memory_formats, operator_calls
from torch_neuronx.eager.plan import Plan
from torch_neuronx.runtime import arguments
from torch_neuronx.runtime.dtypes import CODE_OF, DTYPE_OF, JAX_DTYPE, TYPE_META_NAMES, aten_name
from torch_neuronx.runtime.spans import INTERNAL_OVERLAP_MESSAGE, refers_twice

#: Dtypes a neuron tensor never holds (decision 8), though JAX_DTYPE maps them for host conversions.
_UNHELD = (torch.float64, torch.complex128)

#: Unary ops whose ATen meta builds its TensorIterator with ``build_borrowing_unary_op``
#: (UnaryOps.cpp), which checks that every operand has one dtype: an ``out=`` of another dtype is an
#: error, not a cast, on CPU and CUDA alike. Their Python meta kernels cast or word it otherwise.
_SAME_DTYPE_UNARY = frozenset(
    {
        "neg", "floor", "ceil", "trunc", "round", "frac", "sign", "sgn", "bitwise_not",
        "conj_physical", "gelu", "softplus", "softshrink", "hardshrink",
    }
)  # fmt: skip

#: Overloads with a Scalar bound whose structured meta (TensorCompare.cpp) builds a unary
#: TensorIterator that checks every dtype is the same: ``out=`` raises "Found dtype ...", and an
#: in-place call that would promote raises the meta's own check, naming self's TypeMeta.
_CLAMP_SCALAR_OUT = frozenset({"clamp.out", "clamp_min.out", "clamp_max.out"})
_CLAMP_SCALAR_IN_PLACE = frozenset({"clamp_.default", "clamp_min_.default", "clamp_max_.default"})

#: Ops whose ``out=`` must have exactly the result's dtype: structured kernels that are not
#: TensorIterator ops (ATen's generated ``set_output`` checks each ``out=`` tensor's dtype) and the
#: generated ``out=`` forms of functional ops (``copy_arg``), on CPU and CUDA alike; their Python
#: meta kernels accept any ``out=`` dtype, so ``torch.sort(x, out=(half, long))`` wrote rounded values.
_EXACT_OUT_DTYPE = frozenset(
    {
        "sort", "tril", "triu", "aminmax", "index_add", "index_copy", "scatter_reduce", "renorm",
        "_softmax", "avg_pool3d", "diag_embed", "slice_scatter", "unfold_copy", "lu_unpack",
        "linalg_cross", "linalg_qr", "linalg_lu", "linalg_lu_factor_ex", "linalg_lu_solve",
        "_linalg_eigh", "_linalg_slogdet", "_linalg_solve_ex", "triangular_solve", "topk", "gather",
        "max.dim_max", "min.dim_min", "mm", "bmm", "addmm", "baddbmm", "addmv",
    }
)  # fmt: skip

#: Ops whose ATen checks refuse an ``out=`` dtype in their own words and exception (CPU and CUDA
#: alike): op -> (exception, whether (result, out) dtypes are refused, message of the out dtype).
#: cat's structured meta (TensorShape.cpp; stack writes through cat) and ReduceOps.cpp's
#: logsumexp_out; PyTorch's meta kernels word both as a cast error.
_OUT_DTYPE_REFUSALS: dict[str, tuple[type[Exception], Any, Any]] = {
    "cat": (
        TypeError,
        lambda r, o: not torch.can_cast(r, o),
        lambda o: f"torch.cat(): input types can't be cast to the desired output type {aten_name(o)}",
    ),
    "logsumexp": (
        RuntimeError,
        lambda r, o: not (o.is_floating_point or o.is_complex),
        lambda o: f"logsumexp(): Expected floating point type for result tensor, but got: {aten_name(o)}",
    ),
    # heaviside's structured meta checks its output for complex before any dtype mismatch.
    "heaviside": (
        RuntimeError,
        lambda r, o: o.is_complex,
        lambda o: "heaviside is not yet implemented for complex tensors.",
    ),
}
_OUT_DTYPE_REFUSALS["stack"] = _OUT_DTYPE_REFUSALS["cat"]


def _input_and_out_match(result: torch.dtype, out: torch.dtype) -> str:
    return (
        f"Expected the dtype for input and out to match, but got {aten_name(result)} for input's dtype "
        f"and {aten_name(out)} for out's dtype."
    )


def _scalar_type_matches(result: torch.dtype, out: torch.dtype) -> str:
    return f"expected scalar_type {aten_name(result)} but found {aten_name(out)}"


def _legacy_type(dtype: torch.dtype) -> str:
    """The legacy tensor type ATen's ``checkScalarType``/``checkSameType`` name: "torch.FloatTensor"."""
    return f"torch.{aten_name(dtype)}Tensor"


def _median_values(result: torch.dtype, out: torch.dtype) -> str:
    return (
        f"Expected tensor for 'values' to have the same type as tensor for argument #2 'self'; but type "
        f"{_legacy_type(out)} does not equal {_legacy_type(result)} (while checking arguments for median)"
    )


def _searchsorted_out(result: torch.dtype, out: torch.dtype) -> str:
    return (
        "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or Long(int64) depending "
        f"on whether out_int32 flag is True, but we got output tensor's dtype {aten_name(out)} and out_int32 flag "
        f"is {result == torch.int32}"
    )


def _complex_out(result: torch.dtype, out: torch.dtype) -> str:
    return f"Expected object of scalar type {aten_name(result)} but got scalar type {aten_name(out)} for argument 'out'"


def _scalar_type_matches_found(result: torch.dtype, out: torch.dtype) -> str:
    return f"expected scalar type {aten_name(result)} but found {aten_name(out)}"


#: Ops whose ``out=`` (their first) must have the result's dtype, checked by ATen code that CPU and
#: CUDA share (ReduceOps.cpp, UnaryOps.cpp, BinaryOps.cpp, TensorAdvancedIndexing.cpp,
#: BatchLinearAlgebra.cpp), each in its own words: op -> message of (result dtype, out dtype).
_SAME_DTYPE_OUT_MESSAGES: dict[str, Any] = {
    "amax": _input_and_out_match,
    "amin": _input_and_out_match,
    "cummax": _scalar_type_matches,
    "cummin": _scalar_type_matches,
    "logcumsumexp": _scalar_type_matches,
    "take": lambda r, o: (
        f"take(): self and out expected to have the same dtype, but got self.dtype = {aten_name(r)} "
        f"and out.dtype = {aten_name(o)}"
    ),
    "nan_to_num": lambda r, o: f"nan_to_num: dtype of out: {aten_name(o)} should be same as input: {aten_name(r)}",
    "frexp": lambda r, o: (
        f"torch.frexp() expects mantissa to have dtype {TYPE_META_NAMES[r]} but got {TYPE_META_NAMES[o]}"
    ),
    "heaviside": lambda r, o: "heaviside is not yet implemented for tensors with different dtypes.",
    # The CPU's words; CUDA's kernels refuse these too (they write through a pointer of the input's
    # type), in words not checked here. histc is not listed: CUDA's copies its result into any out=
    # (eager/redirects.py).
    "kthvalue": lambda r, o: "output values must be of same type as input",
    # TensorFactories.cpp complex_check_dtype: the complex counterpart of the inputs' dtype exactly
    "complex": _complex_out,
    "polar": _complex_out,
    "mode": lambda r, o: f"expected scalar type '{aten_name(r)}' but got '{aten_name(o)}' for values output",
    "log_sigmoid_forward": _scalar_type_matches_found,
    "index_select": lambda r, o: "index_select(): self and result must have the same scalar type",
    "linalg_solve_triangular": _scalar_type_matches_found,
    "median": _median_values,
    "nanmedian": _median_values,
    "searchsorted": _searchsorted_out,
    "bucketize": _searchsorted_out,
    # ReduceAllOps.cpp's TORCH_CHECK(canCast(...)) without a message, CPU and CUDA alike
    "max.unary_out": lambda r, o: _CAN_CAST_CHECK,
    "min.unary_out": lambda r, o: _CAN_CAST_CHECK,
    "ormqr": lambda r, o: (
        f"torch.ormqr: Expected input and result to have the same dtype, but input has dtype"
        f"{aten_name(r)} and result has dtype {aten_name(o)}"
    ),
}

_CAN_CAST_CHECK = (
    "Expected canCast( typeMetaToScalarType(self.dtype()), typeMetaToScalarType(out.dtype())) to be true, but "
    "got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)"
)

#: Ops whose ``out=`` indices (their second ``out=``) must be int64, checked by ATen code that CPU and
#: CUDA share (Sorting.cpp, ReduceOps.cpp), each in its own words: op -> message of the out dtype.
#: Ops whose meta kernels check it (sort, topk, max, min) are not listed.
_INDICES_OUT_MESSAGES: dict[str, Any] = {
    "kthvalue": lambda o: "output indices must be of scalar type Long",
    "mode": lambda o: f"expected scalar type 'Long' but got '{aten_name(o)}' for indices output",
    "median": lambda o: (
        f"Expected tensor for argument #1 'indices' to have scalar type Long; but got {_legacy_type(o)} instead "
        "(while checking arguments for median)"
    ),
    "cummax": lambda o: _scalar_type_matches(torch.int64, o),
    "cummin": lambda o: _scalar_type_matches(torch.int64, o),
}
_INDICES_OUT_MESSAGES["nanmedian"] = _INDICES_OUT_MESSAGES["median"]

#: Ops whose ``out=`` must have one fixed dtype, whatever the result's meta says (ATen's own checks,
#: CPU and CUDA alike): op -> (dtype, message of the out dtype).
_FIXED_OUT_DTYPES: dict[str, tuple[torch.dtype, Any]] = {
    "multinomial": (torch.int64, lambda o: f"multinomial expects Long tensor out, got: {aten_name(o)}"),
}

#: Ops whose ``out=`` ATen checks with ``checkLinalgCompatibleDtype(name, out, result, out_name)``
#: (LinalgUtils.h, BatchLinearAlgebra.cpp, CPU and CUDA alike): op -> the name its message gives and
#: each output's name ("result" where one is not given; lstsq names its residuals "solution").
_LINALG_CASTABLE_NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "cholesky_inverse": ("cholesky_inverse", ("result",)),
    "linalg_pinv": ("linalg.pinv", ("result",)),
    "linalg_householder_product": ("torch.linalg.householder_product", ("result",)),
    "orgqr": ("torch.linalg.householder_product", ("result",)),
    "linalg_eig": ("torch.linalg.eig", ("eigenvalues", "eigenvectors")),
    "linalg_eigvals": ("torch.linalg.eigvals", ("eigenvalues",)),
    "geqrf": ("torch.geqrf", ("a", "tau")),
    "linalg_lstsq": ("torch.linalg.lstsq", ("solution", "solution", "rank", "singular_values")),
}

_INT32_OR_INT64 = (torch.int32, torch.int64)
#: EmbeddingBag.cu's checkScalarTypes of the indices (the CPU's names "embedding_bag").
_EMBEDDING_BAG_INDICES = ("indices", _INT32_OR_INT64, RuntimeError, (
    "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
    "{legacy} instead (while checking arguments for embedding_bag_cuda)"
))  # fmt: skip
_MASK = (torch.bool,)

#: Index and mask arguments of a dtype ATen's kernels refuse, checked before anything else (CPU and
#: CUDA share these checks, TensorAdvancedIndexing.cpp, TensorCompare.cpp, Embedding.cpp): op ->
#: (argument, the dtypes it takes, exception, message). The message names the argument's dtype as
#: ``{name}`` (Float), ``{legacy}`` (torch.FloatTensor) or ``{cpp}`` (float). PyTorch's meta kernels
#: word these otherwise or let them through to the lowering (where JAX raised its own errors).
_ARGUMENT_DTYPES: dict[str, tuple[str, tuple[torch.dtype, ...], type[Exception], str]] = {
    "index_select": ("index", _INT32_OR_INT64, RuntimeError, "index_select(): Expected dtype int32 or int64 for index"),
    "gather": ("index", _INT32_OR_INT64, RuntimeError, "gather(): Expected dtype int32/int64 for index"),
    "put": ("index", (torch.int64,), RuntimeError, "put_(): Expected a long tensor for index, but got {name}"),
    "embedding": ("indices", _INT32_OR_INT64, RuntimeError, (
        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
        "{legacy} instead (while checking arguments for embedding)"
    )),
    **dict.fromkeys(("_embedding_bag", "_embedding_bag_forward_only"), _EMBEDDING_BAG_INDICES),
    "where": ("condition", (torch.bool, torch.uint8), RuntimeError, (
        "where expected condition to be a boolean tensor, but got a tensor with dtype {name}"
    )),
    "masked_fill": (
        "mask", _MASK, RuntimeError, "masked_fill_ only supports boolean masks, but got mask with dtype {cpp}"
    ),
    "masked_scatter": (
        "mask", _MASK, RuntimeError, "masked_scatter_ only supports boolean masks, but got mask with dtype {name}"
    ),
}  # fmt: skip
for _index_put in ("index_put", "_index_put_impl"):  # each of its index tensors (AdvancedIndexing's words)
    _ARGUMENT_DTYPES[_index_put] = (
        "indices",
        (torch.int64, torch.int32, torch.uint8, torch.bool),
        IndexError,
        "tensors used as indices must be long, int, byte or bool tensors",
    )


#: Ops whose ATen meta function checks the index dtype only for a non-empty index (gather's
#: ``TORCH_META_FUNC``: ``if (!is_index_empty)``): an empty uint8 index gathers nothing on the CPU.
_EMPTY_INDEX_UNCHECKED = frozenset({"gather"})


def check_argument_dtypes(name: str, plan: Plan, metas: list[Any]) -> None:
    """ATen's dtype checks of index and mask arguments (``_ARGUMENT_DTYPES``), which come before its
    other checks; ``metas`` are the call's arguments in ``plan.op``'s schema order.

    Raises:
        RuntimeError, IndexError: ATen's exception and words, e.g. "index_select(): Expected dtype
            int32 or int64 for index".
    """
    op = name.removeprefix("aten::").split(".")[0].removesuffix("_")
    rule = _ARGUMENT_DTYPES.get(op)
    if rule is None:
        return
    argument, allowed, exception, message = rule
    for schema_argument, value in zip(schema_of(plan.op).arguments, metas, strict=False):
        if schema_argument.name == argument:
            for tensor in arguments.flat_tensors(value):
                if not isinstance(tensor, torch.Tensor) or (op in _EMPTY_INDEX_UNCHECKED and tensor.numel() == 0):
                    continue
                if tensor.dtype not in allowed:
                    dtype = tensor.dtype
                    raise exception(
                        message.format(name=aten_name(dtype), legacy=_legacy_type(dtype), cpp=TYPE_META_NAMES[dtype])
                    )


#: Reductions whose ``out=`` must be bool or uint8 (ATen's ``check_result_is_bytebool``, ReduceOps.cpp).
_BYTEBOOL_RESULT = frozenset({"all", "any"})


def output_shape_error(output: Sequence[int], broadcast: Sequence[int]) -> RuntimeError:
    """TensorIterator's error for an in-place or ``out=`` tensor the result does not fit."""
    return RuntimeError(f"output with shape {list(output)} doesn't match the broadcast shape {list(broadcast)}")


def check_shapes_before_devices(plan: Plan, values: Sequence[Any]) -> None:
    """TensorIterator's broadcast check of a pointwise call (``values`` in schema order) whose
    tensors the call signature refused for being on different devices. TensorIterator computes the
    shape before it compares devices (its ops declare ``device_check: NoCheck`` in
    native_functions.yaml), so ``neuron_scalar.add_(torch.ones(3))`` raises "output with shape []
    doesn't match the broadcast shape [3]" on CPU and CUDA, not the device error.

    Raises:
        RuntimeError: the shapes do not broadcast, or the result does not fit an in-place ``self``.
    """
    if torch.Tag.pointwise not in plan.functional.tags:
        return
    outs = {position for position in plan.writes if not plan.is_in_place_self(position)}
    inputs = [
        tuple(value.shape)
        for position, value in enumerate(values)
        if isinstance(value, torch.Tensor) and position not in outs
    ]
    in_place = [tuple(values[position].shape) for position in plan.writes if plan.is_in_place_self(position)]
    check_broadcast(inputs, in_place)


def check_broadcast(inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]] = ()) -> list[int]:
    """The broadcast shape of ``inputs`` (in operand order), checked as TensorIterator checks it
    (ATen's TensorIterator.cpp ``compute_shape``, ExpandUtils.cpp ``infer_size``).

    Args:
        inputs: shapes of the input operands, in the order the op passes them.
        outputs: shapes of outputs that may not be resized (an in-place ``self``).

    Returns:
        The broadcast shape.

    Raises:
        RuntimeError: "The size of tensor a (3) must match the size of tensor b (4) at
            non-singleton dimension 0" for inputs that do not broadcast, or "output with shape [3]
            doesn't match the broadcast shape [2, 3]" for an output the result does not fit.
    """
    shape = torch.Size()
    for operand in inputs:
        if not shape:
            shape = torch.Size(operand)
        elif tuple(operand) != tuple(shape):
            shape = infer_size(shape, torch.Size(operand))
    for output in outputs:
        if tuple(output) != tuple(shape):
            raise output_shape_error(output, shape)
    return list(shape)


_OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
    "single memory location. Please clone() the tensor before performing the operation."
)


def _overlap(written: torch.Tensor, read: torch.Tensor) -> str:
    """ATen's ``get_overlap_status`` (aten/src/ATen/MemoryOverlap.cpp): "full" (the same elements
    with the same strides), "partial", "no", or "too hard" for tensors that are not non-overlapping
    and dense, which ATen lets through."""
    if written is read:
        return "full"
    if written.numel() == 0 or read.numel() == 0 or written.device != read.device:
        return "no"
    if not (is_non_overlapping_and_dense_or_false(written) and is_non_overlapping_and_dense_or_false(read)):
        return "too hard"
    if written.untyped_storage().data_ptr() != read.untyped_storage().data_ptr():
        return "no"
    written_begin, read_begin = written.data_ptr(), read.data_ptr()
    written_end = written_begin + written.numel() * written.element_size()
    read_end = read_begin + read.numel() * read.element_size()
    if written_begin == read_begin and written_end == read_end:
        return "full" if written.stride() == read.stride() else "partial"
    return "partial" if written_begin < read_end and read_begin < written_end else "no"


def check_no_partial_overlap(written: torch.Tensor, read: torch.Tensor) -> None:
    """ATen's ``assert_no_partial_overlap`` (MemoryOverlap.cpp), which TensorIterator and ``copy_``
    apply to each input of a written tensor: the two may be the same memory (``x.add_(x)``) or
    disjoint, not partly the same (``x[1:].copy_(x[:-1])``).

    Raises:
        RuntimeError: ATen's "unsupported operation: some elements of the input tensor and the
            written-to tensor refer to a single memory location. Please clone() the tensor before
            performing the operation."
    """
    if _overlap(written, read) == "partial":
        raise RuntimeError(_OVERLAP_MESSAGE)


def check_no_overlap(written: torch.Tensor, read: torch.Tensor) -> None:
    """ATen's ``assert_no_overlap`` (MemoryOverlap.cpp): ``written`` and ``read`` share no element,
    not even as the same tensor.

    Raises:
        RuntimeError: ATen's "unsupported operation: some elements of the input tensor and the
            written-to tensor refer to a single memory location. ..."
    """
    if _overlap(written, read) in ("full", "partial"):
        raise RuntimeError(_OVERLAP_MESSAGE)


#: Arguments that a written tensor (in-place ``self``, ``out=``) may not overlap at all, not even as
#: the same tensor, checked in ATen code that CPU and CUDA share with ``assert_no_overlap``
#: (TensorAdvancedIndexing.cpp's index, scatter, put, take, gather and masked_select checks, the
#: structured ``cat`` meta; ``masked_select(out=)`` runs on the host, eager/host_ops.py): op ->
#: argument names. gather's index may be its ``out=`` exactly
#: (``assert_no_partial_overlap``): ``_NO_PARTIAL_OVERLAP_ARGUMENTS``. PyTorch's meta kernels skip
#: these, and the lowering reads every input before writing, so ``x.index_add_(0, i, x[:2])`` gave a
#: value where ATen raises.
_NO_OVERLAP_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "index_add": ("index", "source"),
    "index_copy": ("index", "source"),
    "index_reduce": ("index", "source"),
    "index_fill": ("index",),
    "scatter": ("index", "src"),
    "scatter_add": ("index", "src"),
    "scatter_reduce": ("index", "src"),
    "put": ("index", "source"),
    "index_put": ("indices", "values"),
    "_index_put_impl": ("indices", "values"),
    "take": ("self", "index"),
    "index_select": ("self", "index"),
    "gather": ("self",),
    "cat": ("tensors",),
    "stack": ("tensors",),  # ATen's stack writes through cat
    "kthvalue": ("self",),  # kthvalue_out_impl_cpu/_cuda (Sorting.cpp, cuda/Sorting.cpp)
}
_NO_PARTIAL_OVERLAP_ARGUMENTS: dict[str, tuple[str, ...]] = {"gather": ("index",)}

#: The ops of ``_NO_OVERLAP_ARGUMENTS`` whose ATen code also calls ``assert_no_internal_overlap`` on
#: the written tensor first, before an ``out=`` is resized: ``index_select(x, 1, i,
#: out=y.expand(2, 6))`` raises though the result's shape would give ``out`` a new storage.
#: ``index_put_``/``index_fill_`` only warn (eager/expanded_writes.py).
_NO_INTERNAL_OVERLAP = frozenset(
    {"index_select", "index_add", "index_copy", "index_reduce", "scatter", "scatter_add", "scatter_reduce"}
    | {"put", "take", "gather"}
)


def check_argument_overlap(name: str, plan: Plan, values: list[Any]) -> None:
    """ATen's overlap checks of indexing, scatter, ``cat`` and ``kthvalue`` calls
    (``_NO_OVERLAP_ARGUMENTS``): the written tensors' own elements (``_NO_INTERNAL_OVERLAP``), then
    each written tensor against the listed arguments; ``values`` are the call's arguments in schema
    order.

    Raises:
        RuntimeError: ATen's "unsupported operation: more than one element of the written-to tensor
            refers to a single memory location. ..."; ATen's "unsupported operation: some elements of
            the input tensor and the written-to tensor refer to a single memory location. Please
            clone() the tensor before performing the operation."
    """
    base = name.removeprefix("aten::").split(".")[0].removesuffix("_")
    no_overlap, no_partial = _NO_OVERLAP_ARGUMENTS.get(base, ()), _NO_PARTIAL_OVERLAP_ARGUMENTS.get(base, ())
    if not (no_overlap or no_partial):
        return
    written = [t for i in plan.writes for t in arguments.flat_tensors(values[i]) if isinstance(t, torch.Tensor)]
    if base in _NO_INTERNAL_OVERLAP:
        check_no_internal_overlap(plan, values)
    for schema_argument, value in zip(schema_of(plan.op).arguments, values, strict=False):
        if schema_argument.name not in no_overlap + no_partial:
            continue
        check = check_no_overlap if schema_argument.name in no_overlap else check_no_partial_overlap
        for read in arguments.flat_tensors(value):
            if isinstance(read, torch.Tensor):
                for target in written:
                    check(target, read)


def check_written_on_device(name: str, plan: Plan, described: list[Any], device: int) -> None:
    """A written argument (in-place ``self``, ``out=``) must be a neuron tensor. A 0-dim CPU tensor,
    which the call signature takes as a runtime scalar wherever it stands (other CPU tensors are
    refused there), is refused here with the device-mismatch error CPU and CUDA raise for an ``out=``
    on another device.

    Raises:
        RuntimeError: "Expected all tensors to be on the same device, but got out is on cpu, ...".
    """
    for position in plan.writes:
        if any(isinstance(d, arguments.HostScalarArg) for d in arguments.tensor_descriptions(described[position])):
            argument, others = schema_of(plan.op).arguments[position].name, f"neuron:{device}"
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but got {argument} is on cpu, different from "
                f"other tensors on {others} (when checking argument {argument} in method {name}). Move it first, "
                f"e.g. {argument}.to('{others}')."
            )


def resized_outputs(
    plan: Plan,
    values: list[Any],
    metas: list[Any],
    described: list[Any],
    functional_metas: list[Any],
    functional_result: Any,
) -> list[tuple[int, int, list[int], list[int] | None]]:
    """The ``out=`` tensors the meta kernel resized, as (schema position, index among that
    argument's tensors, new shape, the strides to give it or None). ATen's structured kernels
    restride an out= tensor they resize to their meta function's strides (``resize_out`` in the
    generated Register*.cpp): ``linalg.inv(A, out=e)`` leaves ``e`` column-major, as LAPACK writes
    it. Python meta kernels compute the functional op's result (``functional_result``, called with
    ``functional_metas``; laid out by :func:`memory_formats.result_metas`) with ATen's strides but
    copy it into a contiguous out (``linalg.qr``, ``lu_factor``, ``eigh``): see
    :func:`_resized_strides`.

    Raises:
        RuntimeError: an in-place ``self``, or the ``out=`` tensor of a pointwise op that is also one
            of its inputs, would have to be resized (TensorIterator's "output with shape [3] doesn't
            match the broadcast shape [2, 3]"); PyTorch's Python meta kernels resize them.
    """
    if plan.functional is plan.op:
        return []
    candidates = []  # (position, index, written index, the meta kernel's result, the argument's shape)
    written = 0
    for i in plan.writes:
        for index, (meta, description) in enumerate(
            zip(arguments.flat_tensors(metas[i]), arguments.tensor_descriptions(described[i]), strict=True)
        ):
            if description is not None and tuple(meta.shape) != description.sizes:
                candidates.append((i, index, written, meta, list(description.sizes)))
            written += 1
    if not candidates:
        return []
    for position, _, _, meta, target in candidates:
        if plan.is_in_place_self(position):  # in-place: never resized (some refs do)
            raise output_shape_error(target, list(meta.shape))
        if torch.Tag.pointwise in plan.functional.tags and _is_an_input(values, position):
            raise output_shape_error(target, list(meta.shape))  # TensorIterator: a read-write output
    results = arguments.flat_tensors(functional_result)
    results = memory_formats.result_metas(plan.functional, functional_metas, results)[plan.fresh :]
    resized = []
    for position, index, written, meta, target in candidates:
        takes_layout = plan.op not in _COPIES_INTO_OUT and (
            plan.op not in _LAYS_OUT_EMPTY_OUTS_ONLY or math.prod(target) == 0
        )
        result = results[written] if takes_layout and written < len(results) else None
        resized.append((position, index, list(meta.shape), _resized_strides(meta, result)))
    return resized


#: out= kernels that compute into a temporary and copy it into the out they resize (row-major),
#: whose functional op lays its result out otherwise (``cholesky_out`` in BatchLinearAlgebra.cpp).
_COPIES_INTO_OUT = {torch.ops.aten.cholesky.out}

#: out= kernels that are not structured and write an empty out in LAPACK's column-major layout, but
#: resize an out with elements into a row-major one that they copy into (``geqrf_out``,
#: ``linalg_eig_out``, ``householder_product_out_helper``, ``ormqr_out``, ``cholesky_inverse_out``).
_LAYS_OUT_EMPTY_OUTS_ONLY = {
    torch.ops.aten.geqrf.a,
    torch.ops.aten.linalg_eig.out,
    torch.ops.aten.linalg_householder_product.out,
    torch.ops.aten.ormqr.out,
    torch.ops.aten.cholesky_inverse.out,
}


def _resized_strides(meta: torch.Tensor, result: Any) -> list[int] | None:
    """The strides of a resized out= tensor: those the out= meta kernel gave it where it restrided
    it (a structured kernel's ``resize_out``), else the functional ``result``'s (a Python meta
    kernel computes them as ATen does, then copies into a contiguous out: ``linalg.qr``,
    ``lu_factor``, ``eigh``), else the meta kernel's; only a dense layout of its shape. ``result``
    is None where the out= kernel keeps a row-major out (:data:`_COPIES_INTO_OUT`,
    :data:`_LAYS_OUT_EMPTY_OUTS_ONLY`)."""
    layouts = [meta, result] if not meta.is_contiguous() else [result, meta]
    for layout in layouts:
        if (
            isinstance(layout, torch.Tensor)
            and layout.shape == meta.shape
            and is_non_overlapping_and_dense_or_false(layout)
        ):
            return list(layout.stride())
    return None


def _is_an_input(values: list[Any], position: int) -> bool:
    """Whether the ``out=`` tensor at ``position`` is also one of the call's inputs (``mul(x, y,
    out=x)``, which ``ldexp_`` makes): TensorIterator does not resize such an output."""
    out = values[position]
    return any(value is out for i, value in enumerate(values) if i != position)


def write_targets(plan: Plan, described: list[Any]) -> list[arguments.TensorArg | None]:
    """The tensors the written results go into, in order (None where the argument is None, e.g. no
    running statistics)."""
    return [d for i in plan.writes for d in arguments.tensor_descriptions(described[i])]


def check_written_shapes(plan: Plan, described: list[Any], functional_result: Any) -> None:
    """A result is written into its argument whole, so it must have the argument's shape.

    Raises:
        RuntimeError: TensorIterator's "output with shape ... doesn't match the broadcast shape ...".
    """
    if not plan.writes:
        return
    results = arguments.flat_tensors(functional_result)[plan.fresh :]
    for value, target in zip(results, write_targets(plan, described), strict=True):
        if target is None or not isinstance(value, torch.Tensor) or tuple(value.shape) == target.sizes:
            continue
        raise output_shape_error(target.sizes, value.shape)


def check_cat_operands(plan: Plan, metas: list[Any]) -> None:
    """ATen's ``check_cat_no_zero_dim``, the first check of ``cat``'s structured meta (CPU and CUDA
    alike), which PyTorch's Python meta kernel fails with an internal IndexError.

    Raises:
        RuntimeError: "zero-dimensional tensor (at position 0) cannot be concatenated".
    """
    if schema_of(plan.op).name != "aten::cat":
        return
    for position, tensor in enumerate(metas[0]):
        if isinstance(tensor, torch.Tensor) and tensor.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {position}) cannot be concatenated")


def check_no_internal_overlap(plan: Plan, values: list[Any]) -> None:
    """ATen's ``assert_no_internal_overlap`` of the tensors the op writes, which TensorIterator and
    the structured kernels make before any other check: no two elements of a written tensor share
    memory (``torch.sort(x, out=(x.expand(...), i))``).

    Raises:
        RuntimeError: ATen's "unsupported operation: more than one element of the written-to tensor
            refers to a single memory location. Please clone() the tensor before performing the
            operation."
    """
    for i in plan.writes:
        for tensor in arguments.flat_tensors(values[i]):
            if isinstance(tensor, torch.Tensor) and refers_twice(tensor.shape, tensor.stride()):
                raise RuntimeError(INTERNAL_OVERLAP_MESSAGE)


def check_pointwise_overlap(plan: Plan, values: list[Any]) -> None:
    """TensorIterator's memory-overlap check of a pointwise op: each written tensor against each input
    (:func:`check_no_partial_overlap`)."""
    written = [t for i in plan.writes for t in arguments.flat_tensors(values[i]) if isinstance(t, torch.Tensor)]
    if not written:
        return
    read = [
        t
        for i, value in enumerate(values)
        if i not in plan.writes or plan.is_in_place_self(i)  # an in-place self is read too
        for t in arguments.flat_tensors(value)
        if isinstance(t, torch.Tensor)
    ]
    for target in written:
        for source in read:
            check_no_partial_overlap(target, source)


def check_result_dtypes(name: str, fresh: list[Any], written: list[Any], targets: list[Any]) -> None:
    """PyTorch's dtype rules for results, which its meta kernels do not always apply.

    Raises:
        TypeError: ``cat``/``stack`` into an ``out=`` the inputs cannot be cast to (ATen's words).
        RuntimeError: an in-place or ``out=`` result cannot be cast to the tensor it is written to
            (TensorIterator's "result type ... can't be cast to the desired output type ..."), or is
            written into an ``out=`` of another dtype by an op that allows none ("Found dtype ..."),
            or ``all``/``any`` write into an ``out=`` that is neither bool nor uint8.
        TypeError: a new result would be of a dtype neuron does not hold (decision 8): float64,
            complex128.
    """
    overload = name.removeprefix("aten::")
    base = overload.split(".")[0].removesuffix("_")
    same_dtype = base in _SAME_DTYPE_UNARY or overload in _CLAMP_SCALAR_OUT
    same_dtype_message = _SAME_DTYPE_OUT_MESSAGES.get(overload, _SAME_DTYPE_OUT_MESSAGES.get(base))
    for position, (result, target) in enumerate(zip(written, targets, strict=True)):
        if target is None or not isinstance(result, torch.Tensor):
            continue
        destination = DTYPE_OF[target.dtype_code]
        if base in _OUT_DTYPE_REFUSALS and _OUT_DTYPE_REFUSALS[base][1](result.dtype, destination):
            exception, _, message = _OUT_DTYPE_REFUSALS[base]
            raise exception(message(destination))
        if base in _FIXED_OUT_DTYPES and destination != _FIXED_OUT_DTYPES[base][0]:
            raise RuntimeError(_FIXED_OUT_DTYPES[base][1](destination))
        if position == 1 and base in _INDICES_OUT_MESSAGES and destination != torch.int64:
            raise RuntimeError(_INDICES_OUT_MESSAGES[base](destination))
        if position == 0 and same_dtype_message is not None and destination != result.dtype:
            raise RuntimeError(same_dtype_message(result.dtype, destination))
        if base in _BYTEBOOL_RESULT and destination not in (torch.bool, torch.uint8):
            raise RuntimeError(f"{base} only supports bool tensor for result, got: {aten_name(destination)}")
        if same_dtype and destination != result.dtype:
            raise RuntimeError(f"Found dtype {aten_name(destination)} but expected {aten_name(result.dtype)}")
        if base in _LINALG_CASTABLE_NAMES and not torch.can_cast(result.dtype, destination):
            function, outputs = _LINALG_CASTABLE_NAMES[base]
            output = outputs[min(position, len(outputs) - 1)]
            raise RuntimeError(
                f"{function}: Expected {output} to be safely castable from "
                f"{aten_name(result.dtype)} dtype, but got {output} with dtype {aten_name(destination)}"
            )
        # _EXACT_OUT_DTYPE's ATen kernels, and ATen's checkLinalgCompatibleDtype (LinalgUtils.h) for
        # an out= the result cannot be cast to, both naming TypeMeta's C++ types.
        exact = (base in _EXACT_OUT_DTYPE or overload in _EXACT_OUT_DTYPE) and destination != result.dtype
        if exact or (not torch.can_cast(result.dtype, destination) and base.lstrip("_").startswith("linalg_")):
            raise RuntimeError(
                f"Expected out tensor to have dtype {TYPE_META_NAMES[result.dtype]}, but got "
                f"{TYPE_META_NAMES[destination]} instead"
            )
        if not torch.can_cast(result.dtype, destination):
            desired = TYPE_META_NAMES[destination] if overload in _CLAMP_SCALAR_IN_PLACE else aten_name(destination)
            raise RuntimeError(
                f"result type {aten_name(result.dtype)} can't be cast to the desired output type {desired}"
            )
    for result in fresh:
        # JAX_DTYPE maps float64/complex128 too (host-side conversions), so they are named here.
        if isinstance(result, torch.Tensor) and (result.dtype in _UNHELD or result.dtype not in JAX_DTYPE):
            try:
                _C._check_dtype_supported(CODE_OF[result.dtype], name)
            except TypeError as error:
                if not operator_calls.type_errors_are_swallowed():
                    raise
                raise RuntimeError(
                    f"{error} (A RuntimeError here: inside a Python operator such as a * b, a TypeError "
                    "would become 'unsupported operand type(s)'.)"
                ) from None
