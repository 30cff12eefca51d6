"""A fast sample of the CUDA-dtype phases (torch_neuronx/testing/cuda_dtypes.py): op/dtype pairs CUDA
computes and the CPU refuses, on neuron, checked against the CPU in a wider dtype; and pairs both
refuse, which neuron must refuse with an exception of the CPU's type.

``torch-neuronx conformance`` runs every such pair (docs/coverage.md). Pairs neuron still refuses
come from ``tables.CUDA_DTYPE_GAPS`` as strict xfails, so a fix shows up as an unexpected pass.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from torch_neuronx.testing import tables
from torch_neuronx.testing.cuda_dtypes import (
    check_cuda_sample,
    check_refused_sample,
    cuda_only_dtypes,
    cuda_refused_dtypes,
)
from torch_neuronx.testing.opinfo import full_name, select_ops

#: One pair of each kind the phase found: integer histc (transformers' MoE routing), bool inputs of
#: float ops, 16-bit floats the CPU has no kernel for (float16 irfft: computed in float32,
#: as CUDA returns float16), and the gaps left.
SAMPLE = (
    ("histc", torch.int32),
    ("histc", torch.uint8),
    ("abs", torch.bool),
    ("trace", torch.bool),
    ("nn.functional.softsign", torch.bool),
    ("nn.functional.avg_pool3d", torch.bfloat16),
    ("fft.irfft", torch.float16),
    ("fft.fft", torch.float16),
    ("sin", torch.complex32),
    ("sum", torch.complex32),
    ("nn.functional.conv2d", torch.complex32),
    # The OpInfo's CPU list is stale: the CPU computes it, each step in bfloat16; float32 rounded
    # once (the wider reference) was up to 0.125 off in the coverage sweep.
    ("nn.functional.batch_norm.without_cudnn", torch.bfloat16),
    *tables.CUDA_DTYPE_GAPS,
)


def _case(name: str, dtype: torch.dtype) -> Any:
    reason = tables.CUDA_DTYPE_GAPS.get((name, dtype))
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason is not None else []
    return pytest.param(name, dtype, id=f"{name}-{str(dtype).removeprefix('torch.')}", marks=marks)


@pytest.mark.parametrize(("name", "dtype"), [_case(*pair) for pair in SAMPLE])
def test_first_sample_in_a_cuda_only_dtype_matches_cpu(name: str, dtype: torch.dtype) -> None:
    (op,) = [op for op in select_ops([name]) if full_name(op) == name]
    outcome = check_cuda_sample(op, dtype)
    assert outcome.outcome == "pass", f"{outcome.outcome}: {outcome.detail}"


def test_sample_and_gaps_are_cuda_only_pairs() -> None:
    ops = {full_name(op): op for op in select_ops([name for name, _ in SAMPLE])}
    stale = [(name, dtype) for name, dtype in SAMPLE if dtype not in cuda_only_dtypes(ops[name])]
    assert not stale, f"pairs that CUDA and the CPU agree on (no longer CUDA-only): {stale}"


#: One pair of each kind of refusal CUDA's kernels make (eager/dispatched_dtypes.py): integers in
#: floating-only kernels, bool matrix products, orderings and activations of complex numbers,
#: 16-bit floats in special functions, and the shared metas PyTorch's Python metas lack.
REFUSED_SAMPLE = (
    ("softmax", torch.int64),
    ("log_softmax", torch.int32),
    ("mm", torch.bool),
    ("matmul", torch.bool),
    ("clamp", torch.complex64),
    ("sort", torch.complex64),
    ("nn.functional.gelu", torch.int64),
    ("nn.functional.adaptive_avg_pool2d", torch.int64),
    ("special.bessel_j0", torch.float16),
    ("gcd", torch.float32),
    ("sign", torch.complex64),
    ("heaviside", torch.complex64),
)


@pytest.mark.parametrize(
    ("name", "dtype"), REFUSED_SAMPLE, ids=[f"{n}-{str(d).removeprefix('torch.')}" for n, d in REFUSED_SAMPLE]
)
def test_first_sample_in_a_dtype_cuda_and_the_cpu_refuse_is_refused(name: str, dtype: torch.dtype) -> None:
    (op,) = [op for op in select_ops([name]) if full_name(op) == name]
    outcome = check_refused_sample(op, dtype)
    assert outcome.outcome == "pass", f"{outcome.outcome}: {outcome.detail}"


def test_refused_sample_pairs_are_refused_by_cuda_and_the_cpu() -> None:
    ops = {full_name(op): op for op in select_ops([name for name, _ in REFUSED_SAMPLE])}
    stale = [(name, dtype) for name, dtype in REFUSED_SAMPLE if dtype not in cuda_refused_dtypes(ops[name])]
    assert not stale, f"pairs CUDA or the CPU computes after all: {stale}"
