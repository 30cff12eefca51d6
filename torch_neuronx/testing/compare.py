"""Comparing a neuron result with the CPU's: leaf by leaf, within a tolerance, with two rescues.

A tensor that differs from the CPU's beyond the tolerance is still a match when:

- *the CPU is no more accurate*: both are compared with a float64 reference computed on the CPU
  (the sample widened to float64), and the neuron result's RMS error is at most twice the CPU's
  plus a tenth of the dtype's absolute tolerance. This is the rule of ``torch._dynamo.utils.same``
  with ``fp64_ref``, which inductor's accuracy checks use. Low-precision CPU kernels round
  intermediates that the device keeps in float32, so a more accurate result can differ from the
  CPU's by more than the bfloat16 tolerance. Where the CPU returns NaN or infinity but the
  reference is finite (the CPU's bfloat16 ``matrix_exp`` overflows), the neuron value must be
  within the dtype's tolerance of the reference instead.
- *ties are broken differently*: for ops in :data:`tables.TIES`, index results that select equal
  values of the input along the op's dim (the CPU's unstable sort orders equal elements
  arbitrarily).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from torch_neuronx._compat.testing_internals import default_tolerances
from torch_neuronx._compat.torch_internals import pytree

__all__ = ["Comparison", "compare", "widen"]

#: Assertion details are cut to this many characters.
_DETAIL_CHARS = 400

#: The neuron result's RMS error against the float64 reference may be this many times the CPU's.
_REFERENCE_MULTIPLIER = 2.0


@dataclasses.dataclass
class Comparison:
    """The outcome of :func:`compare`: what differs (None when it matches), how a mismatch was
    rescued, and the largest absolute and relative differences from the CPU's values."""

    problem: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = None


def _errors(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float] | None:
    """Largest absolute and relative differences of two same-shape tensors; NaNs and equal
    infinities in the same place count as equal."""
    if actual.shape != expected.shape or actual.numel() == 0:
        return None
    wide = torch.complex128 if actual.is_complex() or expected.is_complex() else torch.float64
    a, e = actual.to(wide), expected.to(wide)
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    diff = torch.where(same, 0.0, (a - e).abs())
    rel = torch.where(same, 0.0, diff / e.abs())
    return float(diff.max()), float(rel.max())


def _rmse(a: torch.Tensor, reference: torch.Tensor, finite: torch.Tensor) -> float:
    diff = (a.to(reference.dtype) - reference)[finite].abs()
    return float(diff.square().mean().sqrt()) if diff.numel() else 0.0


def _cpu_failed(actual: torch.Tensor, expected: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Where the CPU's value is NaN or infinite, the float64 reference's finite, and the neuron's
    within the dtype's tolerance of the reference (or the infinity a reference beyond the dtype's
    range rounds to): the CPU's kernel failed there, not the device's."""
    rtol, atol = default_tolerances(actual.dtype)
    wide = actual.to(reference.dtype)
    close = (wide - reference).abs() <= atol + rtol * reference.abs()
    rounded = reference.to(actual.dtype)
    close |= torch.isinf(rounded) & (actual == rounded)
    return torch.isfinite(reference) & ~torch.isfinite(expected) & close


def _no_less_accurate(actual: torch.Tensor, expected: torch.Tensor, reference: Any) -> str | None:
    """The note for a neuron result no less accurate than the CPU's against ``reference``, or None."""
    if not isinstance(reference, torch.Tensor) or not reference.shape == expected.shape == actual.shape:
        return None
    if actual.dtype != expected.dtype:
        return None
    if not (expected.is_floating_point() or expected.is_complex()):
        return None
    finite = torch.isfinite(reference) & torch.isfinite(expected)
    same = (actual == expected) | (torch.isnan(actual) & torch.isnan(expected))
    failed = _cpu_failed(actual, expected, reference)
    if not bool((same | failed)[~finite].all()):
        return None
    neuron, cpu = _rmse(actual, reference, finite), _rmse(expected, reference, finite)
    if neuron > _REFERENCE_MULTIPLIER * cpu + default_tolerances(expected.dtype)[1] / 10:
        return None
    if bool(failed.any()):
        return "the CPU returns NaN or infinity where the float64 reference is finite; neuron matches the reference"
    return f"no less accurate than the CPU against a float64 reference (RMS error {neuron:.3g}, CPU {cpu:.3g})"


def _describe_mismatch(error: Exception) -> str:
    return "; ".join([line.strip() for line in str(error).splitlines() if line.strip()][:3])


def compare(
    actual: Any,
    expected: Any,
    *,
    atol: float | None,
    rtol: float | None,
    reference: Callable[[], Any] | None = None,
    ties: Callable[[torch.Tensor, torch.Tensor], bool] | None = None,
) -> Comparison:
    """Compares a neuron result (copied to the host) with the CPU's, leaf by leaf: tensors and
    numbers with ``assert_close`` (``atol``/``rtol``, or the dtype defaults when None), anything else
    by equality.

    Args:
        reference: computes the float64 reference (same structure), called at most once, on the
            first floating-point mismatch.
        ties: ``ties(neuron_indices, cpu_indices)`` is True when both select equal values.
    """
    result = Comparison()
    got, got_spec = pytree.tree_flatten(actual)
    want, want_spec = pytree.tree_flatten(expected)
    if got_spec != want_spec:
        result.problem = f"result structure differs: neuron {got_spec}, CPU {want_spec}"[:_DETAIL_CHARS]
        return result
    references: list[Any] | None = None
    problems = []
    for index, (a, e) in enumerate(zip(got, want, strict=True)):
        where = f"result {index}: " if len(want) > 1 else ""
        if not (isinstance(e, (torch.Tensor, int, float, complex)) and not isinstance(e, bool)):
            if a != e:
                problems.append(f"{where}neuron {a!r}, CPU {e!r}")
            continue
        try:
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True, check_device=False)
            continue
        except Exception as err:  # a difference of any kind is a mismatch, reported as such
            mismatch = where + _describe_mismatch(err)
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)):
            problems.append(mismatch)
            continue
        errors = _errors(a, e)
        if errors is not None:
            result.max_abs_error = max(result.max_abs_error or 0.0, errors[0])
            result.max_rel_error = max(result.max_rel_error or 0.0, errors[1])
        note = None
        if ties is not None and a.shape == e.shape and a.dtype == e.dtype == torch.int64 and ties(a, e):
            note = "ties broken differently: the indices select equal values"
        elif reference is not None and (e.is_floating_point() or e.is_complex()):
            if references is None:
                references = _reference_leaves(reference, want_spec)
            if references:
                note = _no_less_accurate(a, e, references[index])
        if note is None:
            problems.append(mismatch)
        elif note not in result.notes:
            result.notes.append(note)
    if problems:
        result.problem = "; ".join(problems)[:_DETAIL_CHARS]
    return result


def _reference_leaves(reference: Callable[[], Any], spec: Any) -> list[Any]:
    """The float64 reference's leaves, or none when it fails or has another structure."""
    try:
        leaves, reference_spec = pytree.tree_flatten(reference())
    except Exception:  # no float64 reference for this op: mismatches stand
        return []
    return leaves if reference_spec == spec else []


def widen(value: Any) -> Any:
    """``value`` (a pytree of CPU tensors) with floating tensors as float64 and complex ones as
    complex128, as leaves keeping ``requires_grad``."""

    def widen_leaf(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor) or not (leaf.is_floating_point() or leaf.is_complex()):
            return leaf
        wide = torch.complex128 if leaf.is_complex() else torch.float64
        return leaf.detach().to(wide).requires_grad_(leaf.requires_grad)

    return pytree.tree_map(widen_leaf, value)
