"""Dense linear algebra beyond products: factorizations (LU, QR, Cholesky, SVD, eigh, eig), solvers,
inverses, determinants and the matrix exponential (``torch.linalg``).

Results follow LAPACK's conventions, as PyTorch's CPU kernels do (JAX's CPU lowerings call the same
LAPACK routines): LU pivots are 1-based row swaps (``getrf``), QR and Householder results are
``geqrf``'s, eigenvalues of ``eigh`` ascend and singular values descend. Singular and eigenvectors
are unique only up to sign (phase); the OpInfos compare them through ``output_process_fn_grad``
(``abs`` or products), as PyTorch's own device tests do.

The ``_ex`` variants return LAPACK's ``info`` (0, or the 1-based index where the factorization
failed) and raise nothing unless ``check_errors=True``; then, and for the forms that always check
(``cholesky``, ``cholesky_inverse``, ``_linalg_svd``), a failure raises at the op with the message
and exception type of ``torch._linalg_check_errors``: a synchronous device check, since CUDA checks
``info`` on the host after copying it back.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import Promotion, lowering
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten

LinAlgError = torch.linalg.LinAlgError


def _mT(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, -1, -2)


def _mH(x: jax.Array) -> jax.Array:
    return jnp.conj(_mT(x))


def _empty(like: jax.Array) -> jax.Array:
    """The 0-element tensor PyTorch returns for an output it was asked not to compute."""
    return jnp.zeros((0,), like.dtype)


def _eye_like(a: jax.Array, n: int) -> jax.Array:
    return jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), (*a.shape[:-2], n, n))


def _first_index(failed: jax.Array) -> jax.Array:
    """LAPACK's ``info`` over the last axis: the 1-based index of the first True, else 0 (int32)."""
    if failed.shape[-1] == 0:
        return jnp.zeros(failed.shape[:-1], jnp.int32)
    return jnp.where(jnp.any(failed, axis=-1), jnp.argmax(failed, axis=-1) + 1, 0).astype(jnp.int32)


def _check_info(info: jax.Array, message: str, error: type[Exception] = LinAlgError) -> None:
    """Raises ``message`` (``{detail}`` is the first nonzero info) at the op when any info is
    nonzero, as ``torch._linalg_check_errors`` does on the host (CUDA's waits for the op). For a
    batch (``info`` of one dimension or more) the message names the first failing matrix after the
    op's name, as ATen's does: "linalg.inv: (Batch element 2): The diagonal element 3 is zero ..."."""
    flat = info.reshape(-1)
    index = jnp.argmax(flat != 0) if flat.size else jnp.int64(0)
    first = flat[index] if flat.size else jnp.int32(0)
    detail = first
    if info.ndim:
        name, rest = message.split(": ", 1)
        message = f"{name}: (Batch element {{batch}}): {rest.replace('{detail}', '{info}')}"
        detail = index.astype(jnp.int64) * 2**32 + first.astype(jnp.int64)
    device_check(jnp.any(flat != 0), detail, message, error, synchronous=True)


def _check_finite(a: jax.Array, message: str, error: type[Exception]) -> None:
    """Raises ``message`` at the op when ``a`` holds a NaN or an infinity (LAPACK's non-convergence
    check, made on the host on CUDA too)."""
    device_check(~jnp.all(jnp.isfinite(a)), 0, message, error, synchronous=True)


# --------------------------------------------------------------------------------------- LU


def _lu(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(LU, 1-based int32 pivots, permutation, info) of ``getrf`` with partial pivoting: rows
    ``permutation`` of ``a`` equal L @ U; info is the first zero diagonal element of U (1-based)."""
    k = min(a.shape[-2], a.shape[-1])
    if a.size == 0:
        perm = jnp.broadcast_to(jnp.arange(a.shape[-2], dtype=jnp.int32), (*a.shape[:-2], a.shape[-2]))
        return a, perm[..., :k] + 1, perm, jnp.zeros(a.shape[:-2], jnp.int32)
    lu, pivots, perm = jax.lax.linalg.lu(a)
    info = _first_index(jnp.diagonal(lu, axis1=-2, axis2=-1)[..., :k] == 0)
    return lu, pivots.astype(jnp.int32) + 1, perm, info


def _check_pivot(pivot: bool, name: str) -> None:
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU (nor on neuron)")


def _unpack(lu: jax.Array) -> tuple[jax.Array, jax.Array]:
    """L (m x k, unit lower) and U (k x n, upper) of a packed LU."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    upper = jnp.triu(lu[..., :k, :])
    return lower, upper


def _permutation_matrix(perm: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """P with A = P @ L @ U when rows ``perm`` of A equal L @ U: P[perm[i], i] = 1."""
    m = perm.shape[-1]
    return _mT(jax.nn.one_hot(perm, m, dtype=dtype))


def _pivots_to_permutation(pivots: jax.Array, m: int) -> jax.Array:
    if pivots.shape[-1] == 0:
        return jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), (*pivots.shape[:-1], m))
    return jax.lax.linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, m)


@lowering(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    """torch.linalg.lu_factor_ex: packed LU, 1-based pivots, info = first zero diagonal of U."""
    _check_pivot(pivot, "linalg.lu_factor")
    lu, pivots, _, info = _lu(A)
    if check_errors:
        _check_info(
            info,
            "torch.linalg.lu_factor_ex: U[{detail},{detail}] is zero and using it on lu_solve would result in a "
            "division by zero. If you still want to perform the factorization, consider calling "
            "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)",
            RuntimeError,
        )
    return lu, pivots, info


@lowering(aten.linalg_lu.default)
def linalg_lu(A, *, pivot=True):
    """torch.linalg.lu: P (m x m), L (m x k, unit lower), U (k x n) with A = P @ L @ U."""
    _check_pivot(pivot, "linalg.lu")
    lu, _, perm, _ = _lu(A)
    lower, upper = _unpack(lu)
    return _permutation_matrix(perm, A.dtype), lower, upper


@lowering(aten.lu_unpack.default)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """torch.lu_unpack: P, L, U from lu_factor's packed LU and 1-based pivots; outputs not
    unpacked are empty, as on the CPU.

    Raises:
        RuntimeError: ``LU_pivots`` is not of shape ``(*, min(m, n))`` with ``LU_data``'s batch
            shape ``*``. ATen's kernel (the CPU's and CUDA's) reads the pivots in that shape without
            checking it: past their end, or missing batches, which gave a permutation of garbage.
    """
    m = LU_data.shape[-2]
    if unpack_pivots:
        expected = (*LU_data.shape[:-2], min(LU_data.shape[-2:]))
        if tuple(LU_pivots.shape) != expected:
            raise RuntimeError(
                f"torch.lu_unpack: expected LU_pivots of shape {list(expected)} (LU_data's batch shape and "
                f"min(m, n)), but got {list(LU_pivots.shape)}. Pass the pivots lu_factor returned with LU_data."
            )
        perm = _pivots_to_permutation(LU_pivots, m)
        permutation = _permutation_matrix(perm, LU_data.dtype)
    else:
        permutation = _empty(LU_data)
    if unpack_data:
        lower, upper = _unpack(LU_data)
    else:
        lower, upper = _empty(LU_data), _empty(LU_data)
    return permutation, lower, upper


def _lu_solve(lu: jax.Array, perm: jax.Array, b: jax.Array, adjoint: bool) -> jax.Array:
    """X with A X = B (A^H X = B when ``adjoint``) for A's packed LU and row permutation."""
    batch = jnp.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    lu = jnp.broadcast_to(lu, (*batch, *lu.shape[-2:]))
    b = jnp.broadcast_to(b, (*batch, *b.shape[-2:]))
    perm = jnp.broadcast_to(perm, (*batch, perm.shape[-1]))
    solve = jax.lax.linalg.triangular_solve
    if not adjoint:
        pb = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        y = solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
        return solve(lu, y, left_side=True, lower=False)
    y = solve(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    z = solve(lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True, conjugate_a=True)
    inverse = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(z, inverse[..., :, None], axis=-2)


def _solve_sided(lu, perm, b, left: bool, adjoint: bool):
    """A X = B (left) or X A = B (right, solved as A^H X^H = B^H)."""
    if left:
        return _lu_solve(lu, perm, b, adjoint)
    return _mH(_lu_solve(lu, perm, _mH(b), not adjoint))


def _lu_solve_dtypes(arguments: dict) -> None:
    """The dtype checks that open ATen's linalg_lu_solve meta (BatchLinearAlgebra.cpp), before its
    shape checks and the kernel's dispatch; PyTorch's Python meta words the first otherwise."""
    lu, b, pivots = arguments["LU"], arguments["B"], arguments["pivots"]
    if not (lu.is_floating_point() or lu.is_complex()):
        raise RuntimeError(
            f"torch.linalg.lu_solve: Expected a floating point or complex tensor as input. Got {aten_name(lu.dtype)}"
        )
    if lu.dtype != b.dtype:
        raise RuntimeError(
            f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type {aten_name(lu.dtype)} "
            f"and B of type {aten_name(b.dtype)} instead"
        )
    if pivots.dtype != torch.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")


@lowering(aten.linalg_lu_solve.default, dtype_rule=_lu_solve_dtypes, rule_first=True)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """torch.linalg.lu_solve: solves with lu_factor's packed LU; batch dimensions broadcast."""
    perm = _pivots_to_permutation(pivots, LU.shape[-1])
    return _solve_sided(LU, perm, B, left, adjoint)


@lowering(aten.linalg_inv_ex.default)
def linalg_inv_ex(A, *, check_errors=False):
    """torch.linalg.inv_ex: inverse through LU; info = first zero diagonal element of U."""
    lu, _, perm, info = _lu(A)
    if check_errors:
        _check_info(
            info,
            "linalg.inv_ex: The diagonal element {detail} is zero, the inversion could not be completed because "
            "the input matrix is singular.",
        )
    return _lu_solve(lu, perm, _eye_like(A, A.shape[-1]), False), info


def _is_vector_rhs(A: jax.Array, B: jax.Array) -> bool:
    """PyTorch's ``linalg_solve_is_vector_rhs``: B is a (batch of) vector(s)."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


@lowering(aten._linalg_solve_ex.default)
def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    """torch.linalg.solve_ex: X with A X = B (X A = B when not ``left``), the LU of A, its pivots
    and info; B may be a (batch of) vector(s), batch dimensions broadcast."""
    vector = _is_vector_rhs(A, B)
    rhs = B[..., :, None] if vector and left else B[..., None, :] if vector else B
    lu, pivots, perm, info = _lu(A)
    if check_errors:
        _check_info(info, "torch.linalg.solve_ex: The solver failed because the input matrix is singular.")
    x = _solve_sided(lu, perm, rhs, left, False)
    x = x[..., 0] if vector and left else x[..., 0, :] if vector else x
    return x, lu, pivots, info


# --------------------------------------------------------------------------------- Cholesky


def _cholesky_info(a: jax.Array) -> jax.Array:
    """``potrf``'s info: the order of the first leading minor that is not positive-definite, from an
    unblocked right-looking factorization (a pivot that is not > 0, NaN included, fails)."""
    n = a.shape[-1]

    def step(j, carry):
        work, info = carry
        pivot = jnp.real(work[..., j, j])
        failed = ~(pivot > 0)
        info = jnp.where((info == 0) & failed, j + 1, info)
        column = work[..., :, j] / jnp.sqrt(jnp.where(failed, 1, pivot)).astype(work.dtype)[..., None]
        column = jnp.where(jnp.arange(n) > j, column, 0)
        work = work - column[..., :, None] * jnp.conj(column)[..., None, :]
        return work, info

    _, info = jax.lax.fori_loop(0, n, step, (jnp.tril(a) + _mH(jnp.tril(a, -1)), jnp.zeros(a.shape[:-2], jnp.int32)))
    return info


def _cholesky(a: jax.Array, upper: bool) -> tuple[jax.Array, jax.Array]:
    """(factor, info) reading only the lower (``upper``: upper) triangle of ``a``. When info > 0 the
    factor is NaN (LAPACK leaves a partial factorization there; PyTorch does not specify it)."""
    lower_input = _mH(a) if upper else a
    if a.size == 0:
        return a, jnp.zeros(a.shape[:-2], jnp.int32)
    factor = jax.lax.linalg.cholesky(lower_input, symmetrize_input=False)
    ok = jnp.all(jnp.isfinite(factor))
    info = jax.lax.cond(ok, lambda x: jnp.zeros(x.shape[:-2], jnp.int32), _cholesky_info, lower_input)
    return (_mH(factor) if upper else factor), info


_NOT_PD = (
    "{name}: The factorization could not be completed because the input is not positive-definite (the leading minor "
    "of order {{detail}} is not positive-definite)."
)


@lowering(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(A, *, upper=False, check_errors=False):
    """torch.linalg.cholesky_ex: L (U = L^H when ``upper``) and info = order of the first leading
    minor that is not positive-definite."""
    factor, info = _cholesky(A, upper)
    if check_errors:
        _check_info(info, _NOT_PD.format(name="linalg.cholesky_ex"))
    return factor, info


@lowering(aten.cholesky.default)
def cholesky(self, upper=False):
    """torch.cholesky (deprecated): the factor; raises LinAlgError for a matrix that is not
    positive-definite."""
    factor, info = _cholesky(self, upper)
    _check_info(info, _NOT_PD.format(name="cholesky"))
    return factor


def _cholesky_solve(factor: jax.Array, b: jax.Array, upper: bool) -> jax.Array:
    lower = _mH(factor) if upper else factor
    solve = jax.lax.linalg.triangular_solve
    y = solve(lower, b, left_side=True, lower=True)
    return solve(lower, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)


@lowering(aten._cholesky_solve_helper.default)
def cholesky_solve_helper(self, A, upper):
    """torch.cholesky_solve (batch dimensions already broadcast): X with (L L^H) X = self for the
    Cholesky factor A."""
    return _cholesky_solve(A, self, upper)


@lowering(aten.cholesky_inverse.default)
def cholesky_inverse(self, upper=False):
    """torch.cholesky_inverse: (L L^H)^-1 from the factor L (U^H U from U when ``upper``); a zero
    diagonal element raises LinAlgError, as LAPACK's ``potri`` reports."""
    n = self.shape[-1]
    _check_info(
        _first_index(jnp.diagonal(self, axis1=-2, axis2=-1) == 0),
        "cholesky_inverse: The diagonal element {detail} is zero, the inversion could not be completed because "
        "the input matrix is singular.",
    )
    return _cholesky_solve(self, _eye_like(self, n), upper)


# -------------------------------------------------------------------------- determinants


def _lu_determinant_parts(A: jax.Array, meta: torch.Tensor):
    """(LU, pivots, diagonal of U, sign of the permutation) of A, or of A^T when A is a contiguous
    real matrix: PyTorch's ``_linalg_det``/``_linalg_slogdet`` factor the transpose then (it is
    F-contiguous, and det(A^T) = det(A)), and their backward solves with ``adjoint=False`` for that
    layout."""
    lu, pivots, _, _ = _lu(_mT(A) if meta.is_contiguous() and not meta.is_complex() else A)
    n = A.shape[-1]
    swaps = jnp.sum(pivots != jnp.arange(1, n + 1, dtype=jnp.int32), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(A.dtype)
    return lu, pivots, jnp.diagonal(lu, axis1=-2, axis2=-1), parity


@lowering(aten._linalg_det.default, metas=True)
def linalg_det(A, *, metas):
    """torch.linalg.det: product of U's diagonal times the permutation's sign; also LU and pivots
    (saved for the gradient)."""
    lu, pivots, diagonal, parity = _lu_determinant_parts(A, metas[0])
    return parity * jnp.prod(diagonal, axis=-1), lu, pivots


@lowering(aten._linalg_slogdet.default, metas=True)
def linalg_slogdet(A, *, metas):
    """torch.linalg.slogdet: sign (a unit complex number for complex input; 0 for a singular
    matrix) and log|det| (-inf for a singular matrix), with LU and pivots."""
    lu, pivots, diagonal, parity = _lu_determinant_parts(A, metas[0])
    magnitude = jnp.abs(diagonal)
    unit = jnp.where(magnitude == 0, 0, diagonal / jnp.where(magnitude == 0, 1, magnitude).astype(diagonal.dtype))
    sign = parity * jnp.prod(unit, axis=-1)
    return sign, jnp.sum(jnp.log(magnitude), axis=-1), lu, pivots


# ------------------------------------------------------------------------ triangular solves


@lowering(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    """torch.linalg.solve_triangular: X with A X = B (X A = B when not ``left``) reading one
    triangle of A; batch dimensions broadcast. B is read in A's dtype, the result's (ATen copies B
    into a result made with A's options: a float32 A with a bfloat16 or int B computes)."""
    batch = jnp.broadcast_shapes(self.shape[:-2], B.shape[:-2])
    a = jnp.broadcast_to(self, (*batch, *self.shape[-2:]))
    b = jnp.broadcast_to(B.astype(self.dtype), (*batch, *B.shape[-2:]))
    return jax.lax.linalg.triangular_solve(a, b, left_side=left, lower=not upper, unit_diagonal=unitriangular)


@lowering(aten.triangular_solve.default)
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (deprecated): X with op(A) X = self, op = transpose (not conjugate)
    when ``transpose``; also returns A broadcast to the batch shape."""
    batch = jnp.broadcast_shapes(self.shape[:-2], A.shape[:-2])
    a = jnp.broadcast_to(A, (*batch, *A.shape[-2:]))
    b = jnp.broadcast_to(self, (*batch, *self.shape[-2:]))
    x = jax.lax.linalg.triangular_solve(
        a, b, left_side=True, lower=not upper, transpose_a=transpose, unit_diagonal=unitriangular
    )
    return x, a


# ------------------------------------------------------------------------------ QR


@lowering(aten.linalg_qr.default)
def linalg_qr(A, mode="reduced"):
    """torch.linalg.qr: Q and R of ``geqrf``/``orgqr`` (mode 'reduced', 'complete'; 'r' returns an
    empty Q)."""
    if mode == "r":
        return _empty(A), jnp.linalg.qr(A, mode="r")
    return jnp.linalg.qr(A, mode=mode)


@lowering(aten.geqrf.default)
def geqrf(self):
    """torch.geqrf (LAPACK ``geqrf``): R above the diagonal, the Householder vectors below it, and
    their scales tau."""
    reflectors, tau = jnp.linalg.qr(self, mode="raw")
    return _mT(reflectors), tau


@lowering(aten.linalg_householder_product.default)
def linalg_householder_product(input, tau):
    """torch.linalg.householder_product (``orgqr``): the first n columns of H_1 ... H_k."""
    return jax.lax.linalg.householder_product(input, tau)


@lowering(aten.ormqr.default)
def ormqr(self, input2, input3, left=True, transpose=False):
    """torch.ormqr: Q @ C, Q^H @ C (``transpose``), C @ Q or C @ Q^H, with Q = H_1 ... H_k given
    by geqrf's reflectors ``self`` and scales ``input2``; batch dimensions broadcast."""
    batch = jnp.broadcast_shapes(self.shape[:-2], input2.shape[:-1], input3.shape[:-2])
    a = jnp.broadcast_to(self, (*batch, *self.shape[-2:]))
    tau = jnp.broadcast_to(input2, (*batch, input2.shape[-1]))
    c = jnp.broadcast_to(input3, (*batch, *input3.shape[-2:]))
    return jax.lax.linalg.ormqr(a, tau, c, left=left, transpose=transpose)


# --------------------------------------------------------------------------- SVD and eigen


_SVD_NOT_FINITE = "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values."


def _singular_values(A: jax.Array) -> jax.Array:
    """The singular values of a non-empty (batch of) matrix, descending. A rectangular matrix is
    first reduced to its square triangular factor (``A = QR`` when tall, ``A^H = QR`` when wide),
    whose singular values are A's, as LAPACK's ``gesdd`` does for such shapes: XLA's CPU kernel
    without vectors sized its workspace by the long side squared (4 TiB for a 3 x 2**20 matrix,
    upstream test_svd_memory_allocation)."""
    m, n = A.shape[-2:]
    if m != n:
        tall = A if m > n else jnp.conj(jnp.swapaxes(A, -1, -2))
        A = jnp.linalg.qr(tall, mode="r")
    return jnp.linalg.svd(A, compute_uv=False)


@lowering(aten._linalg_svd.default)
def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    """torch.linalg.svd: U, S (descending, real), Vh; U and Vh are empty without ``compute_uv``.
    Non-finite input raises LinAlgError as LAPACK's ``gesdd`` (info -4) makes the CPU raise."""
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        )
    _check_finite(A, _SVD_NOT_FINITE, LinAlgError)
    m, n = A.shape[-2:]
    if not compute_uv:
        if A.size == 0:
            return _empty(A), jnp.zeros((*A.shape[:-2], min(m, n)), jnp.real(A).dtype), _empty(A)
        return _empty(A), _singular_values(A), _empty(A)
    if A.size == 0:
        k = min(m, n)
        rows, cols = (m, n) if full_matrices else (k, k)
        values = jnp.zeros((*A.shape[:-2], k), jnp.real(A).dtype)
        return _eye_like(A, m)[..., :, :rows], values, _eye_like(A, n)[..., :cols, :]
    return jnp.linalg.svd(A, full_matrices=full_matrices)


@lowering(aten._linalg_eigh.default)
def linalg_eigh(A, UPLO="L", compute_v=True):
    """torch.linalg.eigh: ascending real eigenvalues and orthonormal eigenvectors of the Hermitian
    matrix held in the ``UPLO`` triangle of A (the other triangle is not read; ATen reads UPLO's
    first letter in either case, so "l" is the lower triangle)."""
    if A.size == 0:
        values = jnp.zeros(A.shape[:-1], jnp.real(A).dtype)
        return values, (A if compute_v else _empty(A))
    vectors, values = jax.lax.linalg.eigh(A, lower=UPLO.upper() == "L", symmetrize_input=False)
    return values, (vectors if compute_v else _empty(A))


_EIG_NOT_FINITE = "torch.linalg.eig: input tensor should not contain infs or NaNs."


def _eig(A: jax.Array, vectors: bool):
    _check_finite(A, _EIG_NOT_FINITE, RuntimeError)
    complex_dtype = jnp.result_type(A.dtype, jnp.complex64)
    if A.size == 0:
        return jnp.zeros(A.shape[:-1], complex_dtype), A.astype(complex_dtype)
    return jax.lax.linalg.eig(A, compute_left_eigenvectors=False, compute_right_eigenvectors=vectors)


@lowering(aten.linalg_eig.default)
def linalg_eig(self):
    """torch.linalg.eig (``geev``): complex eigenvalues and unit-norm right eigenvectors; non-finite
    input raises RuntimeError as on the CPU."""
    values, vectors = _eig(self, True)
    return values, vectors


@lowering(aten._linalg_eigvals.default)
def linalg_eigvals(self):
    """torch.linalg.eigvals: the eigenvalues of linalg.eig."""
    return _eig(self, False)[0]


# ----------------------------------------------------------------------------- functions


#: The largest 1-norm at which each Taylor degree (1, 2, 4, 8, 12, 18) meets the dtype's unit
#: roundoff: ATen's ``mexp`` (Bader, Blanes, Casas, "Computing the Matrix Exponential with an
#: Optimized Taylor Polynomial Approximation", Mathematics 7 (2019) 1174, table 1).
_MATRIX_EXP_THETAS = {
    jnp.dtype(jnp.float32): (
        1.192092800768788e-07,
        5.978858893805233e-04,
        5.116619363445086e-02,
        5.800524627688768e-01,
        1.461661507209034e00,
        3.010066362817634e00,
    ),
    jnp.dtype(jnp.float64): (
        2.220446049250313e-16,
        2.580956802971767e-08,
        3.397168839976962e-04,
        4.991228871115323e-02,
        2.996158913811580e-01,
        1.090863719290036e00,
    ),
}

#: The coefficients of the degree-12 and degree-18 evaluations (Bader et al., section 3), each row
#: a linear combination of {I, A, A^2, A^3} or {I, A, A^2, A^3, A^6}, as ATen's compute_T12/T18.
_T12 = (
    (9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
    (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
    (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
    (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359),
)
_T18 = (
    (0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
    (
        0.0,
        3.97849749499645077844e-01,
        1.36783778460411720168e00,
        4.98289622525382669416e-01,
        -6.37898194594723280150e-04,
    ),
    (
        -1.09676396052962061844e01,
        1.68015813878906206114e00,
        5.71779846478865511061e-02,
        -6.98210122488052056106e-03,
        3.34975017086070470649e-05,
    ),
    (
        -9.04316832390810593223e-02,
        -6.76404519071381882256e-02,
        6.75961301770459654925e-02,
        2.95552570429315521194e-02,
        -1.39180257516060693404e-05,
    ),
    (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05),
)


def _matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _powers(a: jax.Array, count: int) -> list[jax.Array]:
    """The first ``count`` of I, A, A^2, A^3, A^6, formed as ATen's ``_fill_matrix_powers``."""
    powers = [_eye_like(a, a.shape[-1]), a]
    if count > 2:
        powers.append(_matmul(a, a))
    if count > 3:
        powers.append(_matmul(a, powers[2]))
    if count > 4:
        powers.append(_matmul(powers[3], powers[3]))
    return powers[:count]


def _combination(terms: list[jax.Array], coefficients) -> jax.Array:
    """sum_j coefficients[j] * terms[j], the coefficients rounded to the terms' real dtype and
    summed in order, as ATen's ``_compute_linear_combination``."""
    real = jnp.real(terms[0]).dtype
    total = jnp.zeros_like(terms[0])
    for term, coefficient in zip(terms, coefficients, strict=True):
        total = total + jnp.asarray(coefficient, real) * term
    return total


def _taylor_1(a):
    return sum(_powers(a, 2))


def _taylor_2(a):
    identity, a, a2 = _powers(a, 3)
    return identity + a + a2 / 2


def _taylor_4(a):
    powers = _powers(a, 3)
    tail = _matmul(powers[2], _combination(powers, (1 / 2.0, 1 / 6.0, 1 / 24.0)))
    return _combination([*powers, tail], (1.0, 1.0, 0.0, 1.0))


def _taylor_8(a):
    # ATen's constants are scalar_t, each rounded on its own before it enters the next.
    real = jnp.real(a).dtype.type
    sqrt_177 = float(real(0.1330413469565007072504e2))
    x3 = float(real(2.0 / 3.0))
    x1 = x3 * ((1.0 + sqrt_177) / 88.0)
    x2 = x3 * ((1.0 + sqrt_177) / 352.0)
    x4 = (-271.0 + 29.0 * sqrt_177) / (315.0 * x3)
    x5 = (-11.0 + 11.0 * sqrt_177) / (1260.0 * x3)
    x6 = (-99.0 + 11.0 * sqrt_177) / (5040.0 * x3)
    x7 = (89.0 - sqrt_177) / (5040.0 * x3)
    y2 = (857.0 - 58.0 * sqrt_177) / 630.0
    powers = _powers(a, 3)
    a4 = _matmul(powers[2], _combination(powers[1:], (x1, x2)))
    a8 = _matmul(_combination([powers[2], a4], (x3, 1.0)), _combination([*powers, a4], (x4, x5, x6, x7)))
    return _combination([*powers, a4, a8], (1.0, 1.0, y2, 0.0, 1.0))


def _taylor_12(a):
    powers = _powers(a, 4)
    b = [_combination(powers, row) for row in _T12]
    b2 = b[2] + _matmul(b[3], b[3])
    return b[0] + _matmul(b[1] + b2, b2)


def _taylor_18(a):
    powers = _powers(a, 5)
    b = [_combination(powers, row) for row in _T18]
    a9 = b[3] + _matmul(b[0], b[4])
    return b[1] + _matmul(b[2] + a9, a9)


def _taylor_18_scaled_and_squared(a: jax.Array, norm: jax.Array, theta: float) -> jax.Array:
    """exp(A) = T18(A / 2^s)^(2^s) with s = max(ceil(log2(norm / theta)), 0) per matrix."""
    squarings = jnp.maximum(jnp.ceil(jnp.log2(norm / jnp.asarray(theta, norm.dtype))), 0)
    scaled = a * jnp.exp2(-squarings)[..., None, None].astype(a.dtype)
    # A non-finite norm leaves NaN in ``scaled``; no squaring changes that.
    squarings = jnp.where(jnp.isfinite(squarings), squarings, 0).astype(jnp.int32)

    def square(state):
        step, power = state
        return step + 1, jnp.where((step < squarings)[..., None, None], _matmul(power, power), power)

    _, result = jax.lax.while_loop(lambda state: state[0] < jnp.max(squarings), square, (0, _taylor_18(scaled)))
    return result


@lowering(aten.linalg_matrix_exp.default, promotion=Promotion.DEFAULT)
def linalg_matrix_exp(self):
    """torch.linalg.matrix_exp as ATen computes it (Bader, Blanes and Casas's optimized Taylor
    polynomials, see ``_MATRIX_EXP_THETAS``): a single matrix takes the lowest degree of 1, 2, 4, 8
    or 12 whose bound its 1-norm meets, else degree 18 with scaling and squaring, which every matrix
    of a batch takes; a NaN norm gives NaN. A 1 x 1 matrix is ``exp``. 16-bit inputs compute in
    float32 (the CPU's bfloat16/float16 kernel overflows to NaN for matrices of norm ~30)."""
    n = self.shape[-1]
    if self.size == 0:
        return self
    if n == 1:
        return jnp.exp(self)
    compute = jnp.promote_types(self.dtype, jnp.float32)
    a = self.astype(compute).reshape(-1, n, n)
    thetas = _MATRIX_EXP_THETAS[jnp.dtype(jnp.real(a).dtype)]
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
    if a.shape[0] > 1:
        result = _taylor_18_scaled_and_squared(a, norm, thetas[-1])
    else:
        # The degree whose interval (thetas[i - 1], thetas[i]] holds the norm; 5 from thetas[4] on.
        degree = jnp.sum(norm[0] > jnp.asarray(thetas[:4], norm.dtype)) + (norm[0] >= thetas[4])
        degree = jnp.where(jnp.isnan(norm[0]), 6, degree)
        result = jax.lax.switch(
            degree,
            [
                _taylor_1,
                _taylor_2,
                _taylor_4,
                _taylor_8,
                _taylor_12,
                lambda a: _taylor_18_scaled_and_squared(a, norm, thetas[-1]),
                lambda a: jnp.full_like(a, jnp.nan),
            ],
            a,
        )
    return result.reshape(self.shape).astype(self.dtype)


# ------------------------------------------------------------------ pseudo-inverse


@lowering(aten.linalg_pinv.atol_rtol_tensor)
def linalg_pinv(self, *, atol=None, rtol=None, hermitian=False):
    """torch.linalg.pinv: V diag(1/S) U^H over the singular values above max(atol, rtol * max(S))
    (eigenvalues of magnitude above it when ``hermitian``). Defaults as PyTorch's
    ``get_atol_rtol``: atol = 0; rtol = eps * max(m, n), or 0 where a given atol is positive. The
    tolerances are applied in the input's real dtype (the CPU applies them in float64)."""
    real = jnp.real(self).dtype
    m, n = self.shape[-2:]
    default_rtol = jnp.asarray(jnp.finfo(real).eps * max(m, n), real)
    if rtol is None:
        rtol = default_rtol if atol is None else jnp.where(atol > 0, 0, default_rtol)
    atol = jnp.zeros((), real) if atol is None else atol
    atol, rtol = jnp.asarray(atol).astype(real)[..., None], jnp.asarray(rtol).astype(real)[..., None]
    if self.size == 0:
        return jnp.zeros((*self.shape[:-2], n, m), self.dtype)
    highest = jax.lax.Precision.HIGHEST
    if hermitian:
        values, vectors = jnp.linalg.eigh(self, UPLO="L", symmetrize_input=False)
        magnitude = jnp.abs(values)
        tolerance = jnp.maximum(atol, rtol * jnp.max(magnitude, axis=-1, keepdims=True))
        inverse = jnp.where(magnitude > tolerance, 1 / values, 0).astype(self.dtype)
        return jnp.matmul(vectors * inverse[..., None, :], _mH(vectors), precision=highest)
    _check_finite(self, _SVD_NOT_FINITE, LinAlgError)
    u, s, vh = jnp.linalg.svd(self, full_matrices=False)
    tolerance = jnp.maximum(atol, rtol * s[..., :1])
    inverse = jnp.where(s > tolerance, 1 / s, 0).astype(self.dtype)
    return jnp.matmul(_mH(vh) * inverse[..., None, :], _mH(u), precision=highest)
