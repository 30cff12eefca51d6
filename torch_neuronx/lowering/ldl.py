"""``torch.linalg.ldl_factor`` and ``ldl_solve``: LAPACK's Bunch-Kaufman factorization.

The CPU's kernel is LAPACK's ``ssytrf`` with ``uplo='L'``, which for matrices under its block size
(64) is the unblocked ``ssytf2``: at each column it picks a 1x1 or a 2x2 pivot by the Bunch-Kaufman
test (``alpha = (1 + sqrt(17)) / 8``), swaps a row and column of the trailing matrix into place,
and updates that matrix. :func:`_factor` follows ``ssytf2`` operation for operation, so its ``LD``
and pivots are the CPU's to the bit (checked against it on random symmetric matrices up to 40x40,
zero pivots included); larger matrices are blocked on the CPU and round a little otherwise.
``ldl_solve`` is ``ssytrs``: the pivots' interchanges and the factors applied column by column.
Complex matrices take ``csytf2``/``csytrs`` (pivot magnitudes by ``CABS1``, ``|re| + |im|``) or,
``hermitian=True``, ``chetf2``/``chetrs`` (real diagonal, conjugated updates).

The trailing matrix is kept whole (both triangles, exactly symmetric: every update is computed on the
lower triangle as LAPACK computes it and mirrored), so an interchange is one symmetric permutation
of the trailing rows and columns; the finished columns of L are never permuted, as in LAPACK.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.factorization import _check_info
from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten

#: Bunch-Kaufman's growth bound (LAPACK's ``ALPHA``).
_ALPHA = (1 + math.sqrt(17.0)) / 8


def _first_largest(values: jax.Array, candidates: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(index, value) of BLAS ``isamax`` over ``values`` where ``candidates`` holds: the first
    largest, NaNs never larger (a NaN in the first place is kept, as ``isamax`` starts from it)."""
    first = jnp.argmax(candidates)
    masked = jnp.where(candidates & ~jnp.isnan(values), values, -jnp.inf)
    index = jnp.where(jnp.isnan(values[first]), first, jnp.argmax(masked))
    return index, jnp.where(candidates.any(), values[index], 0)


def _magnitude(x: jax.Array) -> jax.Array:
    """LAPACK's pivot magnitude: ``|x|`` for reals, ``CABS1`` (``|re| + |im|``) for complex numbers."""
    return jnp.abs(x.real) + jnp.abs(x.imag) if jnp.iscomplexobj(x) else jnp.abs(x)


def _factor(a: jax.Array, hermitian: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``?sytf2`` (``?hetf2`` with ``hermitian``), lower, of one matrix, from its lower triangle:
    (LD, 1-based LAPACK pivots (int32, a 2x2 block's two entries both ``-p``), info (the first
    zero pivot's 1-based column, else 0))."""
    n = a.shape[-1]
    dtype = a.dtype
    real_dtype = jnp.finfo(dtype).dtype
    alpha = jnp.asarray(_ALPHA, real_dtype)
    hermitian = hermitian and jnp.iscomplexobj(a)
    conj = jnp.conj if hermitian else (lambda x: x)
    index = jnp.arange(n)
    rows, cols = index[:, None], index[None, :]
    lower = rows >= cols
    diagonal = rows == cols

    def whole(work: jax.Array, start: jax.Array) -> jax.Array:
        """The trailing matrix from ``start`` on made whole from its lower triangle (a Hermitian
        one's diagonal real, as ?hetf2 reads it)."""
        trailing = (rows >= start) & (cols >= start)
        work = jnp.where(trailing & ~lower, conj(work.T), work)
        return jnp.where(trailing & diagonal, work.real.astype(dtype), work) if hermitian else work

    def diagonal_magnitude(x):
        return jnp.abs(x.real) if hermitian else _magnitude(x)

    def step(state):
        work, pivots, info, k = state
        column = _magnitude(work[:, k])
        absakk = diagonal_magnitude(work[k, k])
        imax, colmax = _first_largest(column, index > k)
        zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
        row = _magnitude(work[imax, :])  # the trailing matrix is whole: row imax holds column imax too
        rowmax = jnp.max(jnp.where((index >= k) & (index != imax), row, -jnp.inf))
        keep = absakk >= alpha * colmax
        keep |= absakk >= alpha * colmax * (colmax / rowmax)
        take_imax = ~keep & (diagonal_magnitude(work[imax, imax]) >= alpha * rowmax)
        two = ~zero & ~keep & ~take_imax
        kstep = jnp.where(two, 2, 1).astype(jnp.int32)
        kp = jnp.where(zero | keep, k, imax).astype(jnp.int32)
        kk = k + kstep - 1
        # The interchange of kk and kp: a symmetric permutation of the trailing rows and columns.
        swap = jnp.where(index == kk, kp, jnp.where(index == kp, kk, index))
        work = jnp.where((rows >= k) & (cols >= k), work[swap][:, swap], work)

        # 1x1 pivot: ?syr's/?her's A := A - x * (d11 * x)' on the lower trailing part, x := d11 * x.
        pivot = work[k, k].real if hermitian else work[k, k]
        d11 = 1 / pivot
        x = jnp.where(index > k, work[:, k], 0)
        temp = -d11 * conj(x)
        one = jnp.where((rows > k) & (cols > k) & lower, work + x[:, None] * temp[None, :], work)
        one = jnp.where((rows > k) & (cols == k), work * d11, one)

        # 2x2 pivot at (k, k + 1): the explicit update of columns j >= k + 2, LAPACK's expressions.
        k1 = jnp.minimum(k + 1, n - 1)
        ck, ck1 = work[:, k], work[:, k1]
        if hermitian:
            d = jnp.hypot(work[k1, k].real, work[k1, k].imag)
            e11 = work[k1, k1].real / d
            e22 = work[k, k].real / d
            tt = jax.lax.optimization_barrier(1 / (e11 * e22 - 1))
            d21 = work[k1, k] / d
            d = tt / d
            wk = d * (e11 * ck - d21 * ck1)
            wkp1 = d * (e22 * ck1 - jnp.conj(d21) * ck)
        else:
            d21 = work[k1, k]
            e11 = work[k1, k1] / d21
            e22 = work[k, k] / d21
            # The barrier keeps XLA from folding (1 / u) / d21 into 1 / (u * d21), which rounds otherwise.
            t = jax.lax.optimization_barrier(1 / (e11 * e22 - 1))
            d = t / d21
            wk = d * (e11 * ck - ck1)
            wkp1 = d * (e22 * ck1 - ck)
        below = index >= k + 2
        block = below[:, None] & below[None, :] & lower
        two_work = jnp.where(block, work - ck[:, None] * conj(wk)[None, :] - ck1[:, None] * conj(wkp1)[None, :], work)
        two_work = jnp.where(below[:, None] & (cols == k), wk[:, None], two_work)
        two_work = jnp.where(below[:, None] & (cols == k1), wkp1[:, None], two_work)

        updated = jnp.where(zero, work, jnp.where(two, two_work, one))
        work = whole(updated, k + kstep)
        pivots = jnp.where(index == k, jnp.where(two, -(kp + 1), kp + 1), pivots)
        pivots = jnp.where(two & (index == k + 1), -(kp + 1), pivots)
        info = jnp.where((info == 0) & zero, k + 1, info).astype(jnp.int32)
        return work, pivots.astype(jnp.int32), info, k + kstep

    state = (whole(a, 0), jnp.zeros(n, jnp.int32), jnp.int32(0), jnp.int32(0))
    work, pivots, info, _ = jax.lax.while_loop(lambda s: s[3] < n, step, state)
    return jnp.tril(work), pivots, info


def _solve(ld: jax.Array, pivots: jax.Array, b: jax.Array, hermitian: bool) -> jax.Array:
    """``?sytrs`` (``?hetrs`` with ``hermitian``), lower, for one factorization and its
    right-hand sides ``b`` (n, k)."""
    n = ld.shape[-1]
    hermitian = hermitian and jnp.iscomplexobj(ld)
    conj = jnp.conj if hermitian else (lambda x: x)
    index = jnp.arange(n)

    def swap_rows(x, i, j):
        order = jnp.where(index == i, j, jnp.where(index == j, i, index))
        return x[order]

    def forward(state):  # L D y = P b, column by column
        x, k = state
        two = pivots[k] < 0
        kp = jnp.where(two, -pivots[k], pivots[k]) - 1
        k1 = jnp.minimum(k + 1, n - 1)
        x = swap_rows(x, jnp.where(two, k1, k), kp)
        # 1x1: x[k+1:] -= L[k+1:, k] x[k]; x[k] /= D[k, k]
        one = jnp.where((index > k)[:, None], x - ld[:, k, None] * x[k][None, :], x)
        pivot = ld[k, k].real if hermitian else ld[k, k]
        one = jnp.where((index == k)[:, None], x * (1 / pivot) if hermitian else x / pivot, one)
        # 2x2: x[k+2:] -= L[k+2:, k] x[k] + L[k+2:, k+1] x[k+1]; then the 2x2 block's solve
        below = (index >= k + 2)[:, None]
        two_x = jnp.where(below, x - ld[:, k, None] * x[k][None, :] - ld[:, k1, None] * x[k1][None, :], x)
        akm1k = ld[k1, k]
        akm1 = ld[k, k] / conj(akm1k)
        ak = ld[k1, k1] / akm1k
        denom = akm1 * ak - 1
        bkm1 = two_x[k] / conj(akm1k)
        bk = two_x[k1] / akm1k
        two_x = jnp.where((index == k)[:, None], ((ak * bkm1 - bk) / denom)[None, :], two_x)
        two_x = jnp.where((index == k1)[:, None], ((akm1 * bk - bkm1) / denom)[None, :], two_x)
        return jnp.where(two, two_x, one), (k + jnp.where(two, 2, 1)).astype(jnp.int32)

    def backward(state):  # L' P' x = y, from the last column
        x, k = state
        two = pivots[k] < 0
        kp = jnp.where(two, -pivots[k], pivots[k]) - 1
        km1 = jnp.maximum(k - 1, 0)
        below = (index > k)[:, None]
        x = jnp.where((index == k)[:, None], x - jnp.sum(jnp.where(below, conj(ld[:, k, None]) * x, 0), 0), x)
        previous = x - jnp.sum(jnp.where(below, conj(ld[:, km1, None]) * x, 0), 0)
        x = jnp.where(two & (index == km1)[:, None], previous, x)
        x = swap_rows(x, k, kp)
        return x, (k - jnp.where(two, 2, 1)).astype(jnp.int32)

    y, _ = jax.lax.while_loop(lambda s: s[1] < n, forward, (b, jnp.int32(0)))
    x, _ = jax.lax.while_loop(lambda s: s[1] >= 0, backward, (y, jnp.int32(n - 1)))
    return x


def _batched(fn, *arrays: jax.Array, core_dims: int = 2):
    """``fn`` over the leading batch dimensions of ``arrays`` (each with ``core_dims`` trailing)."""
    batch = arrays[0].shape[: arrays[0].ndim - core_dims]
    for _ in batch:
        fn = jax.vmap(fn)
    return fn(*arrays)


#: PyTorch's own check of ``ldl_factor``'s info fails an internal assertion ("torch.linalg.ldl_factor:
#: Unknown error code: 1. ... please report a bug to PyTorch", CPU and CUDA alike: its
#: ``_linalg_check_errors`` has no message for ``?sytrf``). LAPACK's meaning of that info, in words.
_SINGULAR = (
    "{name}: The factorization was completed, but its block diagonal matrix D is exactly singular: "
    "its diagonal element {{detail}} is zero, so it cannot be used to solve a system of equations."
)


def _ldl_factor(a: jax.Array, hermitian: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    if a.shape[-1] == 0:
        batch = a.shape[:-2]
        return a, jnp.zeros((*batch, 0), jnp.int32), jnp.zeros(batch, jnp.int32)
    return _batched(lambda matrix: _factor(matrix, hermitian), a)


@lowering(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False):
    """torch.linalg.ldl_factor_ex: the lower triangle's Bunch-Kaufman factorization (``hermitian``
    matters for complex matrices only). ``check_errors`` raises :data:`_SINGULAR` where a D is
    singular (torch.linalg.LinAlgError, a RuntimeError, as PyTorch's assertion is); ``ldl_factor``
    is this with the check (eager/composites.py)."""
    ld, pivots, info = _ldl_factor(self, hermitian)
    if check_errors:
        _check_info(info, _SINGULAR.format(name="torch.linalg.ldl_factor"))
    return ld, pivots, info


@lowering(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(LD, pivots, B, *, hermitian=False):
    """torch.linalg.ldl_solve: ``?sytrs``/``?hetrs`` with the factorization's pivots."""
    batch = jnp.broadcast_shapes(LD.shape[:-2], pivots.shape[:-1], B.shape[:-2])
    n = LD.shape[-1]
    dtype = jnp.result_type(LD, B)
    LD = jnp.broadcast_to(LD, (*batch, n, n)).astype(dtype)
    pivots = jnp.broadcast_to(pivots, (*batch, n))
    B = jnp.broadcast_to(B, (*batch, *B.shape[-2:])).astype(dtype)
    if n == 0 or B.shape[-1] == 0:
        return B
    return _batched(lambda ld, p, b: _solve(ld, p, b, hermitian), LD, pivots, B)
