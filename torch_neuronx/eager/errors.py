"""Argument errors worded as the CPU words them.

Eager kernels check a call by running PyTorch's meta kernel for it. Many meta kernels are Python
(torch/_meta_registrations.py, torch/_refs), and they word some errors differently from the C++
kernels a CPU or CUDA call reaches: shapes print as ``torch.Size([5, 0])`` rather than ``[5, 0]``,
dtypes as ``torch.int64`` rather than ``Long``, and broadcasting errors come from
torch._prims_common instead of TensorIterator. Some refs even resize an in-place ``self`` to the
broadcast shape instead of refusing the call. This module states TensorIterator's rules (ATen's
TensorIterator.cpp ``compute_shape`` and ``set_output_raw_strided``, ExpandUtils.cpp
``infer_size``) and rewrites the meta kernels' wording, so that an error on neuron reads as it does
on the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from torch_neuronx._compat.torch_internals import is_non_overlapping_and_dense_or_false
from torch_neuronx.runtime.dtypes import CPP_TYPE_NAMES, aten_name

_SIZE = re.compile(r"torch\.Size\((\[[^\]]*\])\)")
#: Python meta kernels' wordings of ATen errors, and ATen's: (pattern, replacement).
_REWORDED = (
    (  # addmm/mm's shape check in ATen's Blas.cpp
        re.compile(r"a and b must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]\."),
        r"mat1 and mat2 shapes cannot be multiplied (\1x\2 and \3x\4)",
    ),
    (  # cat_meta in ATen's TensorShape.cpp
        re.compile(r"Number of dimensions of tensors must match\.  Expected (\d+)-D tensors, but got (\d+)-D .*"),
        r"Tensors must have same number of dimensions: got \1 and \2",
    ),
    (  # addmv's shape check in ATen's Blas.cpp (mv is addmv into a result of the matrix's rows)
        re.compile(r"size mismatch, got input \((\d+)x(\d+)\), vec \((\d+)\)"),
        r"size mismatch, got input (\1), mat (\1x\2), vec (\3)",
    ),
    (  # dot/vdot's size check (torch/_refs spells "the" "same" without the space between)
        re.compile(r"to have thesame number of elements"),
        r"to have the same number of elements",
    ),
    (  # baddbmm's dtype check in ATen's LinearAlgebra.cpp prints the input's C++ type, without a colon
        re.compile(r"Input dtypes must be the same, got: input: (\w+), batch1: (\w+), batch2: (\w+)"),
        lambda match: "Input dtypes must be the same, got: input {}, batch1: {}, batch2: {}".format(
            *(_CPP_TYPE.get(name, name) for name in match.groups())
        ),
    ),
)
_DTYPE = re.compile(r"\btorch\.(\w+)\b")
_CPP_TYPE = {aten_name(dtype): cpp for dtype, cpp in CPP_TYPE_NAMES.items()}  # Int -> int, Long -> long int


def output_shape_error(output: Sequence[int], broadcast: Sequence[int]) -> RuntimeError:
    """TensorIterator's error for an in-place or ``out=`` tensor the result does not fit."""
    return RuntimeError(f"output with shape {list(output)} doesn't match the broadcast shape {list(broadcast)}")


def check_no_partial_overlap(written: torch.Tensor, read: torch.Tensor) -> None:
    """ATen's ``assert_no_partial_overlap`` (aten/src/ATen/MemoryOverlap.cpp), which TensorIterator
    and ``copy_`` apply to each input of a written tensor: the two may be the same memory (``x.add_(x)``)
    or disjoint, not partly the same (``x[1:].copy_(x[:-1])``). Like ATen it decides only for tensors
    that are non-overlapping and dense, and lets the rest through.

    Raises:
        RuntimeError: ATen's "unsupported operation: some elements of the input tensor and the
            written-to tensor refer to a single memory location. Please clone() the tensor before
            performing the operation."
    """
    if written is read or written.numel() == 0 or read.numel() == 0 or written.device != read.device:
        return
    if written.untyped_storage().data_ptr() != read.untyped_storage().data_ptr():
        return
    if not (is_non_overlapping_and_dense_or_false(written) and is_non_overlapping_and_dense_or_false(read)):
        return
    written_begin, read_begin = written.data_ptr(), read.data_ptr()
    written_end = written_begin + written.numel() * written.element_size()
    read_end = read_begin + read.numel() * read.element_size()
    if written_begin == read_begin and written_end == read_end:
        partial = written.stride() != read.stride()
    else:
        partial = written_begin < read_end and read_begin < written_end
    if partial:
        raise RuntimeError(
            "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
            "single memory location. Please clone() the tensor before performing the operation."
        )


def check_broadcast(inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]] = ()) -> list[int]:
    """The broadcast shape of ``inputs`` (in operand order), checked as TensorIterator checks it.

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
            shape = torch._C._infer_size(shape, torch.Size(operand))
    for output in outputs:
        if tuple(output) != tuple(shape):
            raise output_shape_error(output, shape)
    return list(shape)


def in_aten_words(error: Exception) -> Exception:
    """``error`` with sizes and dtypes printed as ATen prints them (``[5, 0]``, ``Long``) and the
    wordings in ``_REWORDED`` replaced by ATen's; the same exception when nothing changes."""
    message = str(error)
    worded = _DTYPE.sub(_dtype_word, _SIZE.sub(r"\1", message))
    for pattern, replacement in _REWORDED:
        worded = pattern.sub(replacement, worded)
    if worded == message or type(error) not in (RuntimeError, ValueError, IndexError):
        return error
    return type(error)(worded)


def _dtype_word(match: re.Match[str]) -> str:
    dtype = getattr(torch, match.group(1), None)
    return aten_name(dtype) if isinstance(dtype, torch.dtype) else match.group(0)
