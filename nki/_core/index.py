"""Index expressions of NKI's tile indexing: ``nl.arange``, ``nl.mgrid``, ``nl.ds``, ``nl.par_dim``,
and the masks built from them.

``nl.arange(128)[:, None]`` is an affine expression over the axes of its shape: each index
expression is ``const + sum(coef[a] * i_a)`` where ``i_a`` runs over axis ``a``. Indexing a tensor
with such expressions gives a strided view when every index stays inside its dimension, and a gather
with an out-of-bound record otherwise (legal only where a ``mask`` rules those elements out). A
comparison of expressions is a mask: a boolean array over the tile, evaluated when the kernel is
traced (loop indices of ``affine_range`` are plain integers there).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nki import errors


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def _aligned(coef: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return (0,) * (ndim - len(coef)) + coef


class IndexExpr:
    """An index expression: ``const + sum(coef[a] * iota_a)`` over ``shape``, or (after a non-affine
    operation) explicit integer values broadcastable to ``shape``."""

    __slots__ = ("_explicit", "coef", "const", "shape")

    def __init__(
        self,
        shape: tuple[int, ...],
        const: int = 0,
        coef: tuple[int, ...] | None = None,
        explicit: np.ndarray | None = None,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.const = int(const)
        self.coef = None if explicit is not None else tuple(coef if coef is not None else (0,) * len(self.shape))
        self._explicit = explicit

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def affine(self) -> bool:
        return self.coef is not None

    def values(self) -> np.ndarray:
        """The index of every element, as an int64 array broadcastable to ``shape``."""
        if self._explicit is not None:
            return self._explicit
        total = np.full((1,) * self.ndim, self.const, dtype=np.int64)
        for axis, (size, c) in enumerate(zip(self.shape, self.coef, strict=True)):
            if c and size > 1:
                shape = [1] * self.ndim
                shape[axis] = size
                total = total + c * np.arange(size, dtype=np.int64).reshape(shape)
        return total

    def bounds(self) -> tuple[int, int]:
        """The smallest and largest index the expression takes."""
        if self._explicit is not None:
            values = np.broadcast_to(self._explicit, self.shape)
            return int(values.min()), int(values.max())
        low = high = self.const
        for size, c in zip(self.shape, self.coef, strict=True):
            span = c * (size - 1)
            low += min(0, span)
            high += max(0, span)
        return low, high

    # -- building expressions ------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> IndexExpr:
        """``arange(n)[:, None]``: new axes of size 1 around the existing ones (only ``:`` and None)."""
        key = key if isinstance(key, tuple) else (key,)
        if not all(k is None or (isinstance(k, slice) and k == slice(None)) for k in key):
            errors.not_supported(f"indexing an nl.arange/nl.mgrid expression with {key!r}")
        if sum(k is not None for k in key) != self.ndim:
            raise IndexError(f"an index expression of {self.ndim} dimension(s) was indexed with {key!r}")
        shape, coef, axis = [], [], 0
        for k in key:
            if k is None:
                shape.append(1)
                coef.append(0)
            else:
                shape.append(self.shape[axis])
                coef.append(self.coef[axis] if self.coef is not None else 0)
                axis += 1
        if self._explicit is not None:
            return IndexExpr(tuple(shape), explicit=np.asarray(self._explicit).reshape(shape))
        return IndexExpr(tuple(shape), self.const, tuple(coef))

    def _combine(self, other: Any, op: Callable[[Any, Any], Any], affine: bool, reverse: bool = False) -> IndexExpr:
        if isinstance(other, IndexExpr):
            shape = _broadcast_shape(self.shape, other.shape)
            if affine and self.affine and other.affine:
                ndim = len(shape)
                a, b = _aligned(self.coef, ndim), _aligned(other.coef, ndim)
                sa, sb = (1,) * (ndim - self.ndim) + self.shape, (1,) * (ndim - other.ndim) + other.shape
                coef = tuple(
                    op(x if na > 1 else 0, y if nb > 1 else 0) for x, y, na, nb in zip(a, b, sa, sb, strict=True)
                )
                const = op(other.const, self.const) if reverse else op(self.const, other.const)
                return IndexExpr(shape, const, coef)
            left, right = (other.values(), self.values()) if reverse else (self.values(), other.values())
            return IndexExpr(shape, explicit=op(left, right))
        if isinstance(other, (bool, np.bool_)) or not isinstance(other, (int, np.integer)):
            return NotImplemented
        other = int(other)
        if affine and self.affine:
            if op is operator.mul:
                return IndexExpr(self.shape, self.const * other, tuple(c * other for c in self.coef))
            const = op(other, self.const) if reverse else op(self.const, other)
            coef = self.coef if op is operator.add or not reverse else tuple(-c for c in self.coef)
            return IndexExpr(self.shape, const, coef)
        values = op(other, self.values()) if reverse else op(self.values(), other)
        return IndexExpr(self.shape, explicit=np.asarray(values, dtype=np.int64))

    def __add__(self, other):
        return self._combine(other, operator.add, True)

    def __radd__(self, other):
        return self._combine(other, operator.add, True, reverse=True)

    def __sub__(self, other):
        return self._combine(other, operator.sub, True)

    def __rsub__(self, other):
        return self._combine(other, operator.sub, True, reverse=True)

    def __mul__(self, other):
        if isinstance(other, IndexExpr):
            return self._combine(other, operator.mul, False)
        return self._combine(other, operator.mul, True)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    def __floordiv__(self, other):
        return self._combine(other, operator.floordiv, False)

    def __mod__(self, other):
        return self._combine(other, operator.mod, False)

    # -- masks -----------------------------------------------------------------------------------------

    def _compare(self, other: Any, op: Callable[[Any, Any], Any]) -> MaskExpr:
        right = other.values() if isinstance(other, IndexExpr) else other
        if not isinstance(other, (IndexExpr, int, np.integer)):
            errors.unsupported_expression_in_mask()
        shape = _broadcast_shape(self.shape, other.shape) if isinstance(other, IndexExpr) else self.shape
        return MaskExpr(shape, np.asarray(op(self.values(), right)))

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def __eq__(self, other):  # type: ignore[override]
        return self._compare(other, operator.eq)

    def __ne__(self, other):  # type: ignore[override]
        return self._compare(other, operator.ne)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        errors.control_flow_condition_depending_on_arange()

    def __setitem__(self, key: Any, value: Any) -> None:
        errors.cannot_assign_to_index()

    def __repr__(self) -> str:
        if self.affine:
            return f"IndexExpr(shape={self.shape}, const={self.const}, coef={self.coef})"
        return f"IndexExpr(shape={self.shape}, values=...)"


class MaskExpr:
    """A predicate over a tile's elements (``mask=`` of load, store and compute calls)."""

    __slots__ = ("shape", "values")

    def __init__(self, shape: tuple[int, ...], values: np.ndarray) -> None:
        self.shape = tuple(shape)
        self.values = np.asarray(values, dtype=bool)

    def _logic(self, other: Any, op: Callable[[Any, Any], Any]) -> MaskExpr:
        if isinstance(other, MaskExpr):
            return MaskExpr(_broadcast_shape(self.shape, other.shape), op(self.values, other.values))
        if isinstance(other, (bool, np.bool_)):
            return MaskExpr(self.shape, op(self.values, bool(other)))
        errors.unsupported_expression_in_mask()

    def __and__(self, other):
        return self._logic(other, operator.and_)

    __rand__ = __and__

    def __or__(self, other):
        return self._logic(other, operator.or_)

    __ror__ = __or__

    def __xor__(self, other):
        return self._logic(other, operator.xor)

    def __invert__(self) -> MaskExpr:
        return MaskExpr(self.shape, ~self.values)

    def __bool__(self) -> bool:
        errors.control_flow_condition_depending_on_arange()

    def over(self, shape: tuple[int, ...]) -> np.ndarray:
        """The mask over a tile of ``shape`` (broadcast by numpy's rules)."""
        try:
            return np.broadcast_to(self.values, shape)
        except ValueError:
            raise ValueError(f"a mask of shape {self.shape} does not fit a tile of shape {tuple(shape)}") from None


def arange(start: int, stop: int | None = None, step: int = 1) -> IndexExpr:
    """``nl.arange``: a 1-D index expression ``start, start + step, ...`` below ``stop`` (one argument:
    ``0 .. start - 1``). Add an axis (``[:, None]``) before indexing a tile with it."""
    if stop is None:
        start, stop = 0, start
    start, stop, step = int(start), int(stop), int(step)
    if step <= 0:
        raise ValueError(f"nl.arange needs a positive step, got {step}")
    count = max(0, (stop - start + step - 1) // step)
    return IndexExpr((count,), start, (step,))


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: one index expression per axis (``.p``, ``.x``, ``.y``, ``.z``), each
    broadcastable over the others; iterable (``i_p, i_f = nl.mgrid[...]``)."""

    def __getitem__(self, key: Any) -> MGrid:
        key = key if isinstance(key, tuple) else (key,)
        exprs = []
        for axis, k in enumerate(key):
            if not isinstance(k, slice) or k.stop is None:
                raise TypeError(f"nl.mgrid takes slices with a stop, got {k!r}")
            start, step = k.start or 0, k.step or 1
            base = arange(start, k.stop, step)
            shape = [1] * len(key)
            shape[axis] = base.shape[0]
            coef = [0] * len(key)
            coef[axis] = step
            exprs.append(IndexExpr(tuple(shape), start, tuple(coef)))
        return MGrid(exprs)


class MGrid:
    _NAMES = ("p", "x", "y", "z", "w")

    def __init__(self, exprs: list[IndexExpr]) -> None:
        self.exprs = exprs

    def __getattr__(self, name: str) -> IndexExpr:
        if name in self._NAMES:
            position = self._NAMES.index(name)
            if position < len(self.exprs):
                return self.exprs[position]
        raise AttributeError(name)

    def __iter__(self) -> Iterator[IndexExpr]:
        return iter(self.exprs)

    def __getitem__(self, position: int) -> IndexExpr:
        return self.exprs[position]

    def __len__(self) -> int:
        return len(self.exprs)


mgrid = _MGrid()


class DynamicSlice:
    """``nl.ds(start, size)``: the slice ``start : start + size``."""

    __slots__ = ("size", "start")

    def __init__(self, start: int, size: int) -> None:
        if not isinstance(start, (int, np.integer)) or not isinstance(size, (int, np.integer)):
            errors.not_supported(f"nl.ds with a runtime value ({type(start).__name__})")
        self.start, self.size = int(start), int(size)

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.size)

    def __repr__(self) -> str:
        return f"ds({self.start}, {self.size})"


def ds(start: int, size: int) -> DynamicSlice:
    return DynamicSlice(start, size)


class par_dim(int):  # noqa: N801 - NKI's name
    """``nl.par_dim(n)``: marks the partition dimension in an allocation's shape (legacy NKI puts
    block dimensions before it: ``(4, nl.par_dim(128), 512)``)."""
