"""A fixed, fast sample of PyTorch's OpInfo database on neuron, checked against the CPU.

The first sample of every OpInfo, forward, in one dtype: float32 for every other OpInfo (in
database order), bfloat16 and int64 in turn for the rest where the op supports them (float32
otherwise, which skips with the reason); plus the in-place variants of every other OpInfo and the
float32 gradients of a handful of ops. Two dtypes for every OpInfo were a sixth of the default
run's test time; ``make test-conformance`` (``TORCH_NEURONX_CONFORMANCE_FULL=1``) takes every
OpInfo in float32, bfloat16 and int64 and every in-place variant. ``torch-neuronx conformance`` runs
every sample in every dtype (docs/coverage.md).

Known failures come from ``torch_neuronx.testing.tables.KNOWN_FAILURES``, one reason each: strict
xfails, so a fix shows up as an unexpected pass; a sample that crashes the process is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from torch_neuronx.testing import check_sample, tables
from torch_neuronx.testing.opinfo import device_dtypes, full_name, op_db

DTYPES = (torch.float32, torch.bfloat16, torch.int64)

#: OpInfos whose float32 input gradients are checked too (one per common kind of backward).
BACKWARD = (
    "add",
    "mul",
    "div.no_rounding_mode",
    "matmul",
    "sum",
    "mean",
    "softmax",
    "index_select",
    "nn.functional.conv2d",
    "nn.functional.layer_norm",
    "nn.functional.gelu",
    "nn.functional.cross_entropy",
)


def _case(op: Any, dtype: torch.dtype, phase: str) -> Any:
    name, dtype_name = full_name(op), str(dtype).removeprefix("torch.")
    reason = tables.KNOWN_FAILURES.get((name, dtype, phase))
    marks = []
    if reason is not None and reason.startswith("crash"):
        marks.append(pytest.mark.skip(reason=reason))
    elif reason is not None:
        marks.append(pytest.mark.xfail(reason=reason, strict=True))
    return pytest.param(op, dtype, phase, id=f"{name}-{dtype_name}-{phase}", marks=marks)


def _sampled(index: int, dtypes: list[torch.dtype]) -> list[torch.dtype]:
    """One of ``dtypes``: bfloat16 for ``index``es 0 mod 4, int64 for 2 mod 4, float32 otherwise
    (and where the op has no bfloat16 or int64)."""
    chosen = {0: torch.bfloat16, 2: torch.int64}.get(index % 4, torch.float32)
    return [chosen] if chosen in dtypes else [d for d in dtypes if d == torch.float32]


def _cases(sampled: bool = True) -> Iterator[Any]:
    for index, op in enumerate(op_db()):
        dtypes, _ = device_dtypes(op, DTYPES)
        if sampled and dtypes:
            dtypes = _sampled(index, dtypes) or dtypes[:1]
        for dtype in dtypes or [torch.float32]:
            yield _case(op, dtype, "forward")
        if op.inplace_variant is not None and (index % 2 == 0 or not sampled):
            yield _case(op, torch.float32, "inplace")
        if full_name(op) in BACKWARD:
            yield _case(op, torch.float32, "backward")


FULL = os.environ.get("TORCH_NEURONX_CONFORMANCE_FULL") == "1"


@pytest.mark.parametrize(("op", "dtype", "phase"), list(_cases(sampled=not FULL)))
def test_first_sample_matches_cpu(op: Any, dtype: torch.dtype, phase: str) -> None:
    outcome = check_sample(op, dtype, phase)
    if outcome.outcome == "skipped":
        pytest.skip(outcome.detail)
    assert outcome.outcome == "pass", f"{outcome.outcome}: {outcome.detail}"


def test_known_failures_name_real_cases() -> None:
    cases = {(full_name(op), dtype, phase) for op, dtype, phase in (p.values for p in _cases(sampled=False))}
    stale = [key for key in tables.KNOWN_FAILURES if key not in cases]
    assert not stale, f"KNOWN_FAILURES entries that match no case of this file: {stale}"
