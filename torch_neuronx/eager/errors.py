"""Argument errors worded as the CPU words them.

Eager kernels check a call by running PyTorch's meta kernel for it. Many meta kernels are Python
(torch/_meta_registrations.py, torch/_refs), and they word some errors differently from the C++
kernels a CPU or CUDA call reaches: shapes print as ``torch.Size([5, 0])`` rather than ``[5, 0]``,
dtypes as ``torch.int64`` rather than ``Long``, and broadcasting errors come from
torch._prims_common instead of TensorIterator. :func:`raise_as_cpu` re-raises a meta kernel's error
in the CPU's words (TensorIterator's rules are stated in eager/rules.py).
"""

from __future__ import annotations

import ast
import re
from typing import Any, NoReturn

import torch

from torch_neuronx._compat.aten_checks import check_distinct_dims
from torch_neuronx._compat.torch_internals import op_name, schema_of
from torch_neuronx.eager import dispatched_dtypes, rules
from torch_neuronx.eager.plan import Plan, call
from torch_neuronx.lowering import registry
from torch_neuronx.lowering.overflow import c10_type_name
from torch_neuronx.runtime import arguments
from torch_neuronx.runtime.dtypes import CPP_TYPE_NAMES, TYPE_META_NAMES, aten_name, cpp_name, jax_dtype

_SIZE = re.compile(r"torch\.Size\((\[[^\]]*\])\)")
_DTYPE = re.compile(r"\btorch\.(\w+)\b")
_CPP_TYPE = {aten_name(dtype): cpp for dtype, cpp in CPP_TYPE_NAMES.items()}  # Int -> int, Long -> long int
_SIZE_PAIR_COMMA = re.compile(r"(-?[0-9]+), (?=[A-Za-z]+: )")  # "dH: 1, dW: 2" -> "dH: 1 dW: 2"
#: Python meta kernels' wordings of ATen errors, and ATen's: (pattern, replacement).
_REWORDED = (
    (  # addmm/mm's shape check in ATen's Blas.cpp
        re.compile(r"a and b must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]\."),
        r"mat1 and mat2 shapes cannot be multiplied (\1x\2 and \3x\4)",
    ),
    (  # dot/vdot's size check (torch/_refs spells "the" "same" without the space between)
        re.compile(r"to have thesame number of elements"),
        r"to have the same number of elements",
    ),
    (  # addcdiv_meta in ATen's PointwiseOps.cpp joins its message parts with two spaces here
        re.compile(r"^Integer division with addcdiv is no longer supported, and in a future release"),
        "Integer division with addcdiv is no longer supported, and in a future  release",
    ),
    (  # the generated out= check of structured kernels (and copy_arg) prints each dtype's TypeMeta
        re.compile(r"Expected out tensor to have dtype (\w+) but got (\w+) instead"),
        lambda match: "Expected out tensor to have dtype {}, but got {} instead".format(
            *(_type_meta(name) for name in match.groups())
        ),
    ),
    (  # softshrink's structured meta in ATen's Activation.cpp (the dtype's bound as a C++ stream prints it)
        re.compile(r"^lambda must be in range \[0, (\S+)\] for input dtype (\w+), but found (\S+)$"),
        lambda match: (
            f"lambda must be in range [0, {float(match.group(1)):g}] for input dtype {match.group(2)}, "
            f"but found {float(match.group(3)):g}"
        ),
    ),
    (  # a meta tensor's TensorImpl::toString in ATen's expand error: the device tensor's is neuron's
        re.compile(r"\bMeta(\w+)Type\{"),
        r"neuron\1Type{",
    ),
    (  # pool2d_shape_check/pool3d_shape_check in ATen's Pool.h separate the sizes with spaces only
        re.compile(r"^((?:kernel size|stride|dilation) should be greater than zero, but got) (.*)$"),
        lambda match: match.group(1) + " " + _SIZE_PAIR_COMMA.sub(r"\1 ", match.group(2)),
    ),
    (  # adaptive_avg_pool2d's rank check in ATen's AdaptiveAveragePooling.cpp/.cu (PyTorch's meta drops the name)
        re.compile(r"^Expected 3D or 4D tensor, but got (\[[^\]]*\])$"),
        r"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got \1",
    ),
    (  # embedding's check in ATen's Embedding.cpp
        re.compile(r"^'weight' must be 2-D, got \d+-D$"),
        "'weight' must be 2-D",
    ),
    (  # masked_fill__cpu/_cuda (TensorAdvancedIndexing.cpp, Indexing.cu); torch/_refs drops the op name
        re.compile(r"^only supports a 0-dimensional value tensor, but got tensor with (\d+) dimension$"),
        r"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with \1 dimension(s).",
    ),
    (  # pool2d_shape_check in ATen's Pool.h (CPU and CUDA) prints the sizes without a space
        re.compile(
            r"^(Expected 3D or 4D \(batch mode\) tensor with optional 0 dim batch size for input, but got:) (\[)"
        ),
        r"\1\2",
    ),
    (  # adaptive_avg_pool2d_backward's check in ATen's AdaptiveAveragePooling.cpp (PyTorch's meta
        # kernel's line continuation spreads spaces and drops "but grad_output has sizes")
        re.compile(
            r"^(adaptive_avg_pool2d_backward\(\): Expected grad_output to have non-zero) +size for non-batch "
            r"dimensions, (\[[^\]]*\]) with dimension (\d+) being empty$"
        ),
        r"\1 size for non-batch dimensions, but grad_output has sizes \2 with dimension \3 being empty",
    ),
    (  # CUDA's kernels name themselves in these shape checks (DilatedMaxPool3d.cu, MaxUnpooling.cu)
        re.compile(r"^(max_pool3d_with_indices|max_unpooling2d|max_unpooling3d)\(\): "),
        lambda match: {
            "max_pool3d_with_indices": "max_pool3d_with_indices_out_cuda_template(): ",
            "max_unpooling2d": "max_unpooling2d_forward_out_cuda(): ",
            "max_unpooling3d": "max_unpooling3d_forward_out_cuda(): ",
        }[match.group(1)],
    ),
    (  # _foreach_norm's check in ATen (torch 2.13's words; PyTorch's meta kernel shortens them)
        re.compile(r"^_foreach_norm cannot compute infinity norm on empty tensor$"),
        "_foreach_norm cannot compute the infinity norm on an empty tensor because the operation does not "
        "have an identity",
    ),
    (  # index_fill_'s check in ATen's TensorAdvancedIndexing.cpp
        re.compile(r"^Only supports 0-dimensional value tensor\. Got a tensor with (\d+) dimensions\.$"),
        r"index_fill_ only supports a 0-dimensional value tensor, but got tensor with \1 dimension(s).",
    ),
    (  # lerp's structured meta in ATen's Lerp.cpp prints each dtype's TypeMeta
        re.compile(r"^expected dtype (\w+) for `(end|weight)`, but got dtype (\w+)$"),
        lambda match: (
            f"expected dtype {_type_meta(match.group(1))} for `{match.group(2)}` but got dtype "
            f"{_type_meta(match.group(3))}"
        ),
    ),
    (  # isposinf/isneginf's checks in ATen's TensorCompare.cpp, on every device
        re.compile(r"^Complex dtype is not supported for (isposinf|isneginf), got dtype \w+$"),
        r"\1 does not support complex inputs.",
    ),
    (  # topk's structured meta in ATen's TopKImpl/Sorting.cpp
        re.compile(r"^k not in range for dimension$"),
        "selected index k out of range",
    ),
    (  # checkIsMatrix in ATen's LinearAlgebraUtils.h (squareCheckInputs' first check)
        re.compile(r"^(.+): The input tensor must have at least 2 dimensions, got \d+$"),
        r"\1: The input tensor A must have at least 2 dimensions.",
    ),
    (  # linalg_inv_ex's meta in ATen's BatchLinearAlgebra.cpp checks its input as "linalg.inv"
        re.compile(
            r"^linalg\.inv_ex: (Low precision dtypes not supported|Expected a floating point or complex|A must be "
            r"batches of square matrices|The input tensor A must)"
        ),
        r"linalg.inv: \1",
    ),
    (  # check_args of tril_indices/triu_indices in ATen's TensorFactories.h (no space before the value)
        re.compile(r"^(row|col) must be non-negative, got (-?\d+)$"),
        r"\1 must be non-negative, got\2",
    ),
    (  # trace_cuda in ATen's cuda/TriangularOps.cu (the CPU's trace_cpu adds "trace: " and the rank)
        re.compile(r"^expected a matrix, but got tensor with dim \d+$"),
        "expected a matrix",
    ),
    (  # baddbmm's dtype check in ATen's LinearAlgebra.cpp prints the input's C++ type, without a colon
        re.compile(r"Input dtypes must be the same, got: input: (\w+), batch1: (\w+), batch2: (\w+)"),
        lambda match: "Input dtypes must be the same, got: input {}, batch1: {}, batch2: {}".format(
            *(_CPP_TYPE.get(name, name) for name in match.groups())
        ),
    ),
)

#: Python meta kernels' errors that ATen raises as another exception type: (type, pattern) -> ATen's
#: type and message (a template of the pattern's groups).
_RETYPED: tuple[tuple[type[Exception], re.Pattern[str], type[Exception], str], ...] = (
    (  # CUDA's AT_DISPATCH_INDEX_TYPES in cuda/TensorFactories.cu; PyTorch's meta raises RuntimeError
        RuntimeError,
        re.compile(r"\"(tril|triu)_indices\" not implemented for '(\w+)'"),
        NotImplementedError,
        "\"\\1_indices_cuda\" not implemented for '\\2'",
    ),
    (  # clamp's structured meta in ATen's TensorCompare.cpp; torch/_refs raises ValueError
        ValueError,
        re.compile(r"clamp called but both min and max are none!"),
        RuntimeError,
        "torch.clamp: At least one of 'min' or 'max' must not be None",
    ),
    (  # alpha_check in ATen's BinaryOps.h (add, sub); torch/_refs raises ValueError
        ValueError,
        re.compile(
            r"alpha argument of type <class '(float|complex)'> cannot be safely cast to type <class '(int|bool)'>!"
        ),
        RuntimeError,
        "For integral input tensors, argument alpha must not be a floating point number.",
    ),
    (
        ValueError,
        re.compile(r"alpha argument of type <class 'complex'> cannot be safely cast to type <class 'float'>!"),
        RuntimeError,
        "For non-complex input tensors, argument alpha must not be a complex number.",
    ),
)


def _type_meta(name: str) -> str:
    """The TypeMeta name of the dtype ATen names ``name`` ("Half" -> "c10::Half"); ``name`` if none.
    Looked up when needed: naming complex32 makes a complex32 tensor, which warns."""
    for dtype, type_meta in TYPE_META_NAMES.items():
        if (name == "ComplexHalf") == (dtype == torch.complex32) and aten_name(dtype) == name:
            return type_meta
    return name


def in_aten_words(error: Exception) -> Exception:
    """``error`` with sizes and dtypes printed as ATen prints them (``[5, 0]``, ``Long``) and the
    wordings in ``_REWORDED`` replaced by ATen's; the same exception when nothing changes."""
    message = str(error)
    worded = _DTYPE.sub(_dtype_word, _SIZE.sub(r"\1", _joined(message)))
    for meta_type, pattern, aten_type, aten_message in _RETYPED:
        match = pattern.fullmatch(worded) if type(error) is meta_type else None
        if match is not None:
            return aten_type(match.expand(aten_message))
    for pattern, replacement in _REWORDED:
        worded = pattern.sub(replacement, worded)
    if worded == message or type(error) not in (RuntimeError, ValueError, IndexError):
        return error
    return type(error)(worded)


def _joined(message: str) -> str:
    """A message some Python meta kernels build as a tuple of strings (``addcdiv``'s integer
    division error: ``torch._check`` prints the tuple's repr), joined as ATen's ``TORCH_CHECK``
    joins its arguments; any other message as it is."""
    if not (message.startswith("('") and message.endswith("')")):
        return message
    try:
        parts = ast.literal_eval(message)
    except (ValueError, SyntaxError):
        return message
    if isinstance(parts, tuple) and all(isinstance(part, str) for part in parts):
        return "".join(parts)
    return message


def _dtype_word(match: re.Match[str]) -> str:
    dtype = getattr(torch, match.group(1), None)
    return aten_name(dtype) if isinstance(dtype, torch.dtype) else match.group(0)


def raise_as_cpu(name: str, plan: Plan, metas: list[Any], described: list[Any], error: Exception) -> NoReturn:
    """Raises the meta kernel's ``error`` as the CPU words it: TensorIterator's cast, broadcasting and
    Scalar conversion errors, ATen's sizes and dtype names; a random op's dtype refusal as its
    lowering's ``dtype_rule`` (CUDA's kernel) words it; a Python reference's refusal of a dtype
    CUDA's kernel does not dispatch as that kernel words it
    (:func:`~torch_neuronx.eager.dispatched_dtypes.check_refusal_by_dtype`)."""
    # TensorIterator's cast check comes before any kernel's dtypes; other ops' structured metas
    # check their operands first (addmm's "self and mat2 must have the same dtype").
    pointwise = torch.Tag.pointwise in plan.functional.tags
    if isinstance(error, RuntimeError) and pointwise:
        _raise_cast_error_as_cpu(name, plan, metas, described)
    _raise_dtype_rule_error(plan, metas, error)
    if isinstance(error, RuntimeError) and not pointwise:
        _raise_cast_error_as_cpu(name, plan, metas, described)
    if isinstance(error, RuntimeError):
        _raise_index_error_as_cpu(plan, metas, error)
        _raise_complex_parts_error_as_cpu(name, metas, error)
        _raise_scale_error_as_cpu(plan, metas, error)
        _raise_range_dtype_error_as_cpu(name, error)
        _raise_range_size_error_as_cpu(name, metas, error)
        _raise_broadcast_error_as_cpu(plan, metas, described, error)
    if isinstance(error, (RuntimeError, IndexError)):
        _raise_empty_reduction_error_as_cpu(name, plan, metas, error)
        _raise_repeated_dim_error_as_cpu(plan, metas, error)
    if isinstance(error, RuntimeError):
        _raise_solver_operand_error_as_cpu(plan, metas, error)
    _raise_conversion_error_as_cpu(metas, error)
    _raise_argument_error_as_cpu(plan, metas)
    if isinstance(error, RuntimeError) and not _checked_before_dispatch(plan, error):
        # after ATen's checks above, which come before its dispatch
        dispatched_dtypes.check_refusal_by_dtype(plan.functional, plan.functional_args(metas))
    worded = in_aten_words(error)
    if worded is error:
        raise error
    raise worded from None


#: Dtype checks of ATen's structured meta functions, which run before the kernel's dispatch on every
#: device: a meta kernel's refusal in these words is CUDA's error too, not CUDA's kernel's "not
#: implemented for" (op -> the check's opening words).
_CHECKED_BEFORE_DISPATCH = {
    "aten::neg": "Negation, the `-` operator, on a bool tensor is not supported.",  # UnaryOps.cpp's meta
}


def _checked_before_dispatch(plan: Plan, error: Exception) -> bool:
    """Whether ``error`` is one of ``_CHECKED_BEFORE_DISPATCH``'s checks of the call's op."""
    words = _CHECKED_BEFORE_DISPATCH.get(schema_of(plan.functional).name)
    return words is not None and str(error).startswith(words)


def _raise_dtype_rule_error(plan: Plan, metas: list[Any], error: Exception) -> None:
    """Raises the ``dtype_rule`` error of the op's lowering (the dtypes CUDA's kernel takes, with its
    exception and message) when that rule refuses the call and the meta kernel refused a random op
    or a dtype: the Python meta kernels of exponential_, cauchy_, log_normal_, geometric_ and
    dropout refuse some dtypes first, in their own words ("log_normal not implemented for
    torch.complex64"). Returns otherwise."""
    entry = registry.LOWERINGS.get(plan.functional)
    if entry is None or entry.dtype_rule is None or not (entry.random or "dtype" in str(error)):
        return
    names = [argument.name for argument in schema_of(plan.functional).arguments]
    entry.dtype_rule(dict(zip(names, plan.functional_args(metas), strict=True)))


#: The advanced-indexing reads whose index errors ATen raises as IndexError (TORCH_CHECK_INDEX in
#: ATen's TensorAdvancedIndexing.cpp and IndexingUtils.h); their Python meta kernels raise RuntimeError.
_INDEX_OPS = (torch.ops.aten.index.Tensor,)


def _raise_index_error_as_cpu(plan: Plan, metas: list[Any], error: RuntimeError) -> None:
    """Raises ATen's IndexError for an advanced-indexing read whose meta kernel refused its indices
    with a RuntimeError: index tensors of a dtype that cannot index, or index tensors whose shapes do
    not broadcast together ("shape mismatch: indexing tensors could not be broadcast together with
    shapes [2], [3]", where the meta kernel says "Attempting to broadcast a dimension of length 3").
    Returns for other ops and errors."""
    if plan.functional not in _INDEX_OPS:
        return
    message = str(error)
    if message.startswith("tensors used as indices must be long, int, byte or bool tensors"):
        raise IndexError(message) from None
    if message.startswith("Attempting to broadcast a dimension"):
        indices = [index for index in plan.functional_args(metas)[1] if isinstance(index, torch.Tensor)]
        shapes = ", ".join(str(list(index.shape)) for index in indices)
        raise IndexError(
            f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
        ) from None


_COMPLEX_PARTS = re.compile(r"(real|imag) must be floating point, got torch\.\w+")


def _raise_complex_parts_error_as_cpu(name: str, metas: list[Any], error: RuntimeError) -> None:
    """Raises ATen's error for torch.complex or torch.polar of parts that are not floating point
    ("Expected both inputs to be Half, Float or Double tensors but got Char and Char",
    TensorFactories.cpp ``complex_check_floating``), which the Python meta kernel words as an
    assertion about one part. Returns for other ops and errors."""
    if name.removeprefix("aten::").split(".")[0] not in ("complex", "polar") or not _COMPLEX_PARTS.fullmatch(
        str(error)
    ):
        return
    first, second = (aten_name(meta.dtype) for meta in metas[:2])
    raise RuntimeError(
        f"Expected both inputs to be Half, Float or Double tensors but got {first} and {second}"
    ) from None


_SCALE_TYPE = re.compile(
    r"cannot safely convert <class '(?:float|complex)'> to [\w.]+"
    r"|expected bool/int (?:alpha|beta) but got <class '\w+'>"
)


def _raise_scale_error_as_cpu(plan: Plan, metas: list[Any], error: RuntimeError) -> None:
    """Raises ATen's error for an ``alpha`` or ``beta`` the result's dtype cannot take (addr's
    ``check_addr_scalar``, LinearAlgebra.cpp: beta checked first), which torch/_refs words as "cannot
    safely convert <class 'float'> to Int": a float or complex one for integer or bool results, a
    complex one for real floating results (c10's conversion error). Returns for other errors."""
    if not _SCALE_TYPE.fullmatch(str(error)):
        return
    by_name = dict(
        zip((a.name for a in schema_of(plan.functional).arguments), plan.functional_args(metas), strict=False)
    )
    result = by_name["self"]
    for scale in ("beta", "alpha"):
        value = by_name.get(scale, 1)
        if isinstance(value, bool) or not isinstance(value, (float, complex)):
            continue
        if not (result.dtype.is_floating_point or result.dtype.is_complex):
            raise RuntimeError(
                f"For integral input tensors, argument {scale} must not be a floating point number."
            ) from None
        if isinstance(value, complex) and not result.dtype.is_complex:
            type_name = c10_type_name(jax_dtype(result.dtype))
            raise RuntimeError(f"value cannot be converted to type {type_name} without overflow") from None


def _raise_range_size_error_as_cpu(name: str, metas: list[Any], error: RuntimeError) -> None:
    """Raises ATen's error for an arange of more elements than int64 counts ("invalid size, possible
    overflow?", RangeFactories.cpp), where torch/_refs hands the count to prims.iota, whose binding
    fails to convert it; an integer arange given a bound only uint64 holds fails c10's conversion
    of it to int64 first. Returns for other errors."""
    if not (name.startswith("aten::arange") and str(error).startswith("prims::iota() Expected a value of type 'int'")):
        return
    dtype = next((m for m in metas if isinstance(m, torch.dtype)), None)
    integral = dtype is None or not (dtype.is_floating_point or dtype.is_complex)
    if integral and any(isinstance(m, int) and not isinstance(m, bool) and m >= 2**63 for m in metas):
        raise RuntimeError("value cannot be converted to type int64_t without overflow") from None
    raise RuntimeError("invalid size, possible overflow?") from None


_RANGE_DTYPE = re.compile(
    r"linspace\(\): inferred dtype torch\.(\w+) can't be safely cast to passed dtype torch\.(\w+)"
)


def _raise_range_dtype_error_as_cpu(name: str, error: RuntimeError) -> None:
    """Raises ATen's error for linspace/logspace endpoints of a dtype the passed ``dtype`` cannot hold
    ("torch.logspace(): inferred dtype c10::complex<float> can't be safely cast to passed dtype
    Float", RangeFactories.cpp); torch/_refs words both ops' as linspace's, with torch dtypes.
    Returns for other errors."""
    match = _RANGE_DTYPE.fullmatch(str(error))
    if match is None:
        return
    op = "logspace" if name.startswith("aten::logspace") else "linspace"
    inferred, passed = (getattr(torch, group) for group in match.groups())
    raise RuntimeError(
        f"torch.{op}(): inferred dtype {cpp_name(jax_dtype(inferred))} can't be safely cast to passed dtype "
        f"{aten_name(passed)}"
    ) from None


#: The Python meta kernels' errors for a reduction without identity over an empty slice.
_EMPTY_REDUCTION = re.compile(
    r"reducing over zero-size dimension for reduction operation without identity"
    r"|arg(max|min): Expected reduction dim.*"
)


def _raise_repeated_dim_error_as_cpu(plan: Plan, metas: list[Any], error: Exception) -> None:
    """Raises ATen's "dim 0 appears multiple times in the list of dims" (``dim_list_to_bitset``,
    WrapDimUtilsMulti.h: the first repeated dimension, wrapped) where PyTorch's Python meta kernels
    say "duplicate value in the list of dims". Returns for other errors."""
    if str(error) != "duplicate value in the list of dims":
        return
    by_name = dict(
        zip((a.name for a in schema_of(plan.functional).arguments), plan.functional_args(metas), strict=False)
    )
    self, dims = by_name.get("self"), by_name.get("dim", by_name.get("dims"))  # flip's are "dims"
    if not isinstance(self, torch.Tensor) or not isinstance(dims, (list, tuple)):
        return
    check_distinct_dims(self.dim(), dims)


_SOLVER_OPERAND = re.compile(r"^(.+): The input tensor A must have at least 2 dimensions\.$")


def _raise_solver_operand_error_as_cpu(plan: Plan, metas: list[Any], error: RuntimeError) -> None:
    """Raises ATen's ``checkInputsSolver`` error for a right-hand side B of fewer than 2 dimensions
    (``checkIsMatrix(B, f_name, "B")``, LinearAlgebraUtils.h), which PyTorch's meta kernel names A
    (linalg.solve_triangular, linalg.lu_solve). Returns when A is the one at fault or for other errors."""
    match = _SOLVER_OPERAND.fullmatch(str(error))
    tensors = [value for value in plan.functional_args(metas) if isinstance(value, torch.Tensor)]
    if match is not None and tensors and tensors[0].dim() >= 2:
        raise RuntimeError(f"{match.group(1)}: The input tensor B must have at least 2 dimensions.")


def _raise_empty_reduction_error_as_cpu(name: str, plan: Plan, metas: list[Any], error: Exception) -> None:
    """Raises ATen's error for amax, amin, aminmax, argmax or argmin over an empty slice, which their
    Python meta kernels word alike for every op (and raise as RuntimeError): a reduction over every
    dimension of an empty input, or over a given dimension of size 0, the first such in the order
    given and printed as given (ReduceOpsUtils.h ``zero_numel_check_dims``; aminmax's own wording,
    TensorCompare.cpp). Returns for other ops and errors."""
    op = name.removeprefix("aten::").split(".")[0]
    if op not in ("amax", "amin", "aminmax", "argmax", "argmin") or not _EMPTY_REDUCTION.fullmatch(str(error)):
        return
    by_name = dict(
        zip((a.name for a in schema_of(plan.functional).arguments), plan.functional_args(metas), strict=False)
    )
    self, dims = by_name["self"], by_name.get("dim")
    dims = [] if dims is None else [dims] if isinstance(dims, int) else list(dims)
    empty = next((d for d in dims if self.dim() and self.shape[d] == 0), None)
    if empty is not None:
        raise IndexError(
            f"{op}{':' if op == 'aminmax' else '():'} Expected reduction dim {empty} to have non-zero size."
        )
    if dims:
        return
    if op == "aminmax":
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    if op in ("argmax", "argmin"):
        raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
    raise RuntimeError(
        f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
        "Specify the reduction dim with the 'dim' argument."
    )


def _raise_cast_error_as_cpu(name: str, plan: Plan, metas: list[Any], described: list[Any]) -> None:
    """Raises CPU's cast error when an in-place or ``out=`` call's meta kernel rejected it because its
    result cannot be cast into the written tensor: some meta kernels word that differently from
    TensorIterator ("Promotion of int.add/sub_(float) in in-place ops ...", "Attempting to cast
    from ... to out tensor ..."). Returns when that is not the reason (the caller re-raises)."""
    if not plan.writes or plan.functional is plan.op:
        return
    try:
        functional_result = call(plan.functional, plan.functional_args(metas))
    except RuntimeError:
        return  # the functional form fails too: the meta kernel's error is about something else
    written = arguments.flat_tensors(functional_result)[plan.fresh :]
    targets = rules.write_targets(plan, described)
    if len(written) == len(targets):
        rules.check_result_dtypes(name, [], written, targets)


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _raise_argument_error_as_cpu(plan: Plan, metas: list[Any]) -> None:
    """ATen's words for argument checks PyTorch's meta kernels make generically or in other words:
    topk's ``k`` range (a negative ``k`` gave "Expected cond to be True"), repeat's negative sizes
    (ATen makes the result and fails there), scatter_reduce's reduction (named in ATen's message).
    Returns when none of them refuses the call."""
    base = schema_of(plan.functional).name.removeprefix("aten::")
    names = [argument.name for argument in schema_of(plan.functional).arguments]
    by_name = dict(zip(names, plan.functional_args(metas), strict=False))
    self = by_name.get("self")
    if base == "topk" and isinstance(self, torch.Tensor):
        size = 1 if self.dim() == 0 else self.shape[by_name["dim"] % self.dim()]
        if not 0 <= by_name["k"] <= size:
            raise RuntimeError("selected index k out of range") from None
    elif base == "repeat" and isinstance(self, torch.Tensor):
        repeats = list(by_name["repeats"])
        shape = [1] * (len(repeats) - self.dim()) + list(self.shape)
        sizes = [size * count for size, count in zip(shape, repeats, strict=False)]
        negative = next((size for size in sizes if size < 0), None)
        if len(repeats) >= self.dim() and negative is not None:
            raise RuntimeError(f"Trying to create tensor with negative dimension {negative}: {sizes}") from None
    elif base == "scatter_reduce" and by_name.get("reduce") not in _REDUCTIONS:
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {by_name['reduce']}"
        ) from None


def _raise_conversion_error_as_cpu(metas: list[Any], error: Exception) -> None:
    """c10's error for a Scalar that does not fit ``self``'s dtype (masked_fill's Python meta kernel
    says "could not convert to type <class 'int'> without overflow", or lets Python's ``int()`` raise
    ValueError for NaN and infinities). Returns for other errors."""
    message = str(error)
    if not message.startswith(
        ("could not convert to type <class", "cannot convert float NaN to integer", "cannot convert float infinity")
    ):
        return
    target = next((m for m in metas if isinstance(m, torch.Tensor)), None)
    type_name = None if target is None else c10_type_name(jax_dtype(target.dtype))
    if type_name is not None:
        raise RuntimeError(f"value cannot be converted to type {type_name} without overflow") from None


def _raise_broadcast_error_as_cpu(plan: Plan, metas: list[Any], described: list[Any], error: RuntimeError) -> None:
    """Raises TensorIterator's broadcasting error for an elementwise call whose Python meta kernel
    (torch._refs) rejected it in its own words. Returns when that is not the reason."""
    message = str(error)
    if not message.startswith(("Attempting to broadcast a dimension", "output with shape torch.Size")):
        return
    if op_name(plan.op).startswith("aten::_foreach_"):
        _raise_foreach_broadcast_error_as_cpu(plan, metas)
        return
    if torch.Tag.pointwise not in plan.functional.tags:
        return
    inputs = [tuple(value.shape) for value in plan.functional_args(metas) if isinstance(value, torch.Tensor)]
    in_place = [
        description.sizes
        for position in plan.writes
        if plan.is_in_place_self(position)
        for description in arguments.tensor_descriptions(described[position])
        if description is not None
    ]
    rules.check_broadcast(inputs, in_place)


def _raise_foreach_broadcast_error_as_cpu(plan: Plan, metas: list[Any]) -> None:
    """Raises TensorIterator's broadcasting error for a binary foreach op whose tensors do not
    broadcast pairwise: ATen's foreach ops take the slow path then, one op per pair, so the error is
    that op's ("The size of tensor a (10) must match the size of tensor b (11) at non-singleton
    dimension 1"); an in-place op's ``self`` tensors may not be resized."""
    lists = [value for value in plan.functional_args(metas) if isinstance(value, list)]
    if len(lists) < 2:
        return
    in_place = 0 in plan.writes
    for pair in zip(*lists[:2], strict=False):
        shapes = [tuple(tensor.shape) for tensor in pair if isinstance(tensor, torch.Tensor)]
        rules.check_broadcast(shapes, shapes[:1] if in_place else [])
