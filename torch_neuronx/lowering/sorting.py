"""Sorting and selection: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode, searchsorted,
bucketize, cummax/cummin.

Every sort is stable and orders as PyTorch's CPU kernels do: NaN sorts as the largest value (first
when descending), -0.0 and 0.0 are equal, and equal elements keep their original order (a
descending sort too). topk and kthvalue select from that order, so their values match CPU exactly;
among equal values they return the lowest indices, where PyTorch's CPU kernels return whichever
their selection algorithm leaves (PyTorch does not specify which tied index is returned).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import Promotion, lowering
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten


def _sort_last(x: jax.Array, descending: bool) -> tuple[jax.Array, jax.Array]:
    """Stable sort along the last axis: (values, int64 indices). Descending sorts the reversed input
    ascending and reverses the result, which keeps equal elements in their original order and puts
    NaN first."""
    positions = jax.lax.broadcasted_iota(jnp.int64, x.shape, x.ndim - 1)
    if descending:
        x, positions = jnp.flip(x, -1), jnp.flip(positions, -1)
    values, indices = jax.lax.sort((x, positions), dimension=x.ndim - 1, is_stable=True, num_keys=1)
    if descending:
        values, indices = jnp.flip(values, -1), jnp.flip(indices, -1)
    return values, indices


def _sort(x: jax.Array, dim: int, descending: bool) -> tuple[jax.Array, jax.Array]:
    """:func:`_sort_last` along ``dim``; a 0-dim tensor is its own sort."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    dim = dim % x.ndim
    values, indices = _sort_last(jnp.moveaxis(x, dim, -1), descending)
    return jnp.moveaxis(values, -1, dim), jnp.moveaxis(indices, -1, dim)


@lowering(aten.sort.default)
def sort(self, dim=-1, descending=False):
    """torch.sort: (values, indices) along ``dim``; NaN largest; always stable, as on CPU."""
    return _sort(self, dim, descending)


@lowering(aten.sort.stable)
def sort_stable(self, *, stable=None, dim=-1, descending=False):
    """torch.sort(stable=...): stable whatever ``stable`` says (a stable order is a valid unstable one)."""
    return _sort(self, dim, descending)


@lowering(aten.argsort.default)
def argsort(self, dim=-1, descending=False):
    """torch.argsort: the indices of :func:`sort`."""
    return _sort(self, dim, descending)[1]


@lowering(aten.argsort.stable)
def argsort_stable(self, *, stable, dim=-1, descending=False):
    """torch.argsort(stable=...): the indices of :func:`sort_stable`."""
    return _sort(self, dim, descending)[1]


@lowering(aten.msort.default)
def msort(self):
    """torch.msort: the values of a sort along dimension 0."""
    return _sort(self, 0, False)[0]


@lowering(aten.topk.default)
def topk(self, k, dim=-1, largest=True, sorted=True):
    """torch.topk: the ``k`` largest (or smallest) elements along ``dim`` with their indices, in sorted
    order (also for ``sorted=False``, whose order PyTorch leaves unspecified); NaN is the largest."""
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    values, indices = _sort(self, dim, descending=largest)
    dim = dim % self.ndim
    return jax.lax.slice_in_dim(values, 0, k, axis=dim), jax.lax.slice_in_dim(indices, 0, k, axis=dim)


def _nonempty_reduction_dim(name: str):
    """A rule (made before PyTorch's meta kernel, which checks k first or not at all): ATen's
    ``zero_numel_check_dims`` of ``median(dim)``, ``nanmedian(dim)`` and ``kthvalue``, an IndexError
    for an empty reduced dimension (the lowering returned NaN for median)."""

    def rule(arguments: dict) -> None:
        tensor, dim = arguments["self"], arguments.get("dim", -1)
        if tensor.dim() > 0 and tensor.shape[dim] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {dim % tensor.dim()} to have non-zero size.")

    return rule


@lowering(aten.kthvalue.default, dtype_rule=_nonempty_reduction_dim("kthvalue"), rule_first=True)
def kthvalue(self, k, dim=-1, keepdim=False):
    """torch.kthvalue: the k-th smallest element (1-based) along ``dim`` and its index; NaN is the
    largest."""
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    values, indices = _sort(self, dim, descending=False)
    dim = dim % self.ndim
    pick = jax.lax.index_in_dim
    return pick(values, k - 1, axis=dim, keepdims=keepdim), pick(indices, k - 1, axis=dim, keepdims=keepdim)


def _search(sequence: jax.Array, values: jax.Array, right: bool) -> jax.Array:
    """Batched binary search: for each of ``values`` (..., m), the insertion point in the sorted last
    axis of ``sequence`` (..., n), with PyTorch's CPU comparisons (lower bound: first element not
    ``< value`` by ``!(element >= value)``; upper bound: ``!(element > value)``), so NaN behaves as
    there."""
    n = sequence.shape[-1]
    low = jnp.zeros(values.shape, jnp.int64)
    high = jnp.full(values.shape, n, jnp.int64)

    def step(_, bounds):
        low, high = bounds
        active = low < high
        middle = low + (high - low) // 2
        element = jnp.take_along_axis(sequence, jnp.clip(middle, 0, max(n - 1, 0)), axis=-1, mode="clip")
        go_right = ~(element > values) if right else ~(element >= values)
        low = jnp.where(active & go_right, middle + 1, low)
        high = jnp.where(active & ~go_right, middle, high)
        return low, high

    return jax.lax.fori_loop(0, n.bit_length(), step, (low, high))[0]


def _searchsorted(sorted_sequence, values, right, side, sorter):
    right = right or side == "right"
    if sorter is not None:
        if sorter.size:  # ATen reads the sorter's range back before searching
            out_of_range = jnp.any((sorter < 0) | (sorter >= sorter.shape[-1]))
            device_check(out_of_range, 0, "torch.searchsorted(): sorter index out of range", synchronous=True)
        sorted_sequence = jnp.take_along_axis(sorted_sequence, sorter, axis=-1, mode="clip")
    if sorted_sequence.shape[-1] == 0:
        return jnp.zeros(values.shape, jnp.int64)
    if sorted_sequence.ndim == 1:
        return _search(sorted_sequence[None], values.reshape(1, -1), right).reshape(values.shape)
    return _search(sorted_sequence, values, right)


def _searchsorted_pre_check(arguments: dict) -> None:
    """ATen's searchsorted_pre_check (BucketizationUtils.h, CPU and CUDA alike), in its order, but
    for the devices' and the sorter's values' checks: ``side`` is "left" or "right" and agrees
    with ``right``; ``sorter`` has the boundaries' shape and is int64; a scalar value needs 1-d
    boundaries; boundaries have a dimension, one or the value's leading ones. PyTorch's meta kernel
    checks none of the shapes (0-dim boundaries failed in the lowering with an IndexError).

    Raises:
        RuntimeError: ATen's words, e.g. "torch.searchsorted(): side can only be 'left' or 'right'
            but got middle", "... boundaries tensor should have positive dimension, but got 0
            dimension".
    """
    side = arguments.get("side")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if arguments.get("right") and side != "right":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of "
                f"{side} while right was True"
            )
    boundaries, sorter, value = arguments["sorted_sequence"], arguments.get("sorter"), arguments["self"]
    if sorter is not None:
        if sorter.shape != boundaries.shape:
            raise RuntimeError(
                "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
                f"{list(boundaries.shape)}and got sorter tensor {list(sorter.shape)}"
            )
        if sorter.dtype != torch.int64:
            raise RuntimeError(
                f"torch.searchsorted(): sorter must be a tensor of long dtype but got dtype {aten_name(sorter.dtype)}"
            )
    value_dim, value_numel = (value.ndim, value.numel()) if isinstance(value, torch.Tensor) else (0, 1)
    if value_dim == 0 and not (value_numel == 1 and boundaries.ndim == 1):
        raise RuntimeError(
            "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, but we "
            f"got boundaries tensor dim({boundaries.ndim}) and input value's dim({value_dim}) numel({value_numel})"
        )
    if boundaries.ndim == 0:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"
        )
    if boundaries.ndim != 1 and (boundaries.ndim != value_dim or boundaries.shape[:-1] != value.shape[:-1]):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
            f"tensor and input value tensor must match, but we got boundaries tensor {list(boundaries.shape)} and "
            f"input value tensor {list(value.shape)}"
        )


@lowering(
    aten.searchsorted.Tensor,
    promotion=Promotion.NO_OPMATH,
    promote=("sorted_sequence", "self"),
    dtype_rule=_searchsorted_pre_check,
    rule_first=True,
)
def searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted: insertion points of ``self`` in the sorted last dimension of
    ``sorted_sequence`` (1-d, or with the same leading dimensions as ``self``); ``right``/``side``
    choose the upper bound; ``sorter`` gives the sorting permutation; both inputs compare in their
    promoted dtype."""
    return _searchsorted(sorted_sequence, self, right, side, sorter)


@lowering(
    aten.searchsorted.Scalar,
    promotion=Promotion.NO_OPMATH,
    promote=("sorted_sequence", "self"),
    dtype_rule=_searchsorted_pre_check,
    rule_first=True,
)
def searchsorted_scalar(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted with a scalar value (a 1-d ``sorted_sequence``): a 0-dim index."""
    return _searchsorted(sorted_sequence, self, right, side, sorter)


@lowering(aten.isin.Tensor_Tensor, promotion=Promotion.NO_OPMATH, promote=("elements", "test_elements"))
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """torch.isin: whether each element equals some test element (``==``, so NaN is in nothing and
    -0.0 is in [0.0]), negated by ``invert``; the result is correct whether or not ``assume_unique``
    holds. The test elements are sorted (NaN last) and each element looks up its lower bound.

    PyTorch's decomposition searches with ``searchsorted``, whose comparisons put ``inf`` after the
    NaNs of the sorted tests, so it misses ``inf``; CPU's kernel compares sorted neighbours and does
    not."""
    del assume_unique
    elements_flat, tests = elements.reshape(-1), test_elements.reshape(-1)
    if tests.size == 0:
        found = jnp.zeros(elements_flat.shape, jnp.bool_)
    else:
        if jnp.issubdtype(tests.dtype, jnp.inexact):  # -0.0 == 0.0: one of them, for the search
            tests, elements_flat = (jnp.where(v == 0, jnp.zeros((), v.dtype), v) for v in (tests, elements_flat))
        tests = jnp.sort(tests)
        position = jnp.clip(jnp.searchsorted(tests, elements_flat), 0, tests.size - 1)
        found = tests[position] == elements_flat
    return (found != invert).reshape(elements.shape)


@lowering(aten.bucketize.Tensor, promotion=Promotion.NO_OPMATH, promote=("self", "boundaries"))
def bucketize(self, boundaries, *, out_int32=False, right=False):
    """torch.bucketize: the bucket of each element of ``self`` among the sorted 1-d ``boundaries``
    (searchsorted with the arguments swapped).

    Raises:
        RuntimeError: ``boundaries`` is not 1-d (CPU's message).
    """
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _searchsorted(boundaries, self, right, None, None)


@lowering(aten.bucketize.Scalar, promotion=Promotion.NO_OPMATH, promote=("self", "boundaries"))
def bucketize_scalar(self, boundaries, *, out_int32=False, right=False):
    """torch.bucketize of a number: a 0-dim bucket index."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _searchsorted(boundaries, self, right, None, None)


def _cumulative(self, dim, later_wins) -> tuple[jax.Array, jax.Array]:
    """Running extreme along ``dim`` with its index, as PyTorch's CPU kernel: an element replaces the
    running one when it is NaN or ``later_wins(element, running)`` (ties go to the later index), and
    a NaN, once seen, is kept (with the index of the latest NaN)."""
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = dim % self.ndim
    positions = jax.lax.broadcasted_iota(jnp.int64, self.shape, dim)

    def combine(first, second):
        (value, index), (new_value, new_index) = first, second
        replace = jnp.isnan(new_value) | (~jnp.isnan(value) & later_wins(new_value, value))
        return jnp.where(replace, new_value, value), jnp.where(replace, new_index, index)

    return jax.lax.associative_scan(combine, (self, positions), axis=dim)


@lowering(aten.cummax.default)
def cummax(self, dim):
    """torch.cummax: running maximum along ``dim`` and the index where it was reached (the latest of
    equal values); NaN propagates."""
    return _cumulative(self, dim, jnp.greater_equal)


@lowering(aten.cummin.default)
def cummin(self, dim):
    """torch.cummin: running minimum along ``dim`` and the index where it was reached (the latest of
    equal values); NaN propagates."""
    return _cumulative(self, dim, jnp.less_equal)


# --- order statistics ----------------------------------------------------------------------------


def _lower_median(values: jax.Array, indices: jax.Array, ignore_nan: bool) -> tuple[jax.Array, jax.Array]:
    """The lower median of each row of an ascending sort (NaN last) and its index. With
    ``ignore_nan`` the rank counts only the non-NaN elements (an all-NaN row gives NaN); otherwise a
    row holding NaN gives NaN and the index of its first NaN, as PyTorch's CPU kernel does."""
    n = values.shape[-1]
    if n == 0:
        return jnp.full(values.shape[:-1], jnp.nan, values.dtype), jnp.zeros(values.shape[:-1], jnp.int64)
    counted = jnp.sum(~jnp.isnan(values), axis=-1) if ignore_nan else jnp.full(values.shape[:-1], n)
    rank = jnp.maximum((counted - 1) // 2, 0)[..., None]
    if not ignore_nan and jnp.issubdtype(values.dtype, jnp.inexact):
        first_nan = jnp.sum(~jnp.isnan(values), axis=-1, keepdims=True)
        rank = jnp.where(first_nan < n, first_nan, rank)
    pick = functools.partial(jnp.take_along_axis, indices=rank, axis=-1)
    return pick(values)[..., 0], pick(indices)[..., 0]


def _median_dim(self, dim, keepdim, ignore_nan):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = dim % self.ndim
    values, indices = _sort_last(jnp.moveaxis(self, dim, -1), descending=False)
    value, index = _lower_median(values, indices, ignore_nan)
    if keepdim:
        value, index = jnp.expand_dims(value, dim), jnp.expand_dims(index, dim)
    return value, index


@lowering(aten.median.default)
def median(self):
    """torch.median(input): the lower of the two middle values of every element; NaN if any element
    is NaN; an empty input gives NaN, as on CPU."""
    return _lower_median(*_sort_last(self.reshape(-1), descending=False), ignore_nan=False)[0]


@lowering(aten.nanmedian.default)
def nanmedian(self):
    """torch.nanmedian(input): torch.median of the non-NaN elements (NaN when there are none)."""
    return _lower_median(*_sort_last(self.reshape(-1), descending=False), ignore_nan=True)[0]


@lowering(aten.median.dim, dtype_rule=_nonempty_reduction_dim("median"), rule_first=True)
def median_dim(self, dim, keepdim=False):
    """torch.median(input, dim): (lower median, its index) along ``dim``; a slice holding NaN gives
    NaN and the index of its first NaN; which of several equal elements' index is returned is
    unspecified in PyTorch (this returns the first in a stable sort)."""
    return _median_dim(self, dim, keepdim, ignore_nan=False)


@lowering(aten.nanmedian.dim, dtype_rule=_nonempty_reduction_dim("median"), rule_first=True)
def nanmedian_dim(self, dim, keepdim=False):
    """torch.nanmedian(input, dim): torch.median along ``dim`` ignoring NaN; an all-NaN slice gives
    NaN and the index of its first NaN."""
    return _median_dim(self, dim, keepdim, ignore_nan=True)


@lowering(aten.mode.default)
def mode(self, dim=-1, keepdim=False):
    """torch.mode: the most frequent value along ``dim`` and an index where it occurs. As PyTorch's
    CPU kernel, among equally frequent values the smallest wins, and each NaN counts as a distinct
    value (NaN != NaN); which index of the mode is returned is unspecified (this returns the last
    in a stable sort)."""
    if self.ndim and self.shape[dim % self.ndim] == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim % self.ndim} to have non-zero size.")
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = dim % self.ndim
    values, indices = _sort_last(jnp.moveaxis(self, dim, -1), descending=False)
    if values.shape[-1] == 0:
        empty = values.shape[:-1]
        shape = (*empty[:dim], 1, *empty[dim:]) if keepdim else empty
        return jnp.zeros(shape, values.dtype), jnp.zeros(shape, jnp.int64)
    positions = jax.lax.broadcasted_iota(jnp.int64, values.shape, values.ndim - 1)
    differs = values[..., 1:] != values[..., :-1]
    edge = jnp.ones((*values.shape[:-1], 1), jnp.bool_)
    starts = jnp.concatenate([edge, differs], axis=-1)
    ends = jnp.concatenate([differs, edge], axis=-1)
    run_start = jax.lax.cummax(jnp.where(starts, positions, 0), axis=values.ndim - 1)
    frequency = jnp.where(ends, positions - run_start + 1, 0)
    best = jnp.argmax(frequency, axis=-1, keepdims=True)
    value = jnp.take_along_axis(values, best, axis=-1)[..., 0]
    index = jnp.take_along_axis(indices, best, axis=-1)[..., 0]
    if keepdim:
        value, index = jnp.expand_dims(value, dim), jnp.expand_dims(index, dim)
    return value, index
