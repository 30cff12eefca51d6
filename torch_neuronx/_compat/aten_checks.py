"""ATen's argument checks of ops whose PyTorch meta kernel (a decomposition or Python reference in
``torch/_decomp``, ``torch/_refs`` or ``torch/_meta_registrations.py``) checks less or words them
otherwise, in ATen's words and order. CPU and CUDA share these checks (structured meta functions,
``im2col_shape_check.h``, ``PixelShuffle.h``, ``layer_norm.h``, ``LossNLL.cpp``, ``Blas.cpp``,
``TensorShape.cpp``, ``ScatterGatherChecks.h``, ``Pool.h``, ``BatchLinearAlgebra.cpp``, ...), so a
user sees the same error on neuron as on either.

What PyTorch's meta kernels did instead. Computed where ATen refuses: ``F.unfold`` with a negative
padding, ``soft_margin_loss`` with a target larger than the input, ``addmm`` with a ``self`` of more
dimensions than the result, ``slice_scatter``/``select_scatter``/``diagonal_scatter`` with a ``src``
of another shape, softmax's backward with a gradient of another shape, ``ormqr`` with fewer
reflectors than ``min(m, n)`` (torch 2.13's ATen asks for exactly that many). Raised Python's errors:
``pixel_shuffle``/``pixel_unshuffle`` with a factor of 0 (ZeroDivisionError), ``native_group_norm``
with 0 groups. Worded otherwise: "a must be 2D" for ``mm``, a ``stack`` message without its second
shape, ``cat``'s and ``scatter``'s sizes against another tensor, ``masked_fill``'s operands in the
other order, fold/unfold, layer_norm, nll_loss, the margin losses, and pooling with a negative
kernel size (its padding bound divided with floor where ATen truncates).

Each check takes the op's arguments as its meta kernel does and returns None; ``meta_kernels``
runs it before the meta kernel (:data:`CHECKS`). Symbolic sizes (dynamic-shape traces) are left to
PyTorch's meta kernel where a check would need concrete ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import (
    ELEMENTWISE_TYPE_PROMOTION_KIND,
    OpOverload,
    elementwise_dtypes,
    infer_size,
)

__all__ = [
    "CHECKS",
    "MAT1_MAT2_DTYPES",
    "SELF_MAT2_DTYPES",
    "check_distinct_dims",
    "check_index_count",
    "scalar_type_name",
    "stream_text",
]

aten = torch.ops.aten

#: ADDMM_META's dtype errors (LinearAlgebra.cpp), formatted with the two dtypes' ATen names.
SELF_MAT2_DTYPES = "self and mat2 must have the same dtype, but got {0} and {1}"
MAT1_MAT2_DTYPES = "mat1 and mat2 must have the same dtype, but got {0} and {1}"


def scalar_type_name(dtype: torch.dtype) -> str:
    """ATen's ScalarType name of ``dtype`` as its messages print it: "Float" from "torch.FloatTensor"."""
    return torch.empty((), dtype=dtype, device="meta").type().rsplit(".", 1)[-1].removesuffix("Tensor")


def stream_text(value: float) -> str:
    """``value`` as a C++ ``std::ostream`` prints a float or double in ATen's messages: 6 significant
    digits ("1e-50", "0.5", "inf"), and "-nan" for a NaN with its sign bit set (glibc), which
    Python's ``format(value, "g")`` prints as "nan"."""
    value = float(value)
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return format(value, "g")


def _pair(name: str, values: list[int]) -> None:
    torch._check(len(values) == 2, lambda: f"It is expected {name} equals to 2, but got size {len(values)}")


def _window_checks(
    kernel: list[int], dilation: list[int], padding: list[int], stride: list[int], *, fold: bool
) -> None:
    """The kernel, stride, dilation and padding checks of ``im2col_shape_check`` and
    ``col2im_shape_check`` (im2col_shape_check.h), which order them differently."""

    def kernel_check() -> None:
        torch._check(
            kernel[1] > 0 and kernel[0] > 0,
            lambda: (
                f"kernel size should be greater than zero, but got kernel_height: {kernel[0]} kernel_width: {kernel[1]}"
            ),
        )

    def stride_check() -> None:
        torch._check(
            stride[1] > 0 and stride[0] > 0,
            lambda: f"stride should be greater than zero, but got stride_height: {stride[0]} stride_width: {stride[1]}",
        )

    def dilation_check() -> None:
        torch._check(
            dilation[1] > 0 and dilation[0] > 0,
            lambda: (
                f"dilation should be greater than zero, but got dilation_height: {dilation[0]} "
                f"dilation_width: {dilation[1]}"
            ),
        )

    def padding_check() -> None:
        torch._check(
            padding[1] >= 0 and padding[0] >= 0,
            lambda: f"padding should be non-negative, but got pad_height: {padding[0]} pad_width: {padding[1]}",
        )

    order = (kernel_check, stride_check, dilation_check, padding_check)
    if not fold:
        order = (kernel_check, dilation_check, padding_check, stride_check)
    for check in order:
        check()


def _im2col(
    self: torch.Tensor, kernel_size: list[int], dilation: list[int], padding: list[int], stride: list[int], **_: Any
) -> None:
    """``F.unfold``: im2col_out_cpu_template's lengths, then ``im2col_shape_check``. A 1-D or 2-D
    input raises IndexError from ``input.size(2)``, as in ATen."""
    lengths = (("kernel_size", kernel_size), ("dilation", dilation), ("padding", padding), ("stride", stride))
    for name, values in lengths:
        _pair(name, values)
    _window_checks(kernel_size, dilation, padding, stride, fold=False)
    ndim = self.dim()
    valid_dims = self.size(1) != 0 and self.size(2) != 0
    torch._check(
        (ndim == 3 and self.size(0) != 0 and valid_dims) or (ndim == 4 and valid_dims and self.size(3) != 0),
        lambda: (
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
            f"input, but got: {list(self.shape)}"
        ),
    )
    height, width = self.shape[-2:]
    blocks = [
        (size + 2 * pad - (dil * (k - 1) + 1)) // step + 1
        for size, k, dil, pad, step in zip((height, width), kernel_size, dilation, padding, stride, strict=True)
    ]
    torch._check(
        blocks[0] >= 1 and blocks[1] >= 1,
        lambda: (
            f"Given input with spatial size ({height}, {width}), kernel_size=({kernel_size[0]}, {kernel_size[1]}), "
            f"dilation=({dilation[0]}, {dilation[1]}), padding=({padding[0]}, {padding[1]}), calculated shape of "
            f"the array of sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be at least one."
        ),
    )


def _col2im(
    self: torch.Tensor,
    output_size: list[int],
    kernel_size: list[int],
    dilation: list[int],
    padding: list[int],
    stride: list[int],
    **_: Any,
) -> None:
    """``F.fold``: col2im_out_cpu_template's lengths, then ``col2im_shape_check``."""
    lengths = (("output_size", output_size), ("kernel_size", kernel_size), ("dilation", dilation))
    for name, values in (*lengths, ("padding", padding), ("stride", stride)):
        _pair(name, values)
    _window_checks(kernel_size, dilation, padding, stride, fold=True)
    ndim = self.dim()
    torch._check(
        (ndim == 2 and self.size(0) != 0 and self.size(1) != 0)
        or (ndim == 3 and self.size(1) != 0 and self.size(2) != 0),
        lambda: (
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions "
            f"for input, but got: {list(self.shape)}"
        ),
    )
    planes, length = self.shape[-2:]
    kernel_h, kernel_w = kernel_size
    torch._check(
        planes % (kernel_w * kernel_h) == 0,
        lambda: (
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={planes} and kernel_size=({kernel_h}, {kernel_w})."
        ),
    )
    blocks_h, blocks_w = (
        (size + 2 * pad - dil * (k - 1) - 1) // step + 1
        for size, k, dil, pad, step in zip(output_size, kernel_size, dilation, padding, stride, strict=True)
    )
    arguments = (
        f"Given output_size=({output_size[0]}, {output_size[1]}), kernel_size=({kernel_h}, {kernel_w}), "
        f"dilation=({dilation[0]}, {dilation[1]}), padding=({padding[0]}, {padding[1]}), "
        f"stride=({stride[0]}, {stride[1]}), "
    )
    torch._check(
        length == blocks_h * blocks_w,
        lambda: (
            f"{arguments}expected size of input's dimension 2 to match the calculated number of sliding blocks "
            f"{blocks_h} * {blocks_w} = {blocks_h * blocks_w}, but got input.size(2)={length}."
        ),
    )
    torch._check(
        blocks_h >= 1 and blocks_w >= 1,
        lambda: (
            f"{arguments}calculated shape of the array of sliding blocks as ({blocks_h}, {blocks_w}), which is too "
            "small (non-positive)"
        ),
    )
    torch._check(
        output_size[1] >= 1 and output_size[0] >= 1,
        lambda: (
            f"Expected output spatial size to be positive, but got: output_size=({output_size[0]}, {output_size[1]})."
        ),
    )


def _pixel_arguments(name: str, self: torch.Tensor, factor_name: str, factor: int) -> None:
    """The rank and factor checks that ``check_pixel_shuffle_shapes`` and
    ``check_pixel_unshuffle_shapes`` (PixelShuffle.h) begin with."""
    torch._check(
        self.dim() >= 3,
        lambda: f"{name} expects input to have at least 3 dimensions, but got input with {self.dim()} dimension(s)",
    )
    torch._check(factor > 0, lambda: f"{name} expects a positive {factor_name}, but got {factor}")


def _pixel_shuffle(self: torch.Tensor, upscale_factor: int, **_: Any) -> None:
    """``check_pixel_shuffle_shapes`` (PixelShuffle.h)."""
    _pixel_arguments("pixel_shuffle", self, "upscale_factor", upscale_factor)
    channels, square = self.size(-3), upscale_factor * upscale_factor
    torch._check(
        channels % square == 0,
        lambda: (
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={channels} is not divisible by {square}"
        ),
    )


def _pixel_unshuffle(self: torch.Tensor, downscale_factor: int, **_: Any) -> None:
    """``check_pixel_unshuffle_shapes`` (PixelShuffle.h)."""
    _pixel_arguments("pixel_unshuffle", self, "downscale_factor", downscale_factor)
    for dim, name in ((-2, "height"), (-1, "width")):
        size = self.size(dim)
        torch._check(
            size % downscale_factor == 0,
            lambda size=size, dim=dim, name=name: (
                f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but input.size({dim})={size} "
                f"is not divisible by {downscale_factor}"
            ),
        )


def _native_layer_norm(
    input: torch.Tensor,
    normalized_shape: list[int],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    **_: Any,
) -> None:
    """``_check_layer_norm_inputs`` (layer_norm.h)."""
    shape = list(normalized_shape)
    torch._check(
        len(shape) >= 1,
        lambda: (
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but "
            f"got normalized_shape = {shape}"
        ),
    )
    for name, parameter in (("weight", weight), ("bias", bias)):
        torch._check(
            parameter is None or list(parameter.shape) == shape,
            lambda name=name, parameter=parameter: (
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(parameter.shape)} and normalized_shape = {shape}"
            ),
        )
    sizes = list(input.shape)
    torch._check(
        len(sizes) >= len(shape) and sizes[len(sizes) - len(shape) :] == shape,
        lambda: (
            f"Given normalized_shape={shape}, expected input with shape [*{''.join(f', {s}' for s in shape)}], "
            f"but got input of size{sizes}"
        ),
    )


def _nll_loss_forward(
    self: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, *_: Any, **__: Any
) -> None:
    """``TORCH_META_FUNC(nll_loss_forward)`` (LossNLL.cpp, torch 2.13: the target's dtype, and a 1-D
    target of a 1-D input, are checked there; CPU and CUDA share it)."""
    torch._check(0 < self.dim() <= 2, lambda: "input tensor should be 1D or 2D")
    torch._check(target.dim() <= 1, lambda: "0D or 1D target tensor expected, multi-target not supported")
    torch._check(
        target.dtype in (torch.int64, torch.uint8),
        lambda: f"expected target dtype to be Long or Byte, but got {scalar_type_name(target.dtype)}",
    )
    if self.dim() == 1 and target.dim() == 1:
        torch._check_value(
            target.size(0) == 1,
            lambda: f"For 1D input, 1D target must have size 1, but got target size: {target.size(0)}",
        )
    torch._check(
        self.dim() == 1 or self.size(0) == target.size(0),  # a 0-dim target raises size()'s IndexError
        lambda: f"size mismatch (got input: {list(self.shape)}, target: {list(target.shape)})",
    )
    classes = self.size(-1)
    torch._check(
        weight is None or (weight.dim() == 1 and weight.numel() == classes),
        lambda: (
            f"weight tensor should be defined either for all {classes} classes or no classes but got weight tensor "
            f"of shape: {list(weight.shape)}"
        ),
    )


def _nll_loss2d_forward(
    self: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, *_: Any, **__: Any
) -> None:
    """``check_inputs_nll_loss2d`` in CUDA's words (cuda/NLLLoss2d.cu, with its doubled colon); the
    CPU's LossNLL2d.cpp words the ranks and sizes otherwise ("but got targets of dimension: 2")."""
    torch._check(
        target.dim() == 3,
        lambda: (
            f"only batches of spatial targets supported (3D tensors) but got targets of size: : {list(target.shape)}"
        ),
    )
    torch._check(
        self.dim() == 4,
        lambda: f"only batches of spatial inputs supported (4D tensors), but got input of size: {list(self.shape)}",
    )
    torch._check(
        weight is None or weight.numel() == self.size(1),
        lambda: "weight tensor should be defined either for all or no classes",
    )
    torch._check(
        self.size(0) == target.size(0) and self.size(2) == target.size(1) and self.size(3) == target.size(2),
        lambda: (
            f"input and target batch or spatial sizes don't match: target {list(target.shape)}, input "
            f"{list(self.shape)}"
        ),
    )


def _matrix(name: str, tensor: torch.Tensor, *, rank: bool) -> None:
    """``TORCH_CHECK(t.dim() == 2, ...)`` of mm's (``rank=False``) and addmm's meta (Blas.cpp)."""
    torch._check(
        tensor.dim() == 2,
        lambda: f"{name} must be a matrix, got {tensor.dim()}-D tensor" if rank else f"{name} must be a matrix",
    )


def _mm(self: torch.Tensor, mat2: torch.Tensor, *_: Any, **__: Any) -> None:
    _matrix("self", self, rank=False)
    _matrix("mat2", mat2, rank=False)


def _addmm(self: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *_: Any, **__: Any) -> None:
    """ADDMM_META (LinearAlgebra.cpp): dtypes, ranks, shapes; then ``expand_size(self, {m, n},
    "addmm")`` of the CPU's and CUDA's kernels: a ``self`` of more dimensions than the result was
    broadcast (and computed) by PyTorch's decomposition, whose ``mm`` checked ranks first."""
    for first, message in ((self, SELF_MAT2_DTYPES), (mat1, MAT1_MAT2_DTYPES)):
        if first.dtype != mat2.dtype:
            raise RuntimeError(message.format(scalar_type_name(first.dtype), scalar_type_name(mat2.dtype)))
    _matrix("mat1", mat1, rank=True)
    _matrix("mat2", mat2, rank=True)
    torch._check(
        mat1.shape[1] == mat2.shape[0],
        lambda: (
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})"
        ),
    )
    if _static(self, mat1, mat2):
        _expand_size(self, [mat1.shape[0], mat2.shape[1]])


def _expand_size(tensor: torch.Tensor, sizes: list[int]) -> None:
    """``inferExpandGeometry``'s errors (ExpandUtils.cpp) for a neuron ``tensor`` expanded to
    ``sizes`` of no -1: fake tensors would raise PyTorch's reference's words."""
    torch._check(
        len(sizes) >= tensor.dim(),
        lambda: (
            f"expand(neuron{scalar_type_name(tensor.dtype)}Type{{{list(tensor.shape)}}}, size={sizes}): the number "
            f"of sizes provided ({len(sizes)}) must be greater or equal to the number of dimensions in the "
            f"tensor ({tensor.dim()})"
        ),
    )
    for offset in range(1, tensor.dim() + 1):  # the last dimension first
        size, target = tensor.shape[-offset], sizes[-offset]
        if size not in (1, target):
            raise RuntimeError(
                f"The expanded size of the tensor ({target}) must match the existing size ({size}) at "
                f"non-singleton dimension {len(sizes) - offset}.  Target sizes: {sizes}.  "
                f"Tensor sizes: {list(tensor.shape)}"
            )


def _addmv_shapes(self_dim: int, self_numel: int, self_size: int, mat: torch.Tensor, vec: torch.Tensor) -> None:
    torch._check(
        mat.dim() == 2 and vec.dim() == 1 and self_dim <= 1,
        lambda: f"vector + matrix @ vector expected, got {self_dim}, {mat.dim()}, {vec.dim()}",
    )
    torch._check(
        mat.size(1) == vec.size(0) and (mat.size(0) == self_numel or self_numel == 1),
        lambda: f"size mismatch, got input ({self_size}), mat ({mat.size(0)}x{mat.size(1)}), vec ({vec.size(0)})",
    )


def _addmv(self: torch.Tensor, mat: torch.Tensor, vec: torch.Tensor, *_: Any, **__: Any) -> None:
    """``TORCH_META_FUNC(addmv)`` (Blas.cpp)."""
    _addmv_shapes(self.dim(), self.numel(), self.size(0) if self.dim() else 1, mat, vec)


def _mv(self: torch.Tensor, vec: torch.Tensor, **_: Any) -> None:
    """``mv`` (Blas.cpp): addmv into a result of ``self.size(0)`` elements."""
    rows = self.size(0)
    _addmv_shapes(1, rows, rows, self, vec)


def _stack(tensors: list[torch.Tensor], dim: int = 0, **_: Any) -> None:
    """``stack`` (TensorShape.cpp): ``dim`` wrapped for a result of one more dimension, then
    ``check_stack_inputs``."""
    if tensors:
        rank = tensors[0].dim() + 1
        torch._check_index(
            -rank <= dim < rank,
            lambda: f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})",
        )
    first = list(tensors[0].shape) if tensors else []
    for position, tensor in enumerate(tensors[1:], start=1):
        torch._check(
            list(tensor.shape) == first,
            lambda tensor=tensor, position=position: (
                f"stack expects each tensor to be equal size, but got {first} at entry 0 and {list(tensor.shape)} "
                f"at entry {position}"
            ),
        )


def _renorm(self: torch.Tensor, p: complex, dim: int, maxnorm: complex, **_: Any) -> None:
    """``TORCH_META_FUNC(renorm)`` (Normalization.cpp); a C++ stream prints the doubles (``-1``)."""
    torch._check(not isinstance(p, complex), lambda: "renorm: p must be real-valued")
    torch._check(p > 0, lambda: "renorm: non-positive-norm not supported")
    torch._check(not isinstance(maxnorm, complex), lambda: "renorm: maxnorm must be real-valued")
    torch._check(maxnorm >= 0, lambda: f"renorm: expected maxnorm to be >= 0 but got {stream_text(maxnorm)}")
    torch._check(self.dim() > 1, lambda: f"renorm: input needs at least 2 dimensions, got {self.dim()} dimensions")


def _scattered_into(src: torch.Tensor, view: torch.Tensor) -> None:
    """The check of slice_scatter, select_scatter and diagonal_scatter (TensorShape.cpp, CPU and
    CUDA): ``src`` has the shape of the view of ``self`` it is written into. PyTorch's decompositions
    broadcast a smaller ``src`` (and computed) or failed in JAX."""
    torch._check(
        list(view.shape) == list(src.shape),
        lambda: (
            f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, slice size = "
            f"{list(view.shape)}"
        ),
    )


def _slice_scatter(
    self: torch.Tensor,
    src: torch.Tensor,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
    **_: Any,
) -> None:
    _scattered_into(src, aten.slice.Tensor(self, dim, start, end, step))  # slice's own errors first


def _select_scatter(self: torch.Tensor, src: torch.Tensor, dim: int, index: int, **_: Any) -> None:
    _scattered_into(src, aten.select.int(self, dim, index))


def _diagonal_scatter(
    self: torch.Tensor, src: torch.Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1, **_: Any
) -> None:
    _scattered_into(src, aten.diagonal.default(self, offset, dim1, dim2))


def _softmax_backward_data(
    grad_output: torch.Tensor, output: torch.Tensor, dim: int, input_dtype: torch.dtype, **_: Any
) -> None:
    """``TORCH_META_FUNC(_softmax_backward_data)``'s ``checkSameSize`` (SoftMax.cpp): PyTorch's
    decomposition broadcast a gradient of another shape."""
    torch._check(
        list(grad_output.shape) == list(output.shape),
        lambda: (
            f"Expected tensor for argument #1 'grad' to have same size as tensor for argument #2 'output'; but "
            f"{list(grad_output.shape)} does not equal {list(output.shape)} (while checking arguments for "
            "softmax_backward)"
        ),
    )


def _native_group_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    eps: float,
    **_: Any,
) -> None:
    """``native_group_norm`` (group_norm.cpp): ``check_group_norm_inputs`` (whose bias message prints
    the weight's shape), the statistics' ``empty({N, group})``, then the kernels' element count."""
    torch._check(group > 0, lambda: f"Expected num groups to be greater than 0, got {group}")
    torch._check(
        C % group == 0,
        lambda: (
            "Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={group}"
        ),
    )
    for name, parameter in (("weight", weight), ("bias", bias)):
        printed = weight if weight is not None else parameter
        torch._check(
            parameter is None or (parameter.dim() == 1 and parameter.numel() == C),
            lambda name=name, printed=printed: (
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got {name} "
                f"of shape {list(printed.shape)} and input of shape {list(input.shape)}"
            ),
        )
    input.new_empty((N, group))  # ATen's error for a negative size
    torch._check(
        input.numel() == N * C * HxW,
        lambda: (
            "Expected X.numel() == N * C * HxW to be true, but got false.  (Could this error message be improved?  "
            "If so, please report an enhancement request to PyTorch.)"
        ),
    )


def _scatter(self: torch.Tensor, dim: int, index: torch.Tensor, src: object = None, *_: Any, **__: Any) -> None:
    """``scatter_shape_check`` of scatter, scatter_add and scatter_reduce (ScatterGatherChecks.h, CPU
    and CUDA): the index no larger than ``self`` apart from ``dim``, and than ``src`` (a tensor, not
    scatter's value) everywhere; a 0-dim tensor counts as one element of one dimension."""
    if index.numel() == 0:
        return
    dims = max(self.dim(), 1)
    torch._check(
        dims == max(index.dim(), 1), lambda: "Index tensor must have the same number of dimensions as self tensor"
    )
    source = src if isinstance(src, torch.Tensor) else None
    torch._check_index(
        -dims <= dim < dims,
        lambda: f"Dimension out of range (expected to be in range of [{-dims}, {dims - 1}], but got {dim})",
    )
    dim %= dims

    def size(tensor: torch.Tensor, d: int) -> int:  # ensure_nonempty_size; a lower rank raises IndexError
        return tensor.size(d) if tensor.dim() else 1

    wrong = any(d != dim and size(index, d) > size(self, d) for d in range(dims)) or (
        source is not None and any(size(index, d) > size(source, d) for d in range(dims))
    )
    # The CPU reads src's sizes first (IndexError for a lower rank), then checks its rank.
    torch._check(
        source is None or max(source.dim(), 1) == max(index.dim(), 1),
        lambda: "Index tensor must have the same number of dimensions as src tensor",
    )
    torch._check(
        not wrong,
        lambda: (
            f"Expected index {list(index.shape)} to be no larger than self {list(self.shape)} apart from dimension "
            f"{dim}" + (f" and to be no larger size than src {list(source.shape)}" if source is not None else "")
        ),
    )


def _linalg_cross(self: torch.Tensor, other: torch.Tensor, *_: Any, dim: int = -1, **__: Any) -> None:
    """``TORCH_META_FUNC(linalg_cross)`` (Cross.cpp): ranks, the length 3 along ``dim``, then the
    batch dimensions' broadcast with ATen's error."""
    torch._check(self.dim() == other.dim(), lambda: "linalg.cross: inputs must have the same number of dimensions.")
    torch._check(
        self.size(dim) == 3 and other.size(dim) == 3,
        lambda: f"linalg.cross: inputs dimension {dim} must have length 3. Got {self.size(dim)} and {other.size(dim)}",
    )
    if _static(self, other):
        infer_size(self.shape, other.shape)


def _ormqr(input: torch.Tensor, tau: torch.Tensor, other: torch.Tensor, left: bool = True, *_: Any, **__: Any) -> None:
    """``ormqr_out``'s shape and dtype checks (BatchLinearAlgebra.cpp, CPU and CUDA; torch 2.13's order
    and words): ``tau`` holds exactly ``min(other.shape[cond], input.shape[-1])`` reflectors, where
    PyTorch's meta kernel accepted fewer (and computed) and words the bound otherwise."""
    torch._check(input.dim() >= 2, lambda: "torch.ormqr: input must have at least 2 dimensions.")
    torch._check(other.dim() >= 2, lambda: "torch.ormqr: other must have at least 2 dimensions.")
    if not _static(input, tau, other):
        return
    cond = -2 if left else -1
    torch._check(
        other.size(cond) == input.size(-2),
        lambda: f"torch.ormqr: other.shape[{cond}] must be equal to input.shape[-2]",
    )
    torch._check(
        tau.size(-1) == min(other.size(cond), input.size(-1)),
        lambda: f"torch.ormqr: tau.shape[-1] must be equal to min(other.shape[{cond}], input.shape[-1])",
    )
    torch._check(
        input.dim() - tau.dim() == 1,
        lambda: (
            "torch.ormqr: Expected tau to have one dimension less than input, but got tau.ndim equal to "
            f"{tau.dim()} and input.ndim is equal to {input.dim()}"
        ),
    )
    torch._check(
        input.dim() == other.dim(),
        lambda: (
            "torch.ormqr: Expected other to have the same number of dimensions as input, but got other.ndim "
            f"equal to {other.dim()} and input.ndim is equal to {input.dim()}"
        ),
    )
    batch = list(input.shape[:-2])
    for name, given in (("tau", list(tau.shape[:-1])), ("other", list(other.shape[:-2]))):
        torch._check(
            given == batch,
            lambda name=name, given=given: (
                f"torch.ormqr: Expected batch dimensions of {name} to be equal to input.shape[:-2], but got {given}"
            ),
        )
    for name, tensor in (("tau", tau), ("other", other)):  # ATen's words lack a space after the first "dtype"
        torch._check(
            tensor.dtype == input.dtype,
            lambda name=name, tensor=tensor: (
                f"torch.ormqr: Expected input and {name} to have the same dtype, but input has dtype"
                f"{scalar_type_name(input.dtype)} and {name} has dtype {scalar_type_name(tensor.dtype)}"
            ),
        )


def _addr(
    self: torch.Tensor, vec1: torch.Tensor, vec2: torch.Tensor, *_: Any, beta: Any = 1, alpha: Any = 1, **__: Any
) -> None:
    """``addr``'s checks (LinearAlgebra.cpp, CPU and CUDA): both vectors 1-D, then
    ``check_addr_scalar`` of beta before alpha against the dtype the three compute in (PyTorch's
    Python reference checks alpha first, and not a floating scalar with an integral result)."""
    for name, vector in (("vec1", vec1), ("vec2", vec2)):
        torch._check(
            vector.dim() == 1,
            lambda name=name, vector=vector: f"addr: Expected 1-D argument {name}, but got {vector.dim()}-D",
        )
    dtype = elementwise_dtypes(self, vec1, vec2, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
    for name, scalar in (("beta", beta), ("alpha", alpha)):
        torch._check(
            not isinstance(scalar, bool) or dtype == torch.bool,
            lambda name=name: f"Boolean {name} only supported for Boolean results.",
        )
        torch._check(
            dtype.is_floating_point or dtype.is_complex or isinstance(scalar, (bool, int)),
            lambda name=name: f"For integral input tensors, argument {name} must not be a floating point number.",
        )


def _pool_bounds(
    self: torch.Tensor,
    spatial: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    *,
    rank_checked: bool = False,
) -> None:
    """The checks of max/avg pooling's meta functions (DilatedMaxPool2d.cpp, AveragePool2d.cpp, their
    3-D kinds; CPU and CUDA) up to the window's bounds: ``pooling_output_shape``
    per spatial dimension (Pool.h: stride, padding, and the padding against half the dilated
    kernel in C++'s truncating division), then ``pool2d_shape_check``/``pool3d_shape_check``'s
    kernel, stride and dilation bounds. PyTorch's meta divides with floor, so a negative kernel size
    or dilation failed the padding bound first, in other words. Arguments of another length and
    inputs of another rank are left to PyTorch's meta (its errors are ATen's)."""

    def expanded(values: Any) -> list[int]:
        values = [values] if isinstance(values, int) else list(values)
        return values * spatial if len(values) == 1 else values

    kernel, padding, dilation = expanded(kernel_size), expanded(padding), expanded(dilation)
    stride = expanded(stride) if (isinstance(stride, int) or len(stride)) else kernel
    if any(len(values) != spatial for values in (kernel, stride, padding, dilation)):
        return
    # max_pool2d_with_indices' meta checks the rank after the lengths, before reading sizes (PyTorch's
    # read size(-3) first).
    torch._check(
        not rank_checked or self.dim() in (3, 4), lambda: "non-empty 3D or 4D (batch mode) tensor expected for input"
    )
    if self.dim() not in (spatial + 1, spatial + 2):
        return  # the input's rank is checked first, by PyTorch's meta or max_pool2d's check
    for k, step, pad, dil in zip(kernel, stride, padding, dilation, strict=True):
        torch._check(step != 0, lambda: "stride should not be zero")
        torch._check(pad >= 0, lambda pad=pad: f"pad must be non-negative, but got pad: {pad}")
        torch._check(
            pad <= int(((k - 1) * dil + 1) / 2),  # C++'s division truncates
            lambda pad=pad, k=k, dil=dil: (
                f"pad should be at most half of effective kernel size, but got pad={pad}, kernel_size={k} and "
                f"dilation={dil}"
            ),
        )
    names = ("T", "H", "W")[-spatial:]
    for what, values, prefix in (
        ("kernel size", kernel, "k"),
        ("stride", stride, "d"),
        ("dilation", dilation, "dilation"),
    ):
        torch._check(
            all(value > 0 for value in values),
            lambda what=what, values=values, prefix=prefix: (
                f"{what} should be greater than zero, but got "
                + " ".join(f"{prefix}{name}: {value}" for name, value in zip(names, values, strict=True))
            ),
        )


def _max_pool(spatial: int) -> Callable[..., None]:
    def check(
        self: torch.Tensor,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        *_: Any,
        **__: Any,
    ) -> None:
        _pool_bounds(self, spatial, kernel_size, stride, padding, dilation, rank_checked=spatial == 2)

    return check


def _avg_pool(spatial: int) -> Callable[..., None]:
    def check(self: torch.Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0, *_: Any, **__: Any) -> None:
        _pool_bounds(self, spatial, kernel_size, stride, padding, 1)

    return check


def _segment_reduce(
    data: torch.Tensor,
    reduce: str,
    *,
    lengths: torch.Tensor | None = None,
    indices: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    axis: int = 0,
    **_: Any,
) -> None:
    """``segment_reduce_kernel``'s checks (SegmentReduce.cpp, CPU and CUDA): PyTorch's meta read
    ``lengths.shape[axis]`` unchecked (Python's IndexError for lengths of more dimensions than data)
    and refused ``indices`` with NotImplementedError."""
    dims = max(data.dim(), 1)
    torch._check_index(
        -dims <= axis < dims,
        lambda: f"Dimension out of range (expected to be in range of [{-dims}, {dims - 1}], but got {axis})",
    )
    axis %= dims
    torch._check(indices is None, lambda: "segment_reduce(): indices based reduction is not supported yet.")
    torch._check(
        lengths is not None or offsets is not None,
        lambda: "segment_reduce(): Either lengths or offsets must be defined.",
    )
    torch._check(
        reduce in ("sum", "prod", "mean", "max", "amax", "min", "amin"),  # ReductionType.h get_reduction_enum
        lambda: f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}",
    )
    name, bounds = ("offsets", offsets) if offsets is not None else ("lengths", lengths)
    torch._check(
        data.dim() >= bounds.dim(),
        lambda: (
            f"Expected data.dim() >= {name}_value.dim() to be true, but got false.  (Could this error message be "
            "improved?  If so, please report an enhancement request to PyTorch.)"
        ),
    )
    torch._check(
        axis == bounds.dim() - 1,
        lambda: f"segment_reduce(): Expected axis to be the last dimension of {name} but got {axis}.",
    )


def _mask_broadcast(self: torch.Tensor, mask: torch.Tensor, *_: Any, **__: Any) -> None:
    """``expand_outplace(mask, self)`` of masked_fill and masked_scatter (TensorAdvancedIndexing.cpp):
    the mask is tensor a of ATen's broadcast error. Symbolic sizes (a dynamic-shape trace) are left to
    PyTorch's meta kernel, which guards on them."""
    if _static(mask, self):
        infer_size(mask.shape, self.shape)


def _static(*tensors: torch.Tensor) -> bool:
    """Whether every size is an int: symbolic sizes (a dynamic-shape trace) are left to PyTorch's meta
    kernel, which guards on them."""
    return all(isinstance(size, int) for tensor in tensors for size in tensor.shape)


def _soft_margin_loss(self: torch.Tensor, target: torch.Tensor, *_: Any, **__: Any) -> None:
    """``soft_margin_loss_out`` (Loss.cpp) computes ``neg_out(output, input).mul_(target)``: the
    in-place multiply's broadcast error, or its refusal to grow ``output`` past the input's shape
    (PyTorch's decomposition broadcast the loss to the target's shape instead)."""
    if not _static(self, target):
        return
    shape = list(infer_size(self.shape, target.shape))
    torch._check(
        shape == list(self.shape),
        lambda: f"output with shape {list(self.shape)} doesn't match the broadcast shape {shape}",
    )


def _multi_margin_loss(
    self: torch.Tensor,
    target: torch.Tensor,
    p: float = 1,
    margin: float = 1,
    weight: torch.Tensor | None = None,
    *_: Any,
    **__: Any,
) -> None:
    """``multi_margin_loss_shape_check`` (LossMulti.h, CPU and CUDA) in torch 2.13's words."""
    dims = self.dim()
    torch._check(
        (dims == 2 and self.size(1) != 0) or (dims == 1 and self.size(0) != 0) or dims == 0,
        lambda: f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(self.shape)}",
    )
    frames = self.size(0) if dims == 2 else 1
    classes = self.size(-1) if dims else 1
    torch._check(
        target.dim() <= 1 and target.numel() == frames,
        lambda: (
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples (batch "
            f"size). Expected target size [{frames}], but got {list(target.shape)}. Input has shape "
            f"{list(self.shape)}."
        ),
    )
    torch._check(
        weight is None or (weight.dim() <= 1 and weight.numel() == classes),
        lambda: f"inconsistent weight size, expected {classes} but got {list(weight.shape)}",
    )
    # The kernels read the target as int64 (data_ptr<int64_t>'s check); PyTorch's decomposition
    # gathered with it ("gather(): Expected dtype int32/int64 for index").
    torch._check(
        target.dtype == torch.int64,
        lambda: f"expected scalar type Long but found {scalar_type_name(target.dtype)}",
    )


def _cat(tensors: list[torch.Tensor], dim: int = 0, **_: Any) -> None:
    """``cat``'s structured meta (TensorShape.cpp): ``dim`` wrapped by the first tensor that is not a
    1-D empty one (``legacy_cat_wrap_dim``), then ``check_cat_shape_except_dim`` of each such tensor
    against that first one. PyTorch's meta compared with another tensor, so its message named the
    sizes in another order or another tensor's position."""
    if not _static(*tensors):  # data-dependent sizes (a while_loop's backward) would guard on them
        return
    kept = [(position, t) for position, t in enumerate(tensors) if not (t.dim() == 1 and t.shape[0] == 0)]
    if not kept or any(t.dim() == 0 for t in tensors):
        return  # no tensor to check, or check_cat_no_zero_dim's error (eager/rules.py) comes first
    first = kept[0][1]
    torch._check_index(
        -first.dim() <= dim < first.dim(),  # legacy_cat_wrap_dim
        lambda: (
            f"Dimension out of range (expected to be in range of [{-first.dim()}, {first.dim() - 1}], but got {dim})"
        ),
    )
    dim %= first.dim()
    for position, tensor in kept:
        torch._check(
            tensor.dim() == first.dim(),
            lambda tensor=tensor: f"Tensors must have same number of dimensions: got {first.dim()} and {tensor.dim()}",
        )
        for axis in range(first.dim()):
            torch._check(
                axis == dim or tensor.shape[axis] == first.shape[axis],
                lambda tensor=tensor, position=position, axis=axis: (
                    f"Sizes of tensors must match except in dimension {dim}. Expected size {first.shape[axis]} but "
                    f"got size {tensor.shape[axis]} for tensor number {position} in the list."
                ),
            )


def check_index_count(dims: int, count: int) -> None:
    """``index``'s structured meta and ``_index_put_impl_`` (TensorAdvancedIndexing.cpp): ``count``
    indices (tensors, masks or None) for a tensor of ``dims`` dimensions, before masks are expanded.

    Raises:
        IndexError: "too many indices for tensor of dimension 2 (got 3)".
    """
    if count > dims:
        raise IndexError(f"too many indices for tensor of dimension {dims} (got {count})")


def _index_count(self: torch.Tensor, indices: list[torch.Tensor | None], *_: Any, **__: Any) -> None:
    check_index_count(self.dim(), len(indices))


def _masked_index_count(
    self: torch.Tensor, mask: torch.Tensor, indices: list[torch.Tensor | None], *_: Any, **__: Any
) -> None:
    """``_unsafe_masked_index(_put_accumulate)`` index ``self`` with ``indices`` (TensorAdvancedIndexing.cpp)."""
    _index_count(self, indices)


def _div_rounding_mode(self: torch.Tensor, other: Any, *_: Any, rounding_mode: str | None = None, **__: Any) -> None:
    """``div``'s rounding mode check (BinaryOps.cpp), a RuntimeError; PyTorch's reference raises ValueError."""
    torch._check(
        rounding_mode in (None, "trunc", "floor"),
        lambda: f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'",
    )


def check_distinct_dims(rank: int, dims: list[int] | tuple[int, ...]) -> None:
    """``dim_list_to_bitset``'s check (WrapDimUtilsMulti.h) of ``dims`` of a tensor of ``rank``
    dimensions: the first repeated dimension, wrapped.

    Raises:
        RuntimeError: "dim 0 appears multiple times in the list of dims".
    """
    seen: set[int] = set()
    for dim in dims:
        wrapped = dim % max(rank, 1)
        if wrapped in seen:
            raise RuntimeError(f"dim {wrapped} appears multiple times in the list of dims")
        seen.add(wrapped)


def _linalg_vector_norm(self: torch.Tensor, ord: Any = 2, dim: Any = None, *_: Any, **__: Any) -> None:
    """``make_reduction``'s repeated-dim check (ReduceOpsUtils.h), which PyTorch's meta kernel lacks:
    ``vector_norm(ones(1, 3), dim=(0, -2))`` computed."""
    check_distinct_dims(self.dim(), [dim] if isinstance(dim, int) else list(dim or ()))


def _as_strided_copy(self: torch.Tensor, size: list[int], stride: list[int], *_: Any, **__: Any) -> None:
    """``as_strided``'s storage bound (``computeStorageNbytes`` in c10, which as_strided_copy's CPU and
    CUDA kernels reach through ``as_strided``): a negative size overflows it, unless a size is 0.
    PyTorch's meta kernel said "numel: integer multiplication overflow". Negative strides are the
    meta kernel's to refuse, first, in ATen's words."""
    if any(s < 0 for s in stride) or not all(isinstance(s, int) for s in size):
        return
    if any(s < 0 for s in size) and 0 not in size:
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")


def _adaptive_avg_pool3d(self: torch.Tensor, output_size: list[int], **_: Any) -> None:
    """``adaptive_avg_pool3d_out_cuda_template``'s checks (cuda/AdaptiveAveragePooling3d.cu), in its
    order and words: the non-batch sizes before the rank. The CPU's words drop "_cuda"; PyTorch's
    meta kernel checked the rank only, without the name."""
    for dim in range(1, self.dim()):
        torch._check(
            self.shape[dim] > 0,
            lambda dim=dim: (
                "adaptive_avg_pool3d_cuda(): Expected input to have non-zero size for non-batch dimensions, but "
                f"input has sizes {list(self.shape)} with dimension {dim} being empty"
            ),
        )
    torch._check(
        self.dim() in (4, 5),
        lambda: f"adaptive_avg_pool3d_cuda(): Expected 4D or 5D tensor, but got {list(self.shape)}",
    )


def _batch_norm_parameters(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    *_: Any,
    **__: Any,
) -> None:
    """``_batch_norm_impl_index``'s element counts (Normalization.cpp: running statistics, then
    weight and bias), which F.batch_norm checks and the ``native_batch_norm`` family does not: the
    CPU's kernel then reads the first C elements, past the end of a shorter parameter; neuron
    refuses both in these words (PyTorch's meta kernel raised a broadcast error). The CPU's kernel
    and CUDA's (``packed_accessor_or_dummy``) read the running statistics through 1-D accessors,
    which refuse another rank; PyTorch's meta kernel broadcast them."""
    if not _static(input):
        return
    if input.dim() < 2:  # the kernels' input.size(1), as maybe_wrap_dim words it (CPU and CUDA)
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    channels = input.shape[1]
    named = (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias))
    for name, parameter in named:
        if parameter is not None and parameter.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {parameter.numel()}")
    for stat in (running_mean, running_var):
        if stat is not None and stat.dim() != 1:
            raise RuntimeError(f"TensorAccessor expected 1 dims but tensor has {stat.dim()}")


def _batch_norm_parameters_without_stats(
    input: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *_: Any, **__: Any
) -> None:
    """:func:`_batch_norm_parameters` of ``_native_batch_norm_legit.no_stats`` (no running statistics)."""
    _batch_norm_parameters(input, weight, bias, None, None)


def _boolean_out(name: str) -> Callable[..., None]:
    """isposinf/isneginf's structured meta (ATen's UnaryOps.cpp): an ``out=`` must be bool."""

    def check(self: torch.Tensor, *_: Any, out: torch.Tensor | None = None, **__: Any) -> None:
        if out is not None and out.dtype != torch.bool:
            raise RuntimeError(f"{name} does not support non-boolean outputs.")

    return check


def _overloads(*packets: torch._ops.OpOverloadPacket) -> list[OpOverload]:
    return [getattr(packet, name) for packet in packets for name in packet.overloads()]


_BY_PACKET: dict[torch._ops.OpOverloadPacket, Callable[..., None]] = {
    aten.im2col: _im2col,
    aten.col2im: _col2im,
    aten.pixel_shuffle: _pixel_shuffle,
    aten.pixel_unshuffle: _pixel_unshuffle,
    aten.native_layer_norm: _native_layer_norm,
    aten.nll_loss_forward: _nll_loss_forward,
    aten.nll_loss2d_forward: _nll_loss2d_forward,
    aten.mm: _mm,
    aten.addmm: _addmm,
    aten.addmv: _addmv,
    aten.mv: _mv,
    aten.stack: _stack,
    aten.cat: _cat,
    aten.soft_margin_loss: _soft_margin_loss,
    aten.multi_margin_loss: _multi_margin_loss,
    aten.slice_scatter: _slice_scatter,
    aten.select_scatter: _select_scatter,
    aten.diagonal_scatter: _diagonal_scatter,
    aten._softmax_backward_data: _softmax_backward_data,
    aten.native_group_norm: _native_group_norm,
    aten.scatter: _scatter,
    aten.scatter_: _scatter,
    aten.scatter_add: _scatter,
    aten.scatter_add_: _scatter,
    aten.scatter_reduce: _scatter,
    aten.scatter_reduce_: _scatter,
    aten.linalg_cross: _linalg_cross,
    aten.ormqr: _ormqr,
    aten.addr: _addr,
    aten.segment_reduce: _segment_reduce,
    aten.max_pool2d_with_indices: _max_pool(2),
    aten.max_pool3d_with_indices: _max_pool(3),
    aten.avg_pool2d: _avg_pool(2),
    aten.avg_pool3d: _avg_pool(3),
    aten.renorm: _renorm,
    aten.renorm_: _renorm,
    aten._adaptive_avg_pool3d: _adaptive_avg_pool3d,
    aten.as_strided_copy: _as_strided_copy,
    aten.div: _div_rounding_mode,
    aten.div_: _div_rounding_mode,
    aten.linalg_vector_norm: _linalg_vector_norm,
    aten.masked_fill: _mask_broadcast,
    aten.masked_scatter: _mask_broadcast,
    aten.isposinf: _boolean_out("isposinf"),
    aten.isneginf: _boolean_out("isneginf"),
}

#: Overloads of packets that hold other schemas too (``aten.index.str`` is ``list.index``).
_BY_OVERLOAD: dict[OpOverload, Callable[..., None]] = {
    aten.index.Tensor: _index_count,
    aten.index.Tensor_out: _index_count,
    aten._unsafe_index.Tensor: _index_count,
    aten.index_put.default: _index_count,
    aten.index_put.out: _index_count,
    aten.index_put_.default: _index_count,
    aten._unsafe_index_put.default: _index_count,
    aten._unsafe_masked_index.default: _masked_index_count,
    aten._unsafe_masked_index_put_accumulate.default: _masked_index_count,
    aten.native_batch_norm.default: _batch_norm_parameters,
    aten.native_batch_norm.out: _batch_norm_parameters,
    aten._native_batch_norm_legit.default: _batch_norm_parameters,
    aten._native_batch_norm_legit.no_stats: _batch_norm_parameters_without_stats,
    aten._native_batch_norm_legit.out: _batch_norm_parameters,
    aten._native_batch_norm_legit_functional.default: _batch_norm_parameters,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_parameters,
    aten._batch_norm_with_update.default: _batch_norm_parameters,
    aten._batch_norm_with_update_functional.default: _batch_norm_parameters,
    aten._batch_norm_no_update.default: _batch_norm_parameters,
}

#: Each overload (functional, out=, in-place where the packet has it) and ATen's checks of it.
CHECKS: dict[OpOverload, Callable[..., None]] = {
    **{op: check for packet, check in _BY_PACKET.items() for op in _overloads(packet)},
    **_BY_OVERLOAD,
}
