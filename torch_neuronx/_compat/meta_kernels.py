"""Meta kernels PyTorch lacks or gets wrong: fused RNN cells, margin-loss and CTC backwards, histogram(dd),
the fused SGD steps, the tensor-lr fused Adam(W) steps, the foreach addcmul/addcdiv with packed
``Tensor scalars`` (whose meta kernel refuses every call under FakeTensorMode), the binomial,
Dirichlet and gamma-gradient samplers and the Dirichlet gradient, fractional_max_pool3d_backward, the result dtype of
``torch.normal`` with tensor arguments and of huber_loss and soft_margin_loss with a target of
another dtype, index_add of an integer tensor with a float ``alpha``, the argument checks of
every upsampling op and its backward, of grid_sampler_2d, fractional_max_pool2d, convolution and
linalg_vector_norm (ATen's structured meta functions, which PyTorch's Python kernels replace with
decompositions that check less or word it otherwise), and the backward of losses and group_norm on
empty inputs (their decompositions divide by the element count).

The eager layer describes every call with PyTorch's meta kernel first (shapes, dtypes, argument
errors); an op without one falls back to the CPU. nn.LSTM, nn.GRU and their cells call the fused
cell ops on every non-CPU device. PyTorch has no meta kernel for the GRU cell, and its LSTM cell meta
kernel (``torch/_meta_registrations.py``) fails with ``AttributeError`` when the cell has no bias
(it reads ``.device`` of each absent bias). The kernels here give the shapes of CUDA's kernels
(``aten/src/ATen/native/cuda/RNN.cu``) and check sizes as CUDA's ``checkSizes`` does.
``multi_margin_loss_backward`` and ``multilabel_margin_loss_backward`` have no meta kernel either;
their gradient has the input's shape and dtype. The meta kernels of the margin losses themselves
(PyTorch's decompositions) give a single (C,) or 0-dim sample's unreduced loss shape (1,), where the
CPU and CUDA kernels give () (``aten/src/ATen/native/cuda/Loss.cu``: ``resize_output(output, {})``
when the target has no batch dimension); the kernels here give ().
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree
from torch._meta_registrations import meta_conv
from torch._prims_common import canonicalize_dims, suggest_memory_format

from torch_neuronx._compat import aten_checks
from torch_neuronx._compat.torch_internals import (
    OpOverload,
    check_before_fake_impl,
    decomposition_table,
    infer_size,
    register_fake_tensor_meta,
)

__all__ = ["GRU_WORKSPACE_MULTIPLIER", "register"]

aten = torch.ops.aten

#: Columns of the GRU workspace per hidden unit: r, z, n, hx and the hidden new-gate pre-activation.
GRU_WORKSPACE_MULTIPLIER = 5

_libraries: list[torch.library.Library] = []


def _check_cell_sizes(
    name: str,
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    input_bias: torch.Tensor | None,
    hidden_bias: torch.Tensor | None,
    factor: int,
    prev_hidden: torch.Tensor,
) -> None:
    """Gates [batch, factor * hidden] of equal shapes, biases [factor * hidden] (both or neither),
    previous hidden or cell state [batch, hidden]."""
    torch._check(
        input_gates.dim() == 2 and input_gates.shape == hidden_gates.shape,
        lambda: (
            f"{name}: input_gates {tuple(input_gates.shape)} and hidden_gates {tuple(hidden_gates.shape)} "
            "must be 2-D tensors of the same shape"
        ),
    )
    gates = input_gates.size(1)
    torch._check(
        (input_bias is None) == (hidden_bias is None),
        lambda: f"{name}: input_bias and hidden_bias must be both given or both None",
    )
    if input_bias is not None:
        torch._check(
            input_bias.shape == (gates,) and hidden_bias.shape == (gates,),
            lambda: (
                f"{name}: biases {tuple(input_bias.shape)} and {tuple(hidden_bias.shape)} must have shape ({gates},)"
            ),
        )
    torch._check(
        gates % factor == 0 and prev_hidden.shape == (input_gates.size(0), gates // factor),
        lambda: (
            f"{name}: the previous state {tuple(prev_hidden.shape)} must have shape "
            f"({input_gates.size(0)}, {gates // factor}) for gates of shape {tuple(input_gates.shape)}"
        ),
    )


def _thnn_fused_lstm_cell(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    cx: torch.Tensor,
    input_bias: torch.Tensor | None = None,
    hidden_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """aten::_thnn_fused_lstm_cell: (hy like cx, cy like cx, workspace like input_gates)."""
    _check_cell_sizes("_thnn_fused_lstm_cell", input_gates, hidden_gates, input_bias, hidden_bias, 4, cx)
    workspace = torch.empty_like(input_gates, memory_format=torch.contiguous_format)
    hy = torch.empty_like(cx, memory_format=torch.contiguous_format)
    cy = torch.empty_like(cx, memory_format=torch.contiguous_format)
    return hy, cy, workspace


def _thnn_fused_gru_cell(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    hx: torch.Tensor,
    input_bias: torch.Tensor | None = None,
    hidden_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::_thnn_fused_gru_cell: (hy like hx, workspace of [batch, 5 * hidden])."""
    _check_cell_sizes("_thnn_fused_gru_cell", input_gates, hidden_gates, input_bias, hidden_bias, 3, hx)
    hy = torch.empty_like(hx, memory_format=torch.contiguous_format)
    workspace = hx.new_empty((hx.size(0), hx.size(1) * GRU_WORKSPACE_MULTIPLIER))
    return hy, workspace


def _thnn_fused_gru_cell_backward(
    grad_hy: torch.Tensor, workspace: torch.Tensor, has_bias: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """aten::_thnn_fused_gru_cell_backward: gradients of both gate inputs [batch, 3 * hidden], of hx,
    and of both biases [3 * hidden] (undefined without bias)."""
    torch._check(
        grad_hy.dim() == 2 and workspace.shape == (grad_hy.size(0), grad_hy.size(1) * GRU_WORKSPACE_MULTIPLIER),
        lambda: (
            f"_thnn_fused_gru_cell_backward: workspace {tuple(workspace.shape)} does not match grad_hy "
            f"{tuple(grad_hy.shape)}; expected [batch, {GRU_WORKSPACE_MULTIPLIER} * hidden] and [batch, hidden]"
        ),
    )
    gates = (workspace.size(0), grad_hy.size(1) * 3)
    grad_input_gates = workspace.new_empty(gates)
    grad_hidden_gates = workspace.new_empty(gates)
    grad_hx = torch.empty_like(grad_hy, memory_format=torch.contiguous_format)
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx, None, None
    return grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0), grad_hidden_gates.sum(0)


def _single_sample_loss(output: torch.Tensor, self: torch.Tensor, reduction: int) -> torch.Tensor:
    """The unreduced loss of a single sample (``self`` of at most one dimension) has shape ()."""
    return output.reshape(()) if self.dim() <= 1 and reduction == 0 else output


_MULTI_MARGIN_LOSS_DECOMPOSITION = decomposition_table()[aten.multi_margin_loss.default]


def _multi_margin_loss(
    self: torch.Tensor,
    target: torch.Tensor,
    p: float = 1,
    margin: float = 1,
    weight: torch.Tensor | None = None,
    reduction: int = 1,
) -> torch.Tensor:
    """aten::multi_margin_loss: PyTorch's decomposition, with CUDA's result shape (ATen's argument
    checks run first: ``aten_checks``)."""
    loss = _MULTI_MARGIN_LOSS_DECOMPOSITION(self, target, p, margin, weight, reduction)
    return _single_sample_loss(loss, self, reduction)


def _multilabel_margin_loss_forward(
    self: torch.Tensor, target: torch.Tensor, reduction: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::multilabel_margin_loss_forward: PyTorch's decomposition, with CUDA's result shape."""
    output, is_target = decomposition_table()[aten.multilabel_margin_loss_forward.default](self, target, reduction)
    return _single_sample_loss(output, self, reduction), is_target


def _margin_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, *args: object) -> torch.Tensor:
    """aten::multi_margin_loss_backward and aten::multilabel_margin_loss_backward: the input's gradient."""
    return torch.empty_like(self, memory_format=torch.contiguous_format)


def _nll_loss_forward(
    self: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, reduction: int, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::nll_loss_forward's (output, total_weight) as ATen's meta shapes them: (N,) unreduced for a
    2-D input, else (). PyTorch's decomposition refused a 1-D input with a one-element 1-D target
    (torch 2.13's ATen takes it) and gathered with a uint8 target, which ATen takes too. ATen's
    argument checks run first (``aten_checks``)."""
    output = self.new_empty((self.shape[0],) if reduction == 0 and self.dim() == 2 else ())
    return output, self.new_empty(())


_NLL_LOSS_BACKWARD_DECOMPOSITION = decomposition_table()[aten.nll_loss_backward.default]


def _nll_loss_backward(
    grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor, *arguments: object
) -> torch.Tensor:
    """aten::nll_loss_backward: PyTorch's decomposition (its checks are ATen's), given a uint8 target
    as int64: it scatters with the target, which refuses uint8, where ATen takes it."""
    target = target.long() if target.dtype == torch.uint8 else target
    return _NLL_LOSS_BACKWARD_DECOMPOSITION(grad_output, self, target, *arguments)


def _input_dtype_loss(op: torch._ops.OpOverload):
    """The meta kernel of ``huber_loss`` and ``soft_margin_loss``: PyTorch's decomposition (shape and
    checks) with a result of the input's dtype, as ATen's kernels (Loss.cpp, device-generic) write
    into an output made from ``input``. The decomposition promotes input and target: a bfloat16
    input with a float32 target gave float32."""

    def kernel(self: torch.Tensor, target: torch.Tensor, *args: object) -> torch.Tensor:
        return decomposition_table()[op](self, target, *args).to(self.dtype)

    return kernel


def _geqrf(self: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::geqrf (PyTorch has no meta kernel): the reflectors in the input's shape, column-major as
    LAPACK writes them, and tau [..., min(m, n)]."""
    torch._check(self.dim() >= 2, lambda: "torch.geqrf: input must have at least 2 dimensions.")
    torch._check_not_implemented(
        self.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
        lambda: f"geqrf: not implemented for '{self.dtype}'",
    )
    *batch, m, n = self.shape
    reflectors = self.new_empty((*batch, n, m)).mT
    return reflectors, self.new_empty((*batch, min(m, n)))


def _geqrf_out(self: torch.Tensor, *, a: torch.Tensor, tau: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::geqrf.a (``torch.geqrf(A, out=(a, tau))``): ``a`` and ``tau`` resized to geqrf's results,
    in their own layout (ATen copies LAPACK's column-major result into them)."""
    reflectors, factors = _geqrf(self)
    return a.resize_(reflectors.shape), tau.resize_(factors.shape)


def _check_bin_edges(edges: torch.Tensor, dim: int) -> None:
    """``histogramdd_check_inputs``' checks of one dimension's bin edges (HistogramKernel.cpp)."""
    torch._check(
        edges.dim() == 1,
        lambda: (
            f"torch.histogramdd: bins tensor should have one dimension, but got {edges.dim()} dimensions in the "
            f"bins tensor for dimension {dim}"
        ),
    )
    torch._check(
        edges.numel() > 0,
        lambda: (
            f"torch.histogramdd: bins tensor should have at least 1 element, but got {edges.numel()} elements in "
            f"the bins tensor for dimension {dim}"
        ),
    )


def _histogram_bin_ct(
    self: torch.Tensor, bins: int = 100, *, range: object = None, weight: object = None, density: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::histogram.bin_ct (PyTorch has no meta kernel): hist [bins] and bin_edges [bins + 1]."""
    torch._check(bins > 0, lambda: f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    return self.new_empty((bins,)), self.new_empty((bins + 1,))


def _histogram_bins_tensor(
    self: torch.Tensor, bins: torch.Tensor, *, weight: object = None, density: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::histogram.bins_tensor: hist [len(bins) - 1] and a copy of the bin edges."""
    _check_bin_edges(bins, 0)
    return self.new_empty((bins.numel() - 1,)), bins.new_empty(bins.shape)


def _histogramdd_bin_edges(self: torch.Tensor, bins: list[int], **kwargs: object) -> list[torch.Tensor]:
    """aten::_histogramdd_bin_edges: one edge tensor [bins[d] + 1] per dimension."""
    torch._check(self.dim() >= 2, lambda: "torch.histogramdd: input tensor should have at least 2 dimensions")
    torch._check(
        len(bins) == self.size(-1),
        lambda: "histogramdd: The size of bins must be equal to the innermost dimension of the input.",
    )
    # ATen makes each dimension's edges (linspace of bins + 1 steps), checks them, then the counts.
    torch._check(all(b + 1 >= 0 for b in bins), lambda: "number of steps must be non-negative")
    edges = [self.new_empty((b + 1,)) for b in bins]
    for dim, edge in enumerate(edges):
        _check_bin_edges(edge, dim)
    for dim, b in enumerate(bins):
        torch._check(
            b > 0, lambda b=b, dim=dim: f"torch.histogram(): bins must be > 0, but got {b} for dimension {dim}"
        )
    return edges


def _histogramdd_from_bin_cts(self: torch.Tensor, bins: list[int], **kwargs: object) -> torch.Tensor:
    """aten::_histogramdd_from_bin_cts: the histogram, of shape ``bins``."""
    _histogramdd_bin_edges(self, bins)
    return self.new_empty(tuple(bins))


def _histogramdd_from_bin_tensors(self: torch.Tensor, bins: list[torch.Tensor], **kwargs: object) -> torch.Tensor:
    """aten::_histogramdd_from_bin_tensors: the histogram, one dimension per edge tensor."""
    torch._check(self.dim() >= 2, lambda: "torch.histogramdd: input tensor should have at least 2 dimensions")
    torch._check(
        len(bins) == self.size(-1),
        lambda: (
            f"torch.histogramdd: expected {self.size(-1)} sequences of bin edges for a {self.size(-1)}-dimensional "
            f"histogram but got {len(bins)}"
        ),
    )
    return self.new_empty(tuple(b.numel() - 1 for b in bins))


def _ctc_loss_backward(grad: torch.Tensor, log_probs: torch.Tensor, *args: object) -> torch.Tensor:
    """aten::_ctc_loss_backward (both overloads; PyTorch has no meta kernel): the gradient of
    log_probs, in its shape and dtype."""
    return torch.empty_like(log_probs, memory_format=torch.contiguous_format)


def _with_float_lr(overload: torch._ops.OpOverload):
    """The meta kernel of a fused optimizer step's ``tensor_lr`` overload (``Adam(lr=tensor,
    fused=True)``): PyTorch has them only for the float-lr overloads, and no result depends on lr."""

    def kernel(*args, lr, **kwargs):
        return overload(*args, lr=1.0, **kwargs)

    return kernel


def _fused_sgd(self, grads, momentum_buffer_list, **kwargs):
    """``_fused_sgd`` (``SGD(fused=True)``), which has no meta kernel: new parameters, gradients and
    momentum buffers, shaped as the given ones."""
    return tuple([torch.empty_like(t) for t in tensors] for tensors in (self, grads, momentum_buffer_list))


def _fused_sgd_(self, grads, momentum_buffer_list, **kwargs):
    """``_fused_sgd_``: updates its lists in place."""


def _check_normal_std(std: torch.Tensor) -> None:
    torch._check(not std.is_complex(), lambda: "normal expects standard deviation to be non-complex")


def _normal_tensor_float(mean: torch.Tensor, std: float = 1.0, *, generator: object = None) -> torch.Tensor:
    """``torch.normal(mean: Tensor, std: float)`` as ATen's ``normal_impl`` (DistributionTemplates.h,
    the same on CPU and CUDA): a result of ``mean``'s dtype. PyTorch's Python meta kernel (torch/_refs)
    promotes ``mean`` with ``std`` instead (float16 ``mean``: a float32 result)."""
    torch._check(std >= 0.0, lambda: f"normal expects std >= 0.0, but found std {aten_checks.stream_text(std)}")
    return torch.empty_like(mean, memory_format=torch.contiguous_format)


def _normal_float_tensor(mean: float, std: torch.Tensor, *, generator: object = None) -> torch.Tensor:
    """``torch.normal(mean: float, std: Tensor)`` as ATen's: a result of ``std``'s dtype; a complex
    ``std`` raises ATen's error (the Python meta kernel computes)."""
    _check_normal_std(std)
    return torch.empty_like(std, memory_format=torch.contiguous_format)


def _normal_tensor_tensor(mean: torch.Tensor, std: torch.Tensor, *, generator: object = None) -> torch.Tensor:
    """``torch.normal(mean: Tensor, std: Tensor)`` as ATen's: a result of ``mean``'s dtype in the
    broadcast shape (the Python meta kernel promotes the two: bfloat16 ``mean`` with float16 ``std``
    gave float32, complex32 ``mean`` complex64); a complex ``std`` raises ATen's error."""
    _check_normal_std(std)
    shape = torch.broadcast_shapes(mean.shape, std.shape)
    return torch.empty(shape, dtype=mean.dtype, device=mean.device)


#: The names ATen's messages give the spatial sizes of 1-, 2- and 3-d upsampling (UpSample.h).
_SPATIAL_NAMES = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}


def _upsample_common_check(input_size: list[int], output_size: list[int], spatial_dims: int) -> list[int]:
    """ATen's ``upsample_{1,2,3}d_common_check`` (UpSample.h, shared by the CPU and CUDA): the
    argument lengths, then every input and output spatial size positive; returns the output's
    full size (N, C, *output_size). PyTorch's Python checks word the error differently, and its
    decompositions of the linear and cubic modes divide by a zero output size
    (``ZeroDivisionError``) or compute from an empty input instead of raising."""
    torch._check(
        len(output_size) == spatial_dims,
        lambda: f"It is expected output_size equals to {spatial_dims}, but got size {len(output_size)}",
    )
    torch._check(
        len(input_size) == spatial_dims + 2,
        lambda: f"It is expected input_size equals to {spatial_dims + 2}, but got size {len(input_size)}",
    )
    names = _SPATIAL_NAMES[spatial_dims]

    def sizes(values: list[int]) -> str:
        return ", ".join(f"{name}: {value}" for name, value in zip(names, values, strict=True))

    between = ") and output (" if spatial_dims == 1 else ") output ("
    torch._check(
        all(size > 0 for size in (*input_size[2:], *output_size)),
        lambda: (
            "Input and output sizes should be greater than 0, but got input "
            f"({sizes(list(input_size[2:]))}{between}{sizes(list(output_size))})"
        ),
    )
    return [input_size[0], input_size[1], *output_size]


def _upsample(spatial_dims: int):
    """The meta kernel of a forward upsampling op (nearest, nearest-exact, linear, bilinear,
    bicubic, trilinear, antialiased): ATen's ``TORCH_META_FUNC`` checks in ATen's order, the common
    check then an empty input allowed only when its batch alone is empty, and a result in the
    input's suggested memory format. (PyTorch's Python meta kernel of the nearest modes also passed
    ``torch._check`` an int, raising ``TypeError: cond must be a bool`` for every empty batch.)"""

    def kernel(input: torch.Tensor, output_size: list[int], *arguments: object) -> torch.Tensor:
        shape = _upsample_common_check(list(input.shape), list(output_size), spatial_dims)
        torch._check(
            input.numel() != 0 or all(size != 0 for size in input.shape[1:]),
            lambda: (
                f"Non-empty {spatial_dims + 2}D data tensor expected but got a tensor with sizes {list(input.shape)}"
            ),
        )
        return input.new_empty(shape).to(memory_format=suggest_memory_format(input))

    return kernel


def _upsample_backward(spatial_dims: int, *, contiguous: bool):
    """The meta kernel of an upsampling op's backward: ATen's checks of ``input_size`` against
    ``output_size`` and of ``grad_output`` against the output's full size (1-d ops word the latter
    as ``check_dim_size``), then the input gradient, contiguous or in ``grad_output``'s suggested
    memory format as the op's ``TORCH_META_FUNC`` sets it."""

    def kernel(
        grad_output: torch.Tensor, output_size: list[int], input_size: list[int], *arguments: object
    ) -> torch.Tensor:
        full_output_size = _upsample_common_check(list(input_size), list(output_size), spatial_dims)
        rank = spatial_dims + 2
        if spatial_dims == 1:
            for dim, size in enumerate(full_output_size):
                torch._check(
                    grad_output.dim() == rank and grad_output.size(dim) == size,
                    lambda dim=dim, size=size: (
                        f"Expected a tensor of dimension {rank} and tensor.size[{dim}] == {size} but got: "
                        f"dimension {grad_output.dim()} and tensor.size[{dim}] = {grad_output.size(dim)}"
                    ),
                )
        else:
            torch._check(
                grad_output.dim() == rank,
                lambda: (
                    f"Expected grad_output to be a tensor of dimension {rank} but got: dimension {grad_output.dim()}"
                ),
            )
            for dim, size in enumerate(full_output_size):
                torch._check(
                    grad_output.size(dim) == size,
                    lambda dim=dim, size=size: (
                        f"Expected grad_output to have the same shape as output; output.size({dim}) = {size} "
                        f"but got grad_output.size({dim}) = {grad_output.size(dim)}"
                    ),
                )
        result = grad_output.new_empty(list(input_size))
        return result if contiguous else result.to(memory_format=suggest_memory_format(grad_output))

    return kernel


#: Every upsampling op: (name, spatial dimensions, whether its backward's result is contiguous
#: rather than in grad_output's memory format: ATen's TORCH_META_FUNCs).
_UPSAMPLING = (
    ("upsample_nearest1d", 1, True),
    ("_upsample_nearest_exact1d", 1, True),
    ("upsample_linear1d", 1, True),
    ("upsample_nearest2d", 2, False),
    ("_upsample_nearest_exact2d", 2, False),
    ("upsample_bilinear2d", 2, False),
    ("_upsample_bilinear2d_aa", 2, False),
    ("upsample_bicubic2d", 2, True),
    ("_upsample_bicubic2d_aa", 2, True),
    ("_upsample_lanczos2d_aa", 2, True),
    ("upsample_nearest3d", 3, True),
    ("_upsample_nearest_exact3d", 3, True),
    ("upsample_trilinear3d", 3, False),
)
_UPSAMPLING_KERNELS = {
    **{getattr(aten, name).default: _upsample(dims) for name, dims, _ in _UPSAMPLING},
    **{
        getattr(aten, f"{name}_backward").default: _upsample_backward(dims, contiguous=contiguous)
        for name, dims, contiguous in _UPSAMPLING
    },
}


def _check_not_empty(input: torch.Tensor, dims: range, message: Callable[[int], str]) -> None:
    """ATen's loop of ``TORCH_CHECK(input.size(i) > 0, ...)`` over ``dims``: the first empty one
    raises RuntimeError with ``message(dim)``."""
    for dim in dims:
        torch._check(input.shape[dim] > 0, lambda dim=dim: message(dim))


def _fractional_max_pool2d(
    input: torch.Tensor, kernel_size: list[int], output_size: list[int], random_samples: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``fractional_max_pool2d``'s (values, int64 indices) after ATen's structured meta checks
    (FractionalMaxPool2d.cpp), in its words and order; the random samples are checked by the
    lowering, as by the CPU kernel, after these. PyTorch's meta kernel words each check otherwise,
    checks the samples first, and refused an unbatched input with no channels (its first
    dimension), which ATen leaves unchecked (the CPU returns an empty result)."""
    torch._check(
        len(kernel_size) == 2,
        lambda: "fractional_max_pool2d: kernel_size must either be a single Int or tuple of Ints",
    )
    torch._check(
        len(output_size) == 2,
        lambda: "fractional_max_pool2d: output_size must either be a single Int or tuple of Ints",
    )
    torch._check(
        input.dim() in (3, 4),
        lambda: f"fractional_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}",
    )
    _check_not_empty(
        input,
        range(1, input.dim()),
        lambda dim: (
            "fractional_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, but "
            f"got{list(input.shape)} with dimension {dim} being empty."
        ),
    )
    for name, pool, out, size in zip(("height", "width"), kernel_size, output_size, input.shape[-2:], strict=True):
        torch._check(
            out + pool - 1 <= size,
            lambda name=name, pool=pool, size=size: (
                f"fractional_max_pool2d(): pool {name} {pool} too large relative to input {name} {size}"
            ),
        )
    shape = (*input.shape[:-2], *output_size)
    return input.new_empty(shape), input.new_empty(shape, dtype=torch.int64)


def _expand_convolution_argument(values: list[int], name: str, dims: int) -> list[int]:
    """ATen's ``expand_param_if_needed`` (ParamUtils.h): one value for every spatial dimension."""
    values = list(values)
    if len(values) == 1:
        return values * dims
    torch._check(
        len(values) == dims,
        lambda: (
            f"expected {name} to be a single integer value or a list of {dims} values to match the convolution "
            f"dimensions, but got {name}={values}"
        ),
    )
    return values


def _convolution(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
    *flags: bool,
) -> torch.Tensor:
    """``convolution`` and ``_convolution``: ATen's argument checks (Convolution.cpp ``_convolution``,
    ``check_shape_forward`` and ``_select_conv_backend``'s empty-input rule, shared by the CPU and
    CUDA), in their words and order, then PyTorch's meta kernel for the result. PyTorch's meta checks
    only the channels ("Invalid channel dimensions"): a negative padding or output_padding computed,
    a zero stride divided by zero, a bias of the wrong size or input of the wrong rank reached the
    lowering and failed in JAX's words."""
    sizes = list(weight.shape)
    dims = weight.dim() - 2
    torch._check(dims > 0, lambda: "weight should have at least three dimensions")
    torch._check(groups > 0, lambda: "non-positive groups is not supported")
    stride, padding, dilation, output_padding = (
        _expand_convolution_argument(values, name, dims)
        for values, name in (
            (stride, "stride"),
            (padding, "padding"),
            (dilation, "dilation"),
            (output_padding, "output_padding"),
        )
    )
    torch._check(all(p >= 0 for p in padding), lambda: "negative padding is not supported")
    torch._check(all(p >= 0 for p in output_padding), lambda: "negative output_padding is not supported")
    torch._check(all(s > 0 for s in stride), lambda: "non-positive stride is not supported")
    torch._check(all(d >= 0 for d in dilation), lambda: "dilation should be greater than zero")
    torch._check(
        weight.dim() == input.dim(),
        lambda: (
            f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight {sizes}, but got "
            f"{input.dim()}-dimensional input of size {list(input.shape)} instead"
        ),
    )
    torch._check(
        sizes[0] >= groups,
        lambda: (
            f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got weight of "
            f"size {sizes} instead"
        ),
    )
    torch._check(
        sizes[0] % groups == 0,
        lambda: (
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight "
            f"of size [{sizes}] instead"
        ),
    )
    if transposed:
        torch._check(
            input.shape[1] == sizes[0],
            lambda: (
                f"Given transposed=1, weight of size {sizes}, expected input{list(input.shape)} to have "
                f"{sizes[0]} channels, but got {input.shape[1]} channels instead"
            ),
        )
        torch._check(
            bias is None or (bias.dim() == 1 and bias.shape[0] == sizes[1] * groups),
            lambda: (
                f"Given transposed=1, weight of size {sizes}, expected bias to be 1-dimensional with "
                f"{sizes[1] * groups} elements, but got bias of size {list(bias.shape)} instead"
            ),
        )
    else:
        torch._check(
            input.shape[1] == sizes[1] * groups,
            lambda: (
                f"Given groups={groups}, weight of size {sizes}, expected input{list(input.shape)} to have "
                f"{sizes[1] * groups} channels, but got {input.shape[1]} channels instead"
            ),
        )
        torch._check(
            bias is None or (bias.dim() == 1 and bias.shape[0] == sizes[0]),
            lambda: (
                f"Given weight of size {sizes}, expected bias to be 1-dimensional with {sizes[0]} elements, but "
                f"got bias of size {list(bias.shape)} instead"
            ),
        )
        padded = [size + 2 * pad for size, pad in zip(input.shape[2:], padding, strict=True)]
        kernel = [d * (k - 1) + 1 for d, k in zip(dilation, sizes[2:], strict=True)]
        torch._check(
            all(p >= k for p, k in zip(padded, kernel, strict=True)),
            lambda: (
                f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
                f"({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input size"
            ),
        )
    torch._check(
        input.shape[0] == 0 or input.shape[1] == 0 or input.numel() != 0,
        lambda: f"Only zero batch or zero channel inputs are supported, but got input shape: {list(input.shape)}",
    )
    # A zero dilation passes ATen's shared checks; the CPU's kernels refuse it in their shape check
    # (a 1-D convolution runs as a 2-D one of height 1), where JAX raised TypeError.
    torch._check(
        all(d > 0 for d in dilation),
        lambda: f"dilation should be greater than zero, but got {[1] * (dims == 1) + list(dilation)}",
    )
    if transposed:
        _check_transposed_output_padding(stride, dilation, output_padding)
        _check_transposed_output_size(input, sizes[2:], stride, padding, dilation, output_padding)
    return meta_conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _check_transposed_output_padding(stride: list[int], dilation: list[int], output_padding: list[int]) -> None:
    """``slow_conv_transpose2d/3d_shape_check``'s output padding rule (CPU and CUDA, which send an
    output padding reaching the stride to these kernels, not oneDNN or cuDNN), in its words: each
    output padding smaller than its stride or its dilation. A 1-D convolution runs as a 2-D one of
    height 1. Neuron computed such a convolution."""
    names = ("depth", "height", "width")[-len(stride) :] if len(stride) > 1 else ("height", "width")
    if len(stride) == 1:
        stride, dilation, output_padding = [1, *stride], [1, *dilation], [0, *output_padding]
    fields = (("output_padding", output_padding), ("stride", stride), ("dilation", dilation))
    got = " ".join(
        f"{field}_{name}: {value}" for field, values in fields for name, value in zip(names, values, strict=True)
    )
    torch._check(
        all(o < s or o < d for o, s, d in zip(output_padding, stride, dilation, strict=True)),
        lambda: f"output padding must be smaller than either stride or dilation, but got {got}",
    )


def _check_transposed_output_size(
    input: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    output_padding: list[int],
) -> None:
    """The output size check of ``slow_conv_transpose2d/3d_shape_check`` (NaiveConvolutionTranspose2d/3d,
    CPU and CUDA), in their words: a 1-D convolution runs as a 2-D one of height 1. PyTorch's meta
    kernel words it with lists, and an unbatched input's negative size reached the allocation."""
    inputs = list(input.shape[-len(kernel) :])
    outputs = [
        (size - 1) * s - 2 * p + d * (k - 1) + 1 + o
        for size, k, s, p, d, o in zip(inputs, kernel, stride, padding, dilation, output_padding, strict=True)
    ]
    if len(kernel) == 1:
        inputs, outputs = [1, *inputs], [1, *outputs]
    torch._check(
        all(size >= 1 for size in outputs),
        lambda: (
            f"Given input size per channel: ({' x '.join(map(str, inputs))}). Calculated output size per channel: "
            f"({' x '.join(map(str, outputs))}). Output size is too small"
        ),
    )


_ROLL_REFERENCE = decomposition_table()[aten.roll.default]
_GROUP_NORM_DECOMPOSITION = decomposition_table()[aten.native_group_norm.default]


def _native_group_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``native_group_norm``'s (output of the input's shape, contiguous; (N, group) mean and rstd).
    ATen's kernels read the input as (N, C, HxW) whatever its shape, once its element count is
    checked (``_compat/aten_checks.py``); PyTorch's decomposition broadcast the affine parameters
    against the input's own dimensions: a (1, 1, 6, 3) input of 6 channels gave (1, 6, 6, 3)."""
    _, mean, rstd = _GROUP_NORM_DECOMPOSITION(input.reshape(N, C, HxW), weight, bias, N, C, HxW, group, eps)
    return torch.empty_like(input, memory_format=torch.contiguous_format), mean, rstd


def _roll(self: torch.Tensor, shifts: list[int], dims: tuple[int, ...] | list[int] = ()) -> torch.Tensor:
    """``roll``'s result. ATen's CPU and CUDA kernels return an empty tensor before reading its dims
    (TensorTransformations.cpp/.cu): ``roll(empty, 1, 1000)`` computes, where PyTorch's reference
    wraps the dims first and raises IndexError."""
    if self.numel() == 0:
        return torch.empty_like(self)
    return _ROLL_REFERENCE(self, shifts, dims)


def _grid_sampler_2d(
    input: torch.Tensor, grid: torch.Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> torch.Tensor:
    """``grid_sampler_2d``'s result (N, C, H_out, W_out) after ATen's ``check_grid_sampler_common``
    and ``check_grid_sampler_2d`` (GridSamplerUtils.h, the CPU's and CUDA's), in their words.
    PyTorch's meta kernel is its decomposition, which checks neither: an empty spatial input was
    sampled (every tap outside it, zeros) and a batch mismatch raised a reshape error."""
    torch._check(
        input.device == grid.device,
        lambda: (
            "grid_sampler(): expected input and grid to be on same device, but input is on "
            f"{input.device} and grid is on {grid.device}"
        ),
    )
    torch._check(
        input.shape[0] == grid.shape[0],
        lambda: (
            "grid_sampler(): expected grid and input to have same batch size, but got input with sizes "
            f"{list(input.shape)} and grid with sizes {list(grid.shape)}"
        ),
    )
    torch._check(
        grid.shape[-1] == input.dim() - 2,
        lambda: (
            f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but got grid "
            f"with sizes {list(grid.shape)}"
        ),
    )
    _check_not_empty(
        input,
        range(2, input.dim()),
        lambda dim: (
            "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
            f"{list(input.shape)} with dimension {dim} being empty"
        ),
    )
    torch._check(
        input.dim() == 4 and input.dim() == grid.dim(),
        lambda: (
            "grid_sampler(): expected 4D input and grid with same number of dimensions, but got input with "
            f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
        ),
    )
    return input.new_empty((input.shape[0], input.shape[1], grid.shape[1], grid.shape[2]))


def _linalg_vector_norm(
    x: torch.Tensor,
    ord: float = 2,
    dim: list[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``linalg_vector_norm``: ATen's check that an inf or negative norm of an empty tensor reduces no
    empty dimension (LinearAlgebra.cpp, CPU and CUDA: its words, "-1" for the order, no space
    before "because"), then PyTorch's reference (its meta kernel) given ``dim`` wrapped as ATen
    wraps it. The reference's own check took a negative dim for an empty one, so
    ``vector_norm(torch.empty(0, 5), inf, dim=-1)`` refused where the CPU returns an empty result.

    Raises:
        IndexError: a dimension out of range, in ATen's words.
        RuntimeError: ATen's refusal of an empty reduction without an identity.
    """
    wrapped = None if dim is None else list(canonicalize_dims(x.dim(), dim))
    if x.numel() == 0 and (ord < 0 or ord == float("inf")):
        torch._check(
            bool(dim),
            lambda: (
                f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor because the operation "
                "does not have an identity"
            ),
        )
        for given, dim_wrapped in zip(dim, wrapped, strict=True):
            torch._check(
                x.shape[dim_wrapped] != 0,
                lambda given=given: (
                    f"linalg.vector_norm cannot compute the {ord:g} norm on the dimension {given}because this "
                    "dimension is empty and the operation does not have an identity"
                ),
            )
    return torch._refs.linalg.vector_norm(x, ord, wrapped, keepdim, dtype=dtype)


def _loss_backward_of_empty_input(op: OpOverload):
    """The meta kernel of a loss's backward (mse, smooth_l1, huber, binary_cross_entropy,
    soft_margin): PyTorch's decomposition, which divides by the input's element count for a mean
    reduction, so an empty input raised ZeroDivisionError; its gradient is an empty tensor like it."""
    decomposition = decomposition_table()[op]

    def kernel(grad_output: torch.Tensor, input: torch.Tensor, *arguments: object, **options: object) -> torch.Tensor:
        if input.numel() == 0:
            return torch.empty_like(input, memory_format=torch.contiguous_format)
        return decomposition(grad_output, input, *arguments, **options)

    return kernel


_GROUP_NORM_BACKWARD_DECOMPOSITION = decomposition_table()[aten.native_group_norm_backward.default]


def _native_group_norm_backward(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    output_mask: list[bool],
) -> tuple[torch.Tensor | None, ...]:
    """``native_group_norm_backward``: PyTorch's decomposition, which divides by the group's element
    count (ZeroDivisionError for an input without channels or spatial elements), except for an
    empty input: its gradients are empty, and the affine parameters' (C,) zeros' shapes."""
    if input.numel() != 0:
        return _GROUP_NORM_BACKWARD_DECOMPOSITION(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)
    grad_input = torch.empty_like(input, memory_format=torch.contiguous_format) if output_mask[0] else None
    grad_weight = input.new_empty((C,)) if output_mask[1] else None
    grad_bias = input.new_empty((C,)) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


def _index_add(
    self: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, *, alpha: object = 1
) -> torch.Tensor:
    """``index_add``'s result: a contiguous tensor like ``self``, as ATen's structured kernel makes.
    PyTorch's meta (its decomposition) refuses a float ``alpha`` for an integer ``self`` ("alpha
    argument of type float cannot be safely cast"), which CPU and CUDA convert (``alpha.to<int>``:
    1.5 adds once). The argument checks are ATen's, made by the lowering's rule
    (lowering/indexing.py)."""
    return torch.empty(self.shape, dtype=self.dtype, device=self.device)


def _index_add_(
    self: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, *, alpha: object = 1
) -> torch.Tensor:
    """``index_add_``'s result, ``self`` (see :func:`_index_add`)."""
    return self


def _same_dtype_operands(first: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
    """The result of a TensorIterator over inputs of one dtype with no meta kernel (``torch.binomial``,
    ``_standard_gamma_grad``, ``_dirichlet_grad``): its same-dtype check, then the broadcast shape in
    the first's dtype (the CPU resizes its first-shaped result to it)."""

    for other in others:
        torch._check(
            other.dtype == first.dtype,
            lambda other=other: (
                f"Found dtype {aten_checks.scalar_type_name(other.dtype)} but expected "
                f"{aten_checks.scalar_type_name(first.dtype)}"
            ),
        )
    shape = first.shape
    for other in others:  # TensorIterator's broadcast, with ATen's error
        shape = infer_size(shape, other.shape)
    return first.new_empty(shape)


def _same_dtype_pair(first: torch.Tensor, second: torch.Tensor, generator: object = None) -> torch.Tensor:
    """:func:`_same_dtype_operands` of a sampler's two inputs (its generator is no operand)."""
    return _same_dtype_operands(first, second)


def _sample_dirichlet(alpha: torch.Tensor, generator: object = None) -> torch.Tensor:
    return torch.empty_like(alpha)


def _fractional_max_pool3d_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    kernel_size: list[int],
    output_size: list[int],
    indices: torch.Tensor,
) -> torch.Tensor:
    """``fractional_max_pool3d_backward``, which has no meta kernel: the CPU's size checks of the
    gradient (FractionalMaxPool3d.cpp), then a gradient of the input's shape."""
    for offset, (name, size) in enumerate(zip(("time", "height", "width"), output_size, strict=True)):
        dim = input.dim() - 3 + offset
        torch._check(
            grad_output.size(dim) == size,
            lambda name=name: f"fractional_max_pool3d_backward_out(): gradOutput {name} unexpected",
        )
    return torch.empty_like(input)


#: Training batch norms with running statistics, whose PyTorch decomposition (their meta kernel)
#: scales the running variance by ``n / (n - 1)`` in Python.
_BATCH_NORM_UPDATES = (
    aten.native_batch_norm.default,
    aten._native_batch_norm_legit.default,
    aten._native_batch_norm_legit_functional.default,
    aten._batch_norm_with_update.default,
    aten._batch_norm_with_update_functional.default,
)


#: ... of which these return the new running statistics, last.
_FUNCTIONAL_BATCH_NORM_UPDATES = (
    aten._native_batch_norm_legit_functional.default,
    aten._batch_norm_with_update_functional.default,
)


def _batch_norm_update(op: OpOverload) -> Callable[..., object]:
    """The meta kernel of ``op`` (one of :data:`_BATCH_NORM_UPDATES`): PyTorch's decomposition,
    with two of its results corrected to what ATen's kernels return. An input of one value per
    channel gives a NaN running variance (``var_sum / 0``), where the decomposition's
    ``n / (n - 1)`` raised ZeroDivisionError: its shapes are those of two values per channel, with
    the output of the input's shape. A functional op's new running statistics keep the running
    statistics' dtype (the decomposition computed 16-bit ones in float32)."""
    meta = op.py_kernels[torch._C.DispatchKey.Meta]
    names = [argument.name for argument in op._schema.arguments]

    def kernel(*args: object, **kwargs: object) -> object:
        arguments = dict(zip(names, args, strict=False)) | kwargs  # the rest passed as keywords
        input = arguments["input"]
        if input.dim() >= 2 and input.numel() > 0 and input.numel() == input.shape[1]:
            output, *results = meta(**(arguments | {"input": input.expand(2, *input.shape[1:])}))
            results = [torch.empty_like(input, dtype=output.dtype), *results]
        else:
            results = list(meta(**arguments))
        if op in _FUNCTIONAL_BATCH_NORM_UPDATES:
            for index, name in ((-2, "running_mean"), (-1, "running_var")):
                if arguments[name] is not None:
                    results[index] = results[index].to(arguments[name].dtype)
        return tuple(results)

    return kernel


#: Loss backwards whose PyTorch decomposition divides by an empty input's element count.
_EMPTY_INPUT_LOSS_BACKWARDS = tuple(
    getattr(aten, f"{loss}_backward").default
    for loss in ("mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "soft_margin_loss")
)
#: ... and every backward that does, group norm's included.
_EMPTY_INPUT_BACKWARDS = (aten.native_group_norm_backward.default, *_EMPTY_INPUT_LOSS_BACKWARDS)


def _packed_scalars(self: list[torch.Tensor], scalars: torch.Tensor) -> None:
    """ATen's ``convert_tensor_to_scalar_list`` checks of a foreach op's ``Tensor scalars`` (one
    scalar per tensor, packed in a 1-d CPU tensor), without its device check: PyTorch's meta kernel
    makes that check on the meta tensor FakeTensorMode gives it, so it refuses every call ("Expected
    scalars to be on CPU, got meta instead"), which failed compiled ``_multi_tensor_adam`` steps with
    host ``step`` state (Adam's step after a fused Adam step had Dynamo skip its frame)."""
    if scalars.dim() != 1:
        raise RuntimeError(f"Expected packed scalar Tensor to be of dimension 1. Got {scalars.dim()} instead.")
    if scalars.size(0) != len(self):
        raise RuntimeError(
            f"Expected length of scalars to match input of length {len(self)} but got {scalars.size(0)} instead."
        )


def _foreach_pointwise_packed(
    self: list[torch.Tensor], tensor1: list[torch.Tensor], tensor2: list[torch.Tensor], scalars: torch.Tensor
) -> list[torch.Tensor]:
    """``_foreach_addcmul``/``_foreach_addcdiv`` with ``Tensor scalars``: one result per ``self``
    tensor, of its shape and dtype."""
    _packed_scalars(self, scalars)
    return [torch.empty_like(t, memory_format=torch.contiguous_format) for t in self]


def _foreach_pointwise_packed_(
    self: list[torch.Tensor], tensor1: list[torch.Tensor], tensor2: list[torch.Tensor], scalars: torch.Tensor
) -> None:
    _packed_scalars(self, scalars)


#: The foreach overloads that take their scalars packed in a CPU tensor.
_FOREACH_PACKED_SCALARS = {
    aten._foreach_addcdiv.Tensor: _foreach_pointwise_packed,
    aten._foreach_addcmul.Tensor: _foreach_pointwise_packed,
    aten._foreach_addcdiv_.Tensor: _foreach_pointwise_packed_,
    aten._foreach_addcmul_.Tensor: _foreach_pointwise_packed_,
}

_KERNELS = {
    **_FOREACH_PACKED_SCALARS,
    aten.fractional_max_pool3d_backward.default: _fractional_max_pool3d_backward,
    aten.binomial.default: _same_dtype_pair,
    aten._standard_gamma_grad.default: _same_dtype_pair,
    aten._dirichlet_grad.default: _same_dtype_operands,
    aten._sample_dirichlet.default: _sample_dirichlet,
    aten.linalg_vector_norm.default: _linalg_vector_norm,
    **{op: _loss_backward_of_empty_input(op) for op in _EMPTY_INPUT_LOSS_BACKWARDS},
    aten.native_group_norm_backward.default: _native_group_norm_backward,
    aten.index_add.default: _index_add,
    aten.index_add_.default: _index_add_,
    aten.normal.Tensor_float: _normal_tensor_float,
    aten.normal.float_Tensor: _normal_float_tensor,
    aten.normal.Tensor_Tensor: _normal_tensor_tensor,
    aten._fused_sgd.default: _fused_sgd,
    aten._fused_sgd_.default: _fused_sgd_,
    aten._fused_sgd.tensor_lr: _fused_sgd,
    aten._fused_sgd_.tensor_lr: _fused_sgd_,
    **{
        packet.tensor_lr: _with_float_lr(packet.default)
        for packet in (aten._fused_adam, aten._fused_adam_, aten._fused_adamw, aten._fused_adamw_)
    },
    aten._thnn_fused_lstm_cell.default: _thnn_fused_lstm_cell,
    aten._thnn_fused_gru_cell.default: _thnn_fused_gru_cell,
    aten._thnn_fused_gru_cell_backward.default: _thnn_fused_gru_cell_backward,
    aten.multi_margin_loss.default: _multi_margin_loss,
    **{op: _batch_norm_update(op) for op in _BATCH_NORM_UPDATES},
    aten.multilabel_margin_loss_forward.default: _multilabel_margin_loss_forward,
    aten.multi_margin_loss_backward.default: _margin_loss_backward,
    aten.multilabel_margin_loss_backward.default: _margin_loss_backward,
    aten.geqrf.default: _geqrf,
    aten.geqrf.a: _geqrf_out,
    aten.nll_loss_forward.default: _nll_loss_forward,
    aten.nll_loss_backward.default: _nll_loss_backward,
    aten.huber_loss.default: _input_dtype_loss(aten.huber_loss.default),
    aten.soft_margin_loss.default: _input_dtype_loss(aten.soft_margin_loss.default),
    aten.histogram.bin_ct: _histogram_bin_ct,
    aten.histogram.bins_tensor: _histogram_bins_tensor,
    aten._histogramdd_bin_edges.default: _histogramdd_bin_edges,
    aten._histogramdd_from_bin_cts.default: _histogramdd_from_bin_cts,
    aten._histogramdd_from_bin_tensors.default: _histogramdd_from_bin_tensors,
    aten._ctc_loss_backward.default: _ctc_loss_backward,
    aten._ctc_loss_backward.Tensor: _ctc_loss_backward,
    aten.grid_sampler_2d.default: _grid_sampler_2d,
    aten.roll.default: _roll,
    aten.native_group_norm.default: _native_group_norm,
    aten.convolution.default: _convolution,
    aten._convolution.default: _convolution,
    aten.fractional_max_pool2d.default: _fractional_max_pool2d,
    **_UPSAMPLING_KERNELS,
}


def _for_neuron(values: object) -> bool:
    """Whether a meta call describes a neuron op: the eager layer's meta tensors, or a compiled graph's
    fake tensors of the neuron device. Fake tensors of another device (a CPU torch.compile in the same
    process) keep PyTorch's meta kernels as they are."""
    # FakeTensorMode runs meta kernels with its tensors reporting the meta device; ``fake_device``
    # keeps the device they stand for.
    return any(
        isinstance(value, torch.Tensor) and getattr(value, "fake_device", value.device).type in ("meta", "neuron")
        for value in pytree.tree_leaves(values)
    )


def _for_neuron_ops(check: Callable[..., None]) -> Callable[..., None]:
    """ATen's argument checks ``check`` (:mod:`~torch_neuronx._compat.aten_checks`), run for
    neuron ops only (:func:`_for_neuron`)."""

    def neuron_check(*args: object, **kwargs: object) -> None:
        if _for_neuron((args, kwargs)):
            check(*args, **kwargs)

    return neuron_check


def _checked(meta: Callable[..., object], check: Callable[..., None]) -> Callable[..., object]:
    """The meta kernel ``meta`` after ``check`` (one of :data:`_NEURON_CHECKS`)."""

    def kernel(*args: object, **kwargs: object) -> object:
        check(*args, **kwargs)
        return meta(*args, **kwargs)

    return kernel


_NEURON_CHECKS = {op: _for_neuron_ops(check) for op, check in aten_checks.CHECKS.items()}

#: Ops whose meta kernel (one above, else PyTorch's Python one, captured before :func:`register`
#: replaces it) checks less than ATen or words it otherwise: every overload with such a kernel.
_ATEN_CHECKED = {
    op: _checked(_KERNELS.get(op) or op.py_kernels[torch._C.DispatchKey.Meta], check)
    for op, check in _NEURON_CHECKS.items()
    if op in _KERNELS or torch._C.DispatchKey.Meta in op.py_kernels
}
_KERNELS.update(_ATEN_CHECKED)


#: Ops whose Python meta kernel (torch/_refs, registered for the Python dispatcher, which Dynamo and
#: AOTAutograd trace under) is replaced too, so compiled graphs get the kernels above.
_PYTHON_DISPATCHER_METAS = (
    aten.nll_loss_backward.default,
    aten.linalg_vector_norm.default,
    *_EMPTY_INPUT_BACKWARDS,
    aten.huber_loss.default,
    aten.soft_margin_loss.default,
    aten.normal.Tensor_float,
    aten.normal.float_Tensor,
    aten.normal.Tensor_Tensor,
    aten.grid_sampler_2d.default,
    aten.roll.default,
    aten.fractional_max_pool2d.default,
    *_BATCH_NORM_UPDATES,
    aten.convolution.default,
    aten._convolution.default,
    *_UPSAMPLING_KERNELS,
    *_ATEN_CHECKED,
)


#: Ops whose PyTorch decomposition FakeTensorMode runs as their meta (it prefers torch._decomp's
#: decompositions to the Meta kernel unless the op has an entry in ``meta_table``, then runs the
#: Python dispatcher's Meta kernel): Dynamo traced ``index_add`` of an integer tensor with a float
#: alpha into the decomposition's refusal.
_FAKE_TENSOR_METAS = (
    aten.nll_loss_backward.default,
    aten.linalg_vector_norm.default,
    *_EMPTY_INPUT_BACKWARDS,
    aten.index_add.default,
    aten.index_add_.default,
    aten.grid_sampler_2d.default,
    *_BATCH_NORM_UPDATES,
    *_UPSAMPLING_KERNELS,
    *_ATEN_CHECKED,
)


def register() -> None:
    """Registers the kernels above for the Meta key (once), replacing PyTorch's LSTM cell kernel
    and, for the Python dispatcher too, its ``torch.normal`` kernels."""
    if _libraries:
        return
    library = torch.library.Library("aten", "IMPL", "Meta")
    for op, kernel in _KERNELS.items():
        library.impl(op, kernel)
    for op in _PYTHON_DISPATCHER_METAS + _FAKE_TENSOR_METAS:
        op.py_kernels[torch._C.DispatchKey.Meta] = _KERNELS[op]
        op._dispatch_cache.clear()
    for op in _FAKE_TENSOR_METAS:
        register_fake_tensor_meta(op, _KERNELS[op])
    for op, check in _NEURON_CHECKS.items():
        check_before_fake_impl(op, check)
    _libraries.append(library)
