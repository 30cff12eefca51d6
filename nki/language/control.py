"""Loops and the SPMD launch grid: ``nl.affine_range`` and friends, ``nl.program_id``."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nki import errors
from nki._core import scope

__all__ = [
    "affine_range",
    "dynamic_range",
    "fori_loop",
    "nc",
    "no_reorder",
    "num_programs",
    "program_id",
    "program_ndim",
    "sequential_range",
    "spmd_dim",
    "static_range",
    "while_loop",
]


def _static(value: Any, api: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        errors.not_supported(f"nl.{api} with a runtime bound ({type(value).__name__}); bounds must be Python integers")
    return int(value)


def _range(api: str, start: Any, stop: Any, step: Any) -> range:
    if stop is None:
        start, stop = 0, start
    return range(_static(start, api), _static(stop, api), _static(step, api))


def affine_range(start: Any, stop: Any = None, step: Any = 1) -> range:
    """A loop over ``range(start, stop, step)``, unrolled when the kernel is traced (the iterations
    may run in parallel on hardware; the emulation runs them in order)."""
    return _range("affine_range", start, stop, step)


def sequential_range(start: Any, stop: Any = None, step: Any = 1) -> range:
    """A loop over ``range(start, stop, step)`` whose iterations depend on each other (unrolled)."""
    return _range("sequential_range", start, stop, step)


def static_range(start: Any, stop: Any = None, step: Any = 1) -> range:
    """A fully unrolled loop over ``range(start, stop, step)``."""
    return _range("static_range", start, stop, step)


def dynamic_range(start: Any, stop: Any = None, step: Any = 1) -> range:
    """A device loop; with Python-integer bounds the emulation unrolls it like the other ranges.

    Raises:
        NotImplementedError: a bound is a register (a runtime value).
    """
    return _range("dynamic_range", start, stop, step)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[int], Any], step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` with Python-integer bounds."""
    for i in _range("fori_loop", lower, upper, step):
        body_fun(i)


def while_loop(init: Any, body_fun: Callable[[Any], Any]) -> None:
    errors.not_supported("nl.while_loop (a loop on a runtime register)")


def program_id(axis: int = 0) -> int:
    """The index of the program being traced along ``axis`` of the SPMD launch grid
    (``kernel[g0, g1](...)``); 0 without a grid.

    Raises:
        NKI's err_program_id_axis_out_of_bounds: ``axis`` is not an axis of the grid.
    """
    ctx = scope.require("program_id")
    axis = int(axis)
    if not ctx.grid and axis == 0:
        return 0
    if not 0 <= axis < len(ctx.grid):
        errors.program_id_axis_out_of_bounds(axis, len(ctx.grid))
    return ctx.program_id[axis]


def num_programs(axes: Any = None) -> int:
    """The number of programs along ``axes`` of the launch grid (an axis, a tuple of axes, or None
    for the whole grid)."""
    ctx = scope.require("num_programs")
    grid = ctx.grid or (1,)
    if axes is None:
        return math.prod(grid)
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    for axis in axes:
        if not 0 <= axis < len(grid):
            errors.program_id_axis_out_of_bounds(axis, len(grid))
    return math.prod(grid[a] for a in axes)


def program_ndim() -> int:
    """The number of dimensions of the launch grid (0 without one)."""
    return len(scope.require("program_ndim").grid)


def nc(count: int) -> int:
    """``nl.nc(n)``: ``n`` physical NeuronCores in a launch grid dimension. The emulation runs every
    program on the calling core, so this is the number ``n``."""
    return int(count)


def spmd_dim(*sizes: int) -> int:
    """``nl.spmd_dim(nl.nc(2), 2)``: a launch grid dimension distributed over cores; its size is the
    product of the parts."""
    return math.prod(int(s) for s in sizes)


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keeps the instructions of the block in program order; the emulation always runs them in order."""
    yield
