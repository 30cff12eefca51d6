"""NKI's errors: a rule of the hardware or the language broken by a kernel, raised while the kernel is
traced, before anything runs.

Each error carries NKI's name for it (``err_num_partition_exceed_arch_limit``, as listed on NKI's
error page, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.errors.html), NKI's
wording, and the kernel's source line that broke the rule. The exception types are those NKI raises
(``ValueError`` for limits and shapes, ``TypeError`` for dtypes and memories, ``IndexError`` for
out-of-bound access, ``RuntimeError`` for misuse of the API); every one is also an :class:`NKIError`.
"""

from __future__ import annotations

import dataclasses
import linecache
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = [
    "NKIError",
    "NKIIndexError",
    "NKIRuntimeError",
    "NKISyntaxError",
    "NKITypeError",
    "NKIValueError",
    "SourceLocation",
]

ERRORS_PAGE = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.errors.html"


@dataclasses.dataclass(frozen=True)
class SourceLocation:
    """Where a kernel broke a rule: the innermost frame of user code (the kernel or a function it
    calls) at the time of the failing NKI call."""

    filename: str
    lineno: int
    function: str

    @property
    def source(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}, in {self.function}: {self.source}"


class NKIError(Exception):
    """Base of every NKI rule violation. ``code`` is NKI's error name, ``location`` the kernel line."""

    code: str = ""
    location: SourceLocation | None = None


class NKIValueError(NKIError, ValueError):
    pass


class NKITypeError(NKIError, TypeError):
    pass


class NKIIndexError(NKIError, IndexError):
    pass


class NKIRuntimeError(NKIError, RuntimeError):
    pass


class NKISyntaxError(NKIError):
    """A construct NKI cannot compile (dynamic control flow, unsupported indexing)."""


def _is_internal(module: str) -> bool:
    """Frames of the language's implementation, skipped when looking for the kernel's line (the kernel
    library under nki.kernels is user code as far as errors go)."""
    return (module == "nki" or module.startswith("nki.")) and not module.startswith("nki.kernels")


def user_location() -> SourceLocation | None:
    """The innermost frame outside the NKI implementation: the kernel line being traced."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not _is_internal(module) and not module.startswith(("jax", "numpy")):
            return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def clean_notes(error: BaseException) -> None:
    """Drops JAX's note about its filtered traceback frames from an NKI error (its message already
    names the kernel line)."""
    notes = getattr(error, "__notes__", None)
    if notes:
        error.__notes__ = [n for n in notes if "JAX has removed its internal frames" not in n]


def fail(
    code: str, message: str, kind: type[NKIError] = NKISyntaxError, location: SourceLocation | None = None
) -> NoReturn:
    """Raises ``kind`` with NKI's error name, its message, the kernel's source line (``location``, by
    default the innermost line of user code) and the page that documents the error."""
    from nki._core import context

    location = location or user_location()
    kernel = context.current_kernel_name()
    lines = [f"{code}: {message}"]
    if location is not None:
        where = f"in kernel '{kernel}' at " if kernel else "at "
        lines.append(f"  {where}{location}")
    lines.append(f"  see {ERRORS_PAGE}#{code.replace('_', '-')}")
    error = kind("\n".join(lines))
    error.code = code
    error.location = location
    raise error


def shape_str(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def operand(name: str, shape: Sequence[int]) -> str:
    """``data1[128, 512]``: an operand as NKI's messages name it."""
    return f"{name}{shape_str(shape)}"


# The error builders, one per NKI error name, worded as NKI words them.


def num_partition_exceed_arch_limit(partitions: int, limit: int) -> NoReturn:
    fail(
        "err_num_partition_exceed_arch_limit",
        f"number of partitions {partitions} exceed architecture limitation of {limit}.",
        NKIValueError,
    )


def num_partition_mismatch(api: str, operands: Sequence[tuple[str, Sequence[int]]]) -> NoReturn:
    listed = ", ".join(operand(n, s) for n, s in operands)
    fail(
        "err_num_partition_mismatch",
        f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({listed}) of '{api}'",
        NKIValueError,
    )


def size_of_dimension_exceed_arch_limit(dim: int, name: str, shape: Sequence[int], api: str, limit: int) -> NoReturn:
    fail(
        "err_size_of_dimension_exceed_arch_limit",
        f"size of dimension {dim} in '{operand(name, shape)}' of '{api}' exceed architecture limitation of {limit}.",
        NKIValueError,
    )


def exceed_max_supported_dimension(name: str, shape: Sequence[int], api: str, limit: int) -> NoReturn:
    fail(
        "err_exceed_max_supported_dimension",
        f"parameter '{operand(name, shape)}' of '{api}' exceed max supported number of dimensions of {limit}.",
        NKIValueError,
    )


def unsupported_memory(name: str, api: str, expected: str, got: str) -> NoReturn:
    fail(
        "err_unsupported_memory",
        f"Expected operand '{name}' of '{api}' to be in address space '{expected}', but got a tile in '{got}' instead.",
        NKITypeError,
    )


def tensor_access_out_of_bound(tensor: str, dim: int, low: int, high: int, size: int) -> NoReturn:
    fail(
        "err_tensor_access_out_of_bound",
        f"Out-of-bound access for tensor `{tensor}` on dimension {dim}: index range [{low}, {high}] exceed "
        f"dimension size of {size}",
        NKIIndexError,
    )


def one_d_arange_not_supported(tensor: str) -> NoReturn:
    fail(
        "err_1d_arange_not_supported",
        f"indexing tensor `{tensor}` with 1d arange is not supported; add an axis (nl.arange(n)[:, None]) "
        "or use a slice",
    )


def unsupported_mixing_basic_advanced_tensor_indexing() -> NoReturn:
    fail(
        "err_unsupported_mixing_basic_advanced_tensor_indexing",
        "Mixing basic tensor indexing and advanced tensor indexing is not supported.",
    )


def store_dst_shape_smaller_than_other_shape(
    expression: str, dst: str, dst_shape: Sequence[int], other: str
) -> NoReturn:
    fail(
        "err_store_dst_shape_smaller_than_other_shape",
        f"Illegal assignment destination shape in '{expression}': shape {shape_str(dst_shape)} of parameter "
        f"'{dst}' is smaller than other parameter shapes {other}.",
        NKIValueError,
    )


def param_shape_incompatible_with_numpy(api: str, shapes: Sequence[tuple[str, Sequence[int]]]) -> NoReturn:
    listed = ", ".join(operand(n, s) for n, s in shapes)
    fail(
        "err_param_shape_incompatible_with_numpy",
        f"Parameter shapes ({listed}) of '{api}' could not be broadcast together with shapes",
        NKIValueError,
    )


def param_shape_mismatch(api: str, shapes: Sequence[tuple[str, Sequence[int]]]) -> NoReturn:
    listed = ", ".join(operand(n, s) for n, s in shapes)
    fail(
        "err_param_shape_mismatch",
        f"Parameter shapes ({listed}) of '{api}' has mismatched shapes (the number of elements per partition "
        "must be the same)",
        NKIValueError,
    )


def param_shape_incompatible_with_matmul(
    api: str, shapes: Sequence[tuple[str, Sequence[int]]], detail: str
) -> NoReturn:
    listed = ", ".join(operand(n, s) for n, s in shapes)
    fail(
        "err_param_shape_incompatible_with_matmul",
        f"Parameter shapes ({listed}) of '{api}' are incompatible with matrix multiplication: {detail}",
        NKIValueError,
    )


def supported_operand_dtype(name: str, api: str, dtype: Any, expected: Sequence[Any]) -> NoReturn:
    fail(
        "err_supported_operand_dtype",
        f"'{name}' of '{api}' has dtype {dtype}, expected one of the following dtypes: "
        + ", ".join(str(d) for d in expected),
        NKITypeError,
    )


def src_dst_same_dtype(api: str, src: Any, dst: Any) -> NoReturn:
    fail("err_src_dst_same_dtype", f"{api} src and dst must have same data type but got {src} / {dst}", NKITypeError)


def activation_bias_invalid_type(api: str, dtype: Any) -> NoReturn:
    fail(
        "err_activation_bias_invalid_type",
        f"'bias' param of '{api}' must be a vector of type float32, float16, or bfloat16, got '{dtype}'",
        NKITypeError,
    )


def activation_scale_invalid_type(api: str, dtype: Any) -> NoReturn:
    fail(
        "err_activation_scale_invalid_type",
        f"'scale' param of '{api}' must be a scalar or vector of type float32, got '{dtype}'",
        NKITypeError,
    )


def activation_scale_scalar_or_vector(api: str, name: str, shape: Sequence[int], partitions: int) -> NoReturn:
    fail(
        "err_activation_scale_scalar_or_vector",
        f"'{name}' param of '{api}' must be either a scalar value or a vector of shape [{partitions}, 1] "
        f"spanning the partition dimension, got {operand(name, shape)}",
        NKIValueError,
    )


def instruction_unsupported_op(op: str, api: str) -> NoReturn:
    fail("err_instruction_unsupported_op", f"{op} is not supported in '{api}'")


def reduce_unsupported_negate(op: str) -> NoReturn:
    fail("err_reduce_unsupported_negate", f"negate option can only be used with arithmetic ops, unsupported op={op}")


def bitvec_operand_must_be_integer(name: str, dtype: Any) -> NoReturn:
    fail("err_bitvec_operand_must_be_integer", f"bitvec op operand '{name}' has dtype {dtype}, it must be an integer")


def stack_overflow_psum(banks: int, available: int) -> NoReturn:
    fail(
        "err_stack_overflow_psum",
        f"stack overflow: required psum banks {banks} exceeds available psum banks {available}",
        NKIRuntimeError,
    )


def stack_overflow_sbuf(size: int, available: int) -> NoReturn:
    fail(
        "err_stack_overflow_sbuf",
        f"stack overflow: required sbuf size {size} bytes per partition exceeds available sbuf size {available} "
        "bytes per partition",
        NKIRuntimeError,
    )


def hbm_tensor_with_init_value_not_supported() -> NoReturn:
    fail("err_hbm_tensor_with_init_value_not_supported", "Creating HBM tensor with init value is not supported.")


def failed_to_infer_tile_from_local_tensor(name: str, shape: Sequence[int]) -> NoReturn:
    fail(
        "err_failed_to_infer_tile_from_local_tensor",
        f"Failed to infer tile from tensor '{operand(name, shape)}', NKI requires inputs of all compute APIs to "
        "be valid tiles with the first dimension being the partition dimension; index the block dimensions "
        "first (e.g. a[i])",
    )


def tensor_output_not_written_to(name: str, location: SourceLocation | None = None) -> NoReturn:
    fail(
        "err_tensor_output_not_written_to",
        f"output tensor {name} is returned by the kernel but never written to",
        NKIValueError,
        location,
    )


def nki_api_outside_of_nki_kernel(api: str) -> NoReturn:
    fail(
        "err_nki_api_outside_of_nki_kernel",
        f"calling NKI API outside of NKI kernels is not supported ('{api}'); call it from a function "
        "decorated with nki.jit",
        NKIRuntimeError,
    )


def nested_kernel_with_spmd_grid(name: str, grid: Sequence[int]) -> NoReturn:
    fail(
        "err_nested_kernel_with_spmd_grid",
        f"Calling kernel with spmd grid ({name}{shape_str(grid)}) inside another kernel is not supported.",
    )


def program_id_axis_out_of_bounds(axis: int, rank: int) -> NoReturn:
    fail(
        "err_program_id_axis_out_of_bounds",
        f"axis in `program_id` is out-of-bound(s) of the spmd launch grid (axis={axis}, grid rank {rank})",
        NKIIndexError,
    )


def dynamic_control_flow_not_supported() -> NoReturn:
    fail(
        "err_dynamic_control_flow_not_supported",
        "dynamic control-flow depending on tensor value is not supported.",
    )


def control_flow_condition_depending_on_arange() -> NoReturn:
    fail(
        "err_control_flow_condition_depending_on_arange",
        "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported; use the `mask` parameter.",
    )


def cannot_assign_to_index() -> NoReturn:
    fail("err_cannot_assign_to_index", "'index' tensor does not support item assignment", NKITypeError)


def unsupported_expression_in_mask() -> NoReturn:
    fail(
        "err_unsupported_expression_in_mask",
        "NKI mask expressions must be affine expressions of static loop indices. Dynamic values, tensor "
        "elements, or non-affine operations are not supported in mask predicates.",
        NKIValueError,
    )


def operand_cannot_be_none(name: str, api: str) -> NoReturn:
    fail("err_operand_cannot_be_none", f"'{name}' of '{api}' cannot be None.", NKIValueError)


def not_supported(feature: str) -> NoReturn:
    """A documented NKI feature this emulation does not implement (raised, never silently wrong)."""
    raise NotImplementedError(f"{feature} is not supported by the emulated NeuronCore (see docs/nki.md)")
