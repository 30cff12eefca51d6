"""Neuron's own composites for CompositeImplicitAutograd ops whose PyTorch composite creates float64
tensors on the input's device, which neuron cannot hold (decision 8).

PyTorch's ``get_atol_rtol`` (``aten/src/ATen/native/LinearAlgebra.cpp``) makes the default
tolerances of ``linalg.pinv`` and ``linalg.matrix_rank`` as 0-d float64 tensors on the input's
device; CUDA computes with them in float64. These composites pass the tolerances as 0-d tensors of
the input's real dtype instead (or leave them to the lowering's defaults) and otherwise do what
PyTorch's composite does. Each is registered for PrivateUse1 and AutogradPrivateUse1, so, like a
CompositeImplicitAutograd kernel, autograd differentiates through the ops it calls. Argument errors
are PyTorch's own: each first runs the op on meta tensors.

``renorm``'s autograd formula (``renorm_backward`` in ``FunctionsManual.cpp``) takes its norm in
``toAccumulateType(dtype, device_type)``, which is float64 for a float32 tensor on any device
PyTorch does not list (PrivateUse1 included). The composite here computes the forward as the CPU
and CUDA kernels do (the norm in float32 for 16-bit inputs, factor maxnorm / (norm + 1e-7) where the
norm exceeds maxnorm) from differentiable ops, so autograd derives the same gradient in float32.

``batch_norm`` (``_batch_norm_impl_index`` in ``Normalization.cpp``) returns, for an empty input, its
saved statistics as tensors of the same accumulate type, float64 for float32: the composite here
computes that case's result (``input * weight[0] + bias[0]``, running statistics untouched) itself and
hands every other input to PyTorch's ``_batch_norm_impl_index``. ``instance_norm`` reaches it too.

``max_pool1d`` (without indices) computes through ``max_pool1d_with_indices`` off the CPU, which
neuron computes for integers as the CPU does; its composite here refuses integers, as the CPU's own
kernel and CUDA's do.

``linalg.lstsq`` has no meta kernel and, for the ``gelsd``/``gelss`` drivers, a residuals result
whose shape depends on the computed ranks. Its kernel here (:data:`BACKEND_KERNELS`, PrivateUse1
only, so PyTorch's autograd formula stays) solves through the SVD and reads the ranks back when
that shape needs them.
"""

from __future__ import annotations

import torch

from torch_neuronx._compat.torch_internals import infer_size
from torch_neuronx.eager.runners import resize_output
from torch_neuronx.runtime.dtypes import aten_name

aten = torch.ops.aten


def _meta(value: object) -> object:
    return torch.empty_like(value, device="meta") if isinstance(value, torch.Tensor) else value


def _tolerance(input: torch.Tensor, value: float | None) -> torch.Tensor | None:
    """A float tolerance as a 0-d tensor of ``input``'s real dtype on its device."""
    if value is None:
        return None
    return torch.full((), value, dtype=input.real.dtype if input.is_complex() else input.dtype, device=input.device)


def linalg_pinv_float(
    input: torch.Tensor, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False
) -> torch.Tensor:
    """``torch.linalg.pinv(A, atol=float, rtol=float)`` (and pinverse, pinv(A, rcond=float))."""
    aten.linalg_pinv.atol_rtol_float(_meta(input), atol=atol, rtol=rtol, hermitian=hermitian)
    atol_tensor, rtol_tensor = _tolerance(input, atol), _tolerance(input, rtol)
    return aten.linalg_pinv.atol_rtol_tensor(input, atol=atol_tensor, rtol=rtol_tensor, hermitian=hermitian)


def linalg_pinv_rcond(input: torch.Tensor, rcond: torch.Tensor, hermitian: bool = False) -> torch.Tensor:
    """``torch.linalg.pinv(A, rcond=tensor)``: rcond is the relative tolerance, atol is 0."""
    aten.linalg_pinv.rcond_tensor(_meta(input), _meta(rcond), hermitian)
    return aten.linalg_pinv.atol_rtol_tensor(input, atol=None, rtol=rcond, hermitian=hermitian)


def linalg_matrix_rank_tensor(
    input: torch.Tensor,
    *,
    atol: torch.Tensor | None = None,
    rtol: torch.Tensor | None = None,
    hermitian: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``torch.linalg.matrix_rank``: the number of singular values (eigenvalue magnitudes when
    ``hermitian``) above max(atol, rtol * largest); atol defaults to 0, rtol to eps * max(m, n), or
    0 where a given atol is positive. With ``out``, counted into it as ATen's ``matrix_rank_impl``
    does (``sum_out``: resized with its warning, any dtype the int64 count casts to safely; ATen's
    ``matrix_rank_impl`` checks that first)."""
    if out is not None and not torch.can_cast(torch.int64, out.dtype):
        raise RuntimeError(
            "torch.linalg.matrix_rank: Expected result to be safely castable from Long dtype, but got result with "
            f"dtype {aten_name(out.dtype)}"
        )
    result = aten.linalg_matrix_rank.atol_rtol_tensor(
        _meta(input), atol=_meta(atol), rtol=_meta(rtol), hermitian=hermitian
    )
    if input.numel() == 0:
        zeros = torch.zeros(result.shape, dtype=result.dtype, device=input.device)
        return zeros if out is None else torch.sum(zeros[..., None], dim=-1, out=out)
    if hermitian:
        values = torch.linalg.eigvalsh(input).abs()
        largest = values.amax(dim=-1, keepdim=True)
    else:
        values = torch.linalg.svdvals(input)
        largest = values.narrow(-1, 0, 1)
    zero = torch.zeros((), dtype=values.dtype, device=input.device)
    default_rtol = torch.finfo(values.dtype).eps * max(input.shape[-2], input.shape[-1])
    if rtol is None:
        rtol = torch.full_like(zero, default_rtol) if atol is None else torch.where(atol > 0, zero, default_rtol)
    atol = zero if atol is None else atol
    tolerance = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * largest)
    above = values > tolerance
    return torch.sum(above, dim=-1) if out is None else torch.sum(above, dim=-1, out=out)


def linalg_matrix_rank_float(
    input: torch.Tensor,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    hermitian: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    aten.linalg_matrix_rank.atol_rtol_float(_meta(input), atol=atol, rtol=rtol, hermitian=hermitian)
    return linalg_matrix_rank_tensor(
        input, atol=_tolerance(input, atol), rtol=_tolerance(input, rtol), hermitian=hermitian, out=out
    )


def linalg_matrix_rank_tol(
    input: torch.Tensor, tol: float, hermitian: bool = False, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``torch.linalg.matrix_rank(A, tol=float)``: tol is the absolute tolerance, rtol is 0."""
    return linalg_matrix_rank_float(input, atol=tol, rtol=0.0, hermitian=hermitian, out=out)


def linalg_matrix_rank_tol_tensor(
    input: torch.Tensor, tol: torch.Tensor, hermitian: bool = False, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``torch.linalg.matrix_rank(A, tol=tensor)``: tol is the absolute tolerance, rtol is 0."""
    return linalg_matrix_rank_tensor(input, atol=tol, rtol=_tolerance(input, 0.0), hermitian=hermitian, out=out)


def linalg_pinv_out(input: torch.Tensor, rcond: float, hermitian: bool = False, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.linalg.pinv(A, rcond=float, out=)``: ATen makes rcond a float64 tensor on the input's
    device; it is one of the input's real dtype here, handed to the ``rcond`` tensor overload."""
    aten.linalg_pinv.out(_meta(input), rcond, hermitian, out=_meta(out))
    return aten.linalg_pinv.out_rcond_tensor(input, _tolerance(input, rcond), hermitian, out=out)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _check_lstsq(input: torch.Tensor, b: torch.Tensor, driver: str) -> None:
    """PyTorch's argument checks of ``linalg_lstsq`` (``BatchLinearAlgebra.cpp``), with its messages."""
    torch._check(input.dim() >= 2, lambda: "torch.linalg.lstsq: input must have at least 2 dimensions.")
    torch._check(b.dim() >= 1, lambda: "torch.linalg.lstsq: other must have at least 1 dimension.")
    torch._check(
        input.dtype == b.dtype,
        lambda: (
            "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype "
            f"{aten_name(input.dtype)} and other's dtype {aten_name(b.dtype)}"
        ),
    )
    torch._check(
        input.dtype in (torch.float32, torch.complex64),
        lambda: "This function doesn't handle types other than float and double",
    )
    torch._check(
        input.dim() >= b.dim() and input.dim() - b.dim() <= 1,
        lambda: (
            "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
            "(input.dim() - other.dim()) <= 1"
        ),
    )
    vector = _is_vector_rhs(input, b)
    torch._check(
        input.size(-2) == b.size(-1 if vector else -2),
        lambda: f"torch.linalg.lstsq: input.size(-2) should match other.size({-1 if vector else -2})",
    )
    torch._check(
        driver in _LSTSQ_DRIVERS,
        lambda: "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)",
    )


def _is_vector_rhs(input: torch.Tensor, b: torch.Tensor) -> bool:
    """ATen's ``linalg_solve_is_vector_rhs``: ``b`` is a (batch of) vector(s) only when it is 1-D or
    has exactly ``input.shape[:-1]``; any other ``b`` is a (batch of) matrices, so ``b`` (5, 2)
    beside ``input`` (2, 5, 3) is one 5x2 right-hand side broadcast over the batch."""
    return b.dim() == 1 or (b.dim() == input.dim() - 1 and b.shape == input.shape[:-1])


def linalg_lstsq(
    input: torch.Tensor, b: torch.Tensor, rcond: float | None = None, *, driver: str | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.lstsq``: the minimum-norm least-squares solution through the SVD, keeping the
    singular values above ``rcond`` times the largest (default eps * max(m, n); a negative rcond
    means eps; ``gels`` ignores rcond, as LAPACK's, and keeps every nonzero singular value). The
    CPU's results for each driver: rank (all but ``gels``), singular values
    (``gelsd``, ``gelss``), and for m > n the squared residuals (not ``gelsy``; ``gelsd``/``gelss``
    only when every matrix has full rank). For a rank-deficient matrix ``gels`` (which assumes full
    rank) returns LAPACK's arbitrary values on the CPU and the minimum-norm solution here. With no
    right-hand sides (``b`` of k = 0 columns) ``gelsy``'s rank is 0 as LAPACK's; ``gelsd`` and
    ``gelss`` return the rank and singular values of ``input``, where the CPU's MKL fails an
    internal assertion (``gelsd``) or crashes the interpreter (``gelss``, torch 2.13).
    A ``b`` of ``input.shape[:-1]`` is a batch of vectors, any other a batch of matrices:
    ``b`` (5, 2) beside ``input`` (2, 5, 3) gives a (2, 3, 2) solution where the CPU's
    ``linalg_lstsq`` broadcasts the wrong batch dimensions (a (5, 3, 2) solution beside a
    (1, 5, 3) input, a broadcasting error beside (2, 5, 3))."""
    driver = "gelsy" if driver is None else driver
    _check_lstsq(input, b, driver)
    vector = _is_vector_rhs(input, b)
    rhs = b.unsqueeze(-1) if vector else b
    batch = infer_size(input.shape[:-2], rhs.shape[:-2])  # ATen's words for batches that do not broadcast
    a = input.expand(*batch, *input.shape[-2:])
    rhs = rhs.expand(*batch, *rhs.shape[-2:])
    m, n = a.shape[-2:]
    real = a.real.dtype if a.is_complex() else a.dtype
    eps = torch.finfo(real).eps
    threshold = eps * max(m, n) if rcond is None else (eps if rcond < 0 else rcond)
    if driver == "gels":  # LAPACK's ?gels takes no rcond: a full-rank A's exact solution
        threshold = 0.0
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    keep = s > threshold * s[..., :1] if s.shape[-1] else s > 0
    inverse = torch.where(keep, s.reciprocal(), torch.zeros((), dtype=real, device=a.device)).to(a.dtype)
    solution = vh.mH @ (inverse.unsqueeze(-1) * (u.mH @ rhs))
    # The rank and singular values have the input's own batch shape, as ATen's (its LAPACK call
    # factors the unexpanded input): A (1, 5, 3) beside b (3, 5, 2) gives a rank of shape (1,).
    own = s if input.shape[:-2] == a.shape[:-2] else torch.linalg.svdvals(input)
    own_keep = own > threshold * own[..., :1] if own.shape[-1] else own > 0
    rank = own_keep.sum(-1) if driver != "gels" else torch.empty(0, dtype=torch.int64, device=a.device)
    if driver == "gelsy" and rhs.shape[-1] == 0:  # LAPACK's ?gelsy returns at once with rank 0
        rank = torch.zeros_like(rank)
    values = own if driver in ("gelsd", "gelss") else torch.empty(0, dtype=real, device=a.device)
    residuals = torch.empty(0, dtype=real, device=a.device)
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        residuals = (a @ solution - rhs).abs().square().sum(-2)
        if n == 0 and driver == "gels":  # the CPU's gels leaves them zero when A has no columns
            residuals = torch.zeros_like(residuals)
    solution = _in_lapack_layout(solution, m, vector)
    return solution, residuals, rank, values


def _in_lapack_layout(solution: torch.Tensor, m: int, vector: bool) -> torch.Tensor:
    """``solution`` (..., n, k) laid out as ATen's ``linalg_lstsq`` returns it on the CPU and CUDA:
    the first n rows of a column-major (..., max(m, n), k) buffer, LAPACK's right-hand sides
    overwritten by the solution (strides (1, 5) for a 5x3 system with two right-hand sides),
    squeezed to (..., n) for a vector ``b``."""
    *batch, n, k = solution.shape
    rows = max(m, n)
    buffer = torch.zeros((*batch, k, rows), dtype=solution.dtype, device=solution.device).mT
    view = buffer.narrow(-2, 0, n)
    view.copy_(solution)
    return view.squeeze(-1) if vector else view


def linalg_lstsq_out(
    input: torch.Tensor,
    b: torch.Tensor,
    rcond: float | None = None,
    *,
    driver: str | None = None,
    solution: torch.Tensor,
    residuals: torch.Tensor,
    rank: torch.Tensor,
    singular_values: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.linalg.lstsq(A, B, out=(solution, residuals, rank, singular_values))``: the checks of
    ATen's ``linalg_lstsq_out`` (``BatchLinearAlgebra.cpp``: every out on the input's device, each
    dtype safely castable from its result's; ATen names the residuals "solution" in its message),
    then :func:`linalg_lstsq`'s results resized into the outs (with PyTorch's warning for a
    non-empty out of another shape) and copied, as ATen's path for outs it cannot write directly."""
    _check_lstsq(input, b, "gelsy" if driver is None else driver)
    placed = {"other": b, "solution": solution, "residuals": residuals, "rank": rank}
    placed["singular_values"] = singular_values
    for name, tensor in placed.items():
        torch._check(
            tensor.device == input.device,
            lambda name=name, tensor=tensor: (
                f"torch.linalg.lstsq: Expected {name} and input tensors to be on the same device, but got "
                f"{name} on {tensor.device} and input on {input.device}"
            ),
        )
    real = input.real.dtype if input.is_complex() else input.dtype
    expected = ((solution, input.dtype, "solution"), (residuals, real, "solution"), (rank, torch.int64, "rank"))
    for out, dtype, name in (*expected, (singular_values, real, "singular_values")):
        torch._check(
            torch.can_cast(dtype, out.dtype),
            lambda out=out, dtype=dtype, name=name: (
                f"torch.linalg.lstsq: Expected {name} to be safely castable from {aten_name(dtype)} dtype, "
                f"but got {name} with dtype {aten_name(out.dtype)}"
            ),
        )
    results = linalg_lstsq(input, b, rcond, driver=driver)
    outs = (solution, residuals, rank, singular_values)
    for out, result in zip(outs, results, strict=True):
        if out is solution and out.numel() == 0 and out.dtype == result.dtype:
            # ATen hands an empty solution out LAPACK's column-major buffer (strides (1, 5) for a
            # 5x3 system with two right-hand sides); an out with elements is resized or kept.
            out.set_(result.untyped_storage(), result.storage_offset(), result.shape, result.stride())
            continue
        resize_output(out, result.shape)
        out.copy_(result)
    return outs


#: Kernels for PrivateUse1 only: the op keeps PyTorch's own autograd formula.
def renorm(input: torch.Tensor, p: float, dim: int, maxnorm: float) -> torch.Tensor:
    """``torch.renorm``: each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled to norm
    ``maxnorm``."""
    aten.renorm.default(_meta(input), p, dim, maxnorm)
    if input.dim() == 0 or input.numel() == 0:
        return input.clone()
    dim = dim % input.dim()
    others = [d for d in range(input.dim()) if d != dim]
    accumulate = torch.float32 if input.dtype in (torch.bfloat16, torch.float16) else None
    norm = torch.linalg.vector_norm(input, p, others, keepdim=True, dtype=accumulate)
    factor = torch.where(norm > maxnorm, maxnorm / (norm + 1e-7), torch.ones_like(norm))
    return input * factor.to(input.dtype)


def batch_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> torch.Tensor:
    """``torch.batch_norm``; an empty batch gives ``input * weight[0] + bias[0]`` as on CPU."""
    arguments = (input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
    if input.numel() == 0:
        aten._batch_norm_impl_index.default(*(_meta(a) for a in arguments))
        result = input.clone()  # a new tensor, not a view: it carries the gradient to the input
        if weight is not None:
            result = result * weight[0]
        if bias is not None:
            result = result + bias[0]
        return result
    return aten._batch_norm_impl_index.default(*arguments)[0]


def max_pool1d(
    input: torch.Tensor,
    kernel_size: list[int],
    stride: list[int] = (),
    padding: list[int] = (0,),
    dilation: list[int] = (1,),
    ceil_mode: bool = False,
) -> torch.Tensor:
    """``F.max_pool1d`` without indices. PyTorch's composite computes it on the CPU with its own
    kernel (``max_pool1d_impl``) and elsewhere through ``max_pool1d_with_indices``, which on neuron
    computes integers as the CPU's ``max_pool2d`` does; here it refuses them, as both the CPU and
    CUDA do (CUDA's ``max_pool2d_with_indices`` dispatches the floating dtypes), after PyTorch's
    argument checks. ``F.max_pool1d(..., return_indices=True)`` of integers computes, as on the CPU.

    Raises:
        NotImplementedError: ``input`` is not floating point, with CUDA's message.
    """
    arguments = (kernel_size, stride, padding, dilation, ceil_mode)
    aten.max_pool1d.default(_meta(input), *arguments)
    if not input.is_floating_point():
        raise NotImplementedError(
            f"\"max_pool2d_with_indices_out_cuda_frame\" not implemented for '{aten_name(input.dtype)}'"
        )
    return aten.max_pool1d_with_indices.default(input, *arguments)[0]


def linalg_ldl_factor(A: torch.Tensor, *, hermitian: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.ldl_factor``: ``ldl_factor_ex`` with its check. PyTorch's composite checks
    ``info`` with ``_linalg_check_errors``, which has no message for LAPACK's ``?sytrf`` and fails
    an internal assertion ("Unknown error code: 1", CPU and CUDA); the lowering's check says what
    the info means (lowering/ldl.py)."""
    ld, pivots, _ = aten.linalg_ldl_factor_ex.default(A, hermitian=hermitian, check_errors=True)
    return ld, pivots


BACKEND_KERNELS = {
    aten.linalg_lstsq.default: linalg_lstsq,
    aten.linalg_lstsq.out: linalg_lstsq_out,
    aten.linalg_ldl_factor.default: linalg_ldl_factor,
}

KERNELS = {
    aten.linalg_pinv.atol_rtol_float: linalg_pinv_float,
    aten.linalg_pinv.rcond_tensor: linalg_pinv_rcond,
    aten.linalg_matrix_rank.atol_rtol_tensor: linalg_matrix_rank_tensor,
    aten.linalg_matrix_rank.atol_rtol_float: linalg_matrix_rank_float,
    aten.linalg_matrix_rank.default: linalg_matrix_rank_tol,
    # Their out= forms make the same float64 tolerances (get_atol_rtol, LinearAlgebra.cpp).
    aten.linalg_matrix_rank.atol_rtol_tensor_out: linalg_matrix_rank_tensor,
    aten.linalg_matrix_rank.atol_rtol_float_out: linalg_matrix_rank_float,
    aten.linalg_matrix_rank.out: linalg_matrix_rank_tol,
    aten.linalg_matrix_rank.out_tol_tensor: linalg_matrix_rank_tol_tensor,
    aten.linalg_pinv.out: linalg_pinv_out,
    aten.renorm.default: renorm,
    aten.max_pool1d.default: max_pool1d,
    aten.batch_norm.default: batch_norm,
}
