"""Neuron's own composites for CompositeImplicitAutograd ops whose PyTorch composite creates float64
tensors on the input's device, which neuron cannot hold (decision 8).

PyTorch's ``get_atol_rtol`` (``aten/src/ATen/native/LinearAlgebra.cpp``) makes the default
tolerances of ``linalg.pinv`` and ``linalg.matrix_rank`` as 0-d float64 tensors on the input's
device; CUDA computes with them in float64. These composites pass the tolerances as 0-d tensors of
the input's real dtype instead (or leave them to the lowering's defaults) and otherwise do what
PyTorch's composite does. Each is registered for PrivateUse1 and AutogradPrivateUse1, so, like a
CompositeImplicitAutograd kernel, autograd differentiates through the ops it calls. Argument errors
are PyTorch's own: each first runs the op on meta tensors.
"""

from __future__ import annotations

import torch

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
) -> torch.Tensor:
    """``torch.linalg.matrix_rank``: the number of singular values (eigenvalue magnitudes when
    ``hermitian``) above max(atol, rtol * largest); atol defaults to 0, rtol to eps * max(m, n), or
    0 where a given atol is positive."""
    result = aten.linalg_matrix_rank.atol_rtol_tensor(
        _meta(input), atol=_meta(atol), rtol=_meta(rtol), hermitian=hermitian
    )
    if input.numel() == 0:
        return torch.zeros(result.shape, dtype=result.dtype, device=input.device)
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
    return torch.sum(values > tolerance, dim=-1)


def linalg_matrix_rank_float(
    input: torch.Tensor, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False
) -> torch.Tensor:
    aten.linalg_matrix_rank.atol_rtol_float(_meta(input), atol=atol, rtol=rtol, hermitian=hermitian)
    return linalg_matrix_rank_tensor(
        input, atol=_tolerance(input, atol), rtol=_tolerance(input, rtol), hermitian=hermitian
    )


def linalg_matrix_rank_tol(input: torch.Tensor, tol: float, hermitian: bool = False) -> torch.Tensor:
    """``torch.linalg.matrix_rank(A, tol=float)``: tol is the absolute tolerance, rtol is 0."""
    return linalg_matrix_rank_float(input, atol=tol, rtol=0.0, hermitian=hermitian)


KERNELS = {
    aten.linalg_pinv.atol_rtol_float: linalg_pinv_float,
    aten.linalg_pinv.rcond_tensor: linalg_pinv_rcond,
    aten.linalg_matrix_rank.atol_rtol_tensor: linalg_matrix_rank_tensor,
    aten.linalg_matrix_rank.atol_rtol_float: linalg_matrix_rank_float,
    aten.linalg_matrix_rank.default: linalg_matrix_rank_tol,
}
