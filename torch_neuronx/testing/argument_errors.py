"""The argument-errors phase of the conformance runner: OpInfo samples with one argument made wrong.

OpInfo's samples are valid calls, and its error inputs are a few hand-written ones per op. This
phase derives many more invalid calls from each op's first float32 sample: one argument at a time
is made wrong (:func:`mutations`): an integer becomes -1, 0 or 1000, a float -1.0 or 0.0, an
integer list gains an element or starts with -1 or 0, a tensor gains a leading dimension or an
element in its last one, the input loses its first dimension. Each mutated call runs on the CPU
and on neuron (:func:`~torch_neuronx.testing.conformance.run_sample` with ``words=True``): where
the CPU raises, neuron must raise the same exception type with the same message (CUDA shares
ATen's argument checks); where the CPU computes, neuron must compute the same values. This is how
most of the argument checks in ``_compat/aten_checks.py`` were found: PyTorch's Python meta
kernels check less than ATen, and a call they let through computed a wrong value on neuron.

A sample's row (phase :data:`PHASE`) is ``pass`` when every mutation agrees, else the worst
outcome among them (``mismatch``: neuron computed where the CPU raised, or other values; ``error``:
another exception or message), with every disagreeing mutation in the detail. Known differences
are listed with their reasons in :data:`~torch_neuronx.testing.tables.ARGUMENT_ERROR_DIFFERENCES`:
they do not fail the sample, but one that agrees now does (its entry must go). Calls whose values
cannot be compared, or that crash the CPU's kernel, are not run (:data:`tables.ARGUMENT_ERROR_NOT_RUN`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import pytree
from torch_neuronx.testing import conformance, opinfo, tables

__all__ = ["DTYPE", "PHASE", "check_mutated_sample", "mutations", "run_mutated_sample"]

#: The phase name of the rows of mutated samples.
PHASE = "argument-errors"
#: The dtype of the samples mutated: argument checks rarely depend on it.
DTYPE = torch.float32

_WRONG_INTS = (-1, 0, 1000)
_WRONG_FLOATS = (-1.0, 0.0)
_WRONG_LEADING_INTS = (-1, 0)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_int(v) for v in value)


def _strided(value: Any) -> bool:
    """Tensors of other layouts (sparse) are not mutated: they have no views."""
    return isinstance(value, torch.Tensor) and value.layout == torch.strided


def _wrong_values(value: Any) -> Iterator[tuple[str, Any]]:
    """(suffix of the label, wrong value) for one argument ``value``."""
    if _is_int(value):
        yield from ((f"={wrong}", wrong) for wrong in _WRONG_INTS)
    elif isinstance(value, float):
        yield from ((f"={wrong}", wrong) for wrong in _WRONG_FLOATS)
    elif _int_list(value):
        for wrong in _WRONG_LEADING_INTS:
            yield f"[0]={wrong}", type(value)([wrong, *value[1:]])
        yield "+extra", type(value)([*value, 1])
    elif _strided(value) and value.dim() >= 1:
        yield ".unsqueeze(0)", value.unsqueeze(0)
        if value.shape[-1]:
            yield ".lastdim+1", torch.cat([value, value.narrow(-1, 0, 1)], -1)


def mutations(sample: Any) -> Iterator[tuple[str, Any]]:
    """Each call derived from ``sample`` (an OpInfo ``SampleInput``) by making one argument wrong,
    with its label: ``arg1=-1``, ``dim=0``, ``arg0[0]=0``, ``weight.unsqueeze(0)``, ``input.select(0, 0)``.
    Deterministic: the same sample gives the same labels in the same order."""
    args, kwargs = list(sample.args), dict(sample.kwargs)

    def made(input_: Any, new_args: list[Any], new_kwargs: dict[str, Any]) -> Any:
        return opinfo.sample_input(input_, new_args, new_kwargs, sample.output_process_fn_grad)

    for position, value in enumerate(args):
        for suffix, wrong in _wrong_values(value):
            yield f"arg{position}{suffix}", made(sample.input, [*args[:position], wrong, *args[position + 1 :]], kwargs)
    for name, value in kwargs.items():
        for suffix, wrong in _wrong_values(value):
            yield f"{name}{suffix}", made(sample.input, args, {**kwargs, name: wrong})
    if _strided(sample.input) and sample.input.dim() >= 1:
        yield "input.unsqueeze(0)", made(sample.input.unsqueeze(0), args, kwargs)
        if sample.input.shape[0]:
            yield "input.select(0, 0)", made(sample.input.select(0, 0), args, kwargs)


#: How bad an outcome is, to pick a sample's worst.
_SEVERITY = {"pass": 0, "fallback": 0, "skipped": 0, "error": 1, "mismatch": 2}


def run_mutated_sample(
    op: Any, sample: Any, index: int = 0, host_leaves: frozenset[int] = frozenset()
) -> conformance.SampleOutcome:
    """Runs every mutation of ``sample`` (made on CPU, in :data:`DTYPE`) on CPU and on neuron and
    returns the sample's :class:`~torch_neuronx.testing.conformance.SampleOutcome` (phase
    :data:`PHASE`). A mutation known to differ (:data:`tables.ARGUMENT_ERROR_DIFFERENCES`) does not
    fail the sample; one in :data:`tables.ARGUMENT_ERROR_NOT_RUN` is not run. Never raises for a
    failing mutation."""
    name = opinfo.full_name(op)
    row = conformance.make_row(op, DTYPE, index, PHASE, "pass")
    start = time.perf_counter()
    # Mutations of a sample that does not itself pass (the FP64 policy, sparse layouts) say nothing.
    unmutated = conformance.run_sample(op, sample, DTYPE, "forward", index, host_leaves)
    if unmutated.outcome not in ("pass", "fallback"):
        row.outcome = "skipped"
        row.detail = f"the sample itself does not pass ({unmutated.outcome}: {unmutated.detail})"[:400]
        return row
    leaf_count = len(pytree.tree_leaves((sample.input, sample.args, sample.kwargs)))
    problems: list[str] = []
    checked = known = 0
    for label, mutated in mutations(sample):
        if (name, label) in tables.ARGUMENT_ERROR_NOT_RUN:
            continue
        reason = tables.ARGUMENT_ERROR_DIFFERENCES.get((name, label))
        # A list that gained an element moves the positions of the leaves after it.
        same_leaves = len(pytree.tree_leaves((mutated.input, mutated.args, mutated.kwargs))) == leaf_count
        outcome = conformance.run_sample(
            op, mutated, DTYPE, "forward", index, host_leaves if same_leaves else frozenset(), words=True
        )
        if outcome.outcome == "skipped":
            continue
        checked += 1
        agrees = _SEVERITY[outcome.outcome] == 0
        if reason is not None and not agrees:
            known += 1
            continue
        if reason is not None:  # fixed: the table must say so, as a strict xfail would
            outcome.outcome, outcome.detail = "error", "agrees now: remove it from ARGUMENT_ERROR_DIFFERENCES"
        elif agrees:
            continue
        problems.append(f"[{label}] {outcome.outcome}: {outcome.detail}")
        if _SEVERITY[outcome.outcome] > _SEVERITY[row.outcome]:
            row.outcome = outcome.outcome
    row.seconds = time.perf_counter() - start
    if not checked:
        row.outcome, row.detail = "skipped", "no mutation of the sample could be compared"
    elif problems:
        row.detail = "; ".join(problems)
    else:
        row.detail = f"{checked} mutations agree" + (f" ({known} known to differ)" if known else "")
    return row


def check_mutated_sample(op: Any, index: int = 0) -> conformance.SampleOutcome:
    """The argument-errors outcome of sample ``index`` of ``op``, after the same checks as a sweep
    (the op supports :data:`DTYPE` on the device, the OpInfo's own skips)."""
    run, lacking = opinfo.device_dtypes(op, [DTYPE])
    reason = lacking.get(DTYPE) or opinfo.opinfo_skip(op, DTYPE)
    if reason is None and not run:
        reason = "the OpInfo does not support float32 on CPU"
    if reason is not None:
        return conformance.make_row(op, DTYPE, index, PHASE, "skipped", reason)
    made = conformance.samples(op, DTYPE, False, index + 1)
    if len(made) <= index:
        return conformance.make_row(op, DTYPE, index, PHASE, "skipped", f"the OpInfo has only {len(made)} samples")
    return run_mutated_sample(op, made[index][0], index, made[index][1])
