"""PyTorch's OpInfo database as the conformance runner sees it: names, dtypes, tolerances, skips.

It reaches ``torch.testing._internal`` through ``_compat/testing_internals.py`` (STYLE.md, principle
9). Importing the OpInfo database takes a few seconds and needs the ``expecttest`` package, so it
happens on the first call of :func:`op_db`, not at import.
"""

from __future__ import annotations

import fnmatch
import functools
import unittest
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from torch_neuronx._compat.testing_internals import (
    decorate_info_type,
    default_tolerances,
    opinfo_database,
    sample_input_type,
)
from torch_neuronx._compat.torch_internals import schema_of
from torch_neuronx.testing import tables

__all__ = [
    "class_family",
    "device_dtypes",
    "dim_argument",
    "full_name",
    "op_db",
    "opinfo_skip",
    "prefix_family",
    "sample_input",
    "select_ops",
    "tolerance",
]

#: The PyTorch test that compares a device with the CPU; its skips and tolerances apply here.
_COMPARE_TEST = ("TestCommon", "test_compare_cpu")


def op_db() -> list[Any]:
    """Every OpInfo of PyTorch's database (``common_methods_invocations.op_db``)."""
    return _op_db()


@functools.cache
def _op_db() -> list[Any]:
    try:
        return opinfo_database()
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            f"PyTorch's OpInfo database needs the {err.name!r} package: pip install 'torchneuron[conformance]'"
        ) from err


def full_name(op: Any) -> str:
    """``name`` or ``name.variant_test_name`` (``div.floor_rounding``): unique in op_db."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select_ops(patterns: Sequence[str] | None = None) -> list[Any]:
    """The OpInfos whose full name (or plain name) matches any of the glob ``patterns`` (all when
    none are given), in op_db order.

    Raises:
        ValueError: a pattern matches no OpInfo.
    """
    ops = op_db()
    if not patterns:
        return ops
    selected = []
    for pattern in patterns:
        matched = [
            op for op in ops if fnmatch.fnmatchcase(full_name(op), pattern) or fnmatch.fnmatchcase(op.name, pattern)
        ]
        if not matched:
            # "softshrink" is "nn.functional.softshrink": name the OpInfos whose last part matches.
            namespaced = [full_name(op) for op in ops if fnmatch.fnmatchcase(op.name.rsplit(".", 1)[-1], pattern)]
            hint = f"; did you mean {', '.join(repr(name) for name in namespaced[:3])}?" if namespaced else ""
            raise ValueError(
                f"--ops {pattern!r} matches no OpInfo{hint}; names look like 'add', 'div.floor_rounding', 'linalg.*'"
            )
        selected += [op for op in matched if op not in selected]
    return [op for op in ops if op in selected]


def device_dtypes(op: Any, wanted: Iterable[torch.dtype] = tables.DEVICE_DTYPES) -> tuple[list[torch.dtype], dict]:
    """The dtypes to check ``op`` in (its CPU dtypes among ``wanted``, in ``wanted``'s order) and the
    CPU dtypes the device lacks, each with its reason."""
    supported = op.supported_dtypes("cpu")
    run = [dtype for dtype in wanted if dtype in supported]
    lacking = {dtype: reason for dtype, reason in tables.UNSUPPORTED_DTYPES.items() if dtype in supported}
    return run, lacking


def _active(op: Any, dtype: torch.dtype) -> list[Any]:
    """The decorators of ``op`` that PyTorch applies to its CPU comparison test on a new device."""
    decorate_info = decorate_info_type()
    found = []
    for info in op.decorators:
        if not isinstance(info, decorate_info):
            found.append(info)
        elif info.is_active(*_COMPARE_TEST, "neuron", dtype, {}):
            found += info.decorators
    return found


def opinfo_skip(op: Any, dtype: torch.dtype) -> str | None:
    """Why ``op``'s values in ``dtype`` are not compared with the CPU's, or None: the project's
    :data:`tables.SKIPS`, or the OpInfo's own skip of its CPU comparison (non-deterministic output,
    undefined values)."""
    if full_name(op) in tables.SKIPS:
        return tables.SKIPS[full_name(op)]
    for decorator in _active(op, dtype):
        if getattr(decorator, "__qualname__", "") == unittest.skip("").__qualname__:
            reasons = [c.cell_contents for c in decorator.__closure__ or () if isinstance(c.cell_contents, str)]
            return f"OpInfo skips its CPU comparison: {reasons[0] if reasons else 'no reason given'}"
    return None


def tolerance(op: Any, dtype: torch.dtype, phase: str = "forward") -> tuple[float | None, float | None]:
    """(atol, rtol) for comparing ``op``'s results in sample dtype ``dtype`` and ``phase`` with CPU:
    the project's table (an entry for the phase, else for the dtype), else the OpInfo's override for
    its CPU comparison (no tighter than the dtype's default for gradients), else (None, None):
    ``assert_close``'s default for each result's dtype."""
    override = tables.TOLERANCES.get((full_name(op), dtype, phase)) or tables.TOLERANCES.get((full_name(op), dtype))
    if override is not None:
        return override[0], override[1]
    for decorator in _active(op, dtype):
        overrides = getattr(decorator, "d", None)
        if isinstance(overrides, dict) and dtype in overrides:
            value = overrides[dtype]
            atol, rtol = (value.atol, value.rtol) if hasattr(value, "atol") else (value, default_tolerances(dtype)[0])
            if phase == "backward":
                # The OpInfo tunes its override for the op's values; a gradient is compared at least
                # as loosely as the dtype's default (cancellation leaves values near zero).
                default_rtol, default_atol = default_tolerances(dtype)
                atol, rtol = max(atol, default_atol), max(rtol, default_rtol)
            return atol, rtol
    return None, None


#: OpInfo classes and name prefixes -> family, for ops no lowering module names.
_CLASS_FAMILIES = {
    "UnaryUfuncInfo": "pointwise",
    "BinaryUfuncInfo": "pointwise",
    "ReductionOpInfo": "reduction",
    "SpectralFuncInfo": "fft",
    "ShapeFuncInfo": "shape",
}
_PREFIX_FAMILIES = {
    "linalg.": "linalg",
    "fft.": "fft",
    "special.": "special",
    "masked.": "masked",
    "sparse.": "sparse",
    "signal.": "creation",
    "_refs.": "refs",
}


def sample_input(input_: Any, args: Sequence[Any], kwargs: dict[str, Any], output_process_fn_grad: Any) -> Any:
    """An OpInfo ``SampleInput`` of these arguments."""
    return sample_input_type()(input_, args=tuple(args), kwargs=kwargs, output_process_fn_grad=output_process_fn_grad)


def dim_argument(op: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    """The value of the ``dim`` argument in a call of ``op`` (an OpInfo whose ATen op has one) with
    these arguments after the input, or its default (the first overload with a ``dim`` argument:
    ``median.dim`` for median, whose default overload has none)."""
    packet = getattr(torch.ops.aten, op.aten_name)
    overloads = [schema_of(getattr(packet, name)) for name in packet.overloads()]
    schema = next(s for s in overloads if any(argument.name == "dim" for argument in s.arguments))
    position = next(i for i, argument in enumerate(schema.arguments) if argument.name == "dim")
    if "dim" in kwargs:
        return kwargs["dim"]
    if len(args) >= position:
        return args[position - 1]
    return schema.arguments[position].default_value


def prefix_family(op: Any) -> str | None:
    """The family an OpInfo's name prefix gives (``linalg.`` -> linalg), or None."""
    return next((family for prefix, family in _PREFIX_FAMILIES.items() if op.name.startswith(prefix)), None)


def class_family(op: Any) -> str:
    """The family an OpInfo's class gives (UnaryUfuncInfo -> pointwise), else ``other``."""
    return _CLASS_FAMILIES.get(type(op).__name__, "other")
