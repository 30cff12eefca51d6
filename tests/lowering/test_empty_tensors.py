"""Ops on tensors with a zero-size dimension: the CPU's result, or the CPU's error.

A lowering that reshapes with ``-1`` beside a zero-size dimension divides by zero in JAX
(``ZeroDivisionError: integer modulo by zero``), and a scan or argmax over an empty axis fails with
JAX's own errors; each case here crashed so before it was fixed (grid sampling and fractional max
pooling of an empty batch are in test_sampling.py and test_pooling.py).
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from tests.utils import to_neuron


def _long(*values):
    return torch.tensor(values, dtype=torch.long)


def _segment_sum(data, lengths, **options):
    return torch.segment_reduce(data, "sum", lengths=lengths, axis=lengths.dim() - 1, **options)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)


CASES = {
    "embedding_dense_backward-zero-width": (
        lambda grad, indices: torch.ops.aten.embedding_dense_backward(grad, indices, 4, -1, False),
        (torch.rand(3, 0), _long(0, 1, 2)),
    ),
    "segment_reduce-no-segments-unsafe": (
        lambda data, lengths: _segment_sum(data, lengths, unsafe=True),
        (torch.rand(0, 3), _long()),
    ),
    "segment_reduce-no-segments-checked": (  # ATen's check takes lengths.min()
        _segment_sum,
        (torch.rand(0, 3), _long()),
    ),
    "segment_reduce-empty-segments": (_segment_sum, (torch.rand(0, 3), _long(0, 0))),
    "segment_reduce-empty-rows": (
        lambda data, lengths: _segment_sum(data, lengths, unsafe=True),
        (torch.rand(2, 0, 3), torch.zeros(2, 0, dtype=torch.long)),
    ),
    "histogramdd-no-coordinates": (
        lambda points: torch.histogramdd(points, bins=[]).hist,  # counts elements (none), not points
        (torch.rand(5, 0),),
    ),
    "histogramdd-no-coordinates-density": (
        lambda points: torch.histogramdd(points, bins=[], density=True).hist,
        (torch.rand(5, 0),),
    ),
    "ctc_loss-empty-batch": (
        _ctc_loss,
        (torch.rand(5, 0, 4).log_softmax(2), torch.zeros(0, 3, dtype=torch.long), _long(), _long()),
    ),
    "ctc_loss-no-time-steps": (
        _ctc_loss,
        (torch.rand(0, 2, 4), torch.zeros(2, 3, dtype=torch.long), _long(0, 0), _long(0, 0)),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_empty_tensor_result_or_error_is_the_cpus(case):
    fn, args = CASES[case]
    try:
        expected = fn(*args)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=f"^{re.escape(str(error))}$"):
            fn(*to_neuron(args))
        return
    torch.testing.assert_close(fn(*to_neuron(args)).cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "prod"])
def test_segment_reduce_backward_without_segments_is_zero(reduce):
    # jnp.argmax over the empty segment axis raised ValueError.
    gradients = []
    for device in ("cpu", "neuron"):
        data = torch.rand(3, 2, device=device, requires_grad=True)
        torch.segment_reduce(data, reduce, lengths=_long().to(device), unsafe=True).sum().backward()
        gradients.append(data.grad.cpu())
    torch.testing.assert_close(gradients[1], gradients[0])
