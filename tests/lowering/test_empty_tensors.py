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


def _input_gradient(fn):
    """``fn(x, *rest)``'s gradient in ``x`` (of its sum)."""

    def gradient(x, *rest):
        x = x.detach().requires_grad_()
        fn(x, *rest).sum().backward()
        return x.grad

    return gradient


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
    "vector_norm-inf-negative-dim": (  # PyTorch's reference took dim -1 for an empty dimension
        lambda x: torch.linalg.vector_norm(x, float("inf"), -1),
        (torch.rand(0, 5),),
    ),
    "vector_norm-inf-empty-dim": (  # ATen's words: "-2because"
        lambda x: torch.linalg.vector_norm(x, float("inf"), -2),
        (torch.rand(0, 5),),
    ),
    "vector_norm-negative-order": (lambda x: torch.linalg.vector_norm(x, -1.0), (torch.rand(0, 5),)),
    "gather-empty-uint8-index": (  # ATen checks the index dtype of a non-empty index only
        lambda x, index: torch.gather(x, 0, index),
        (torch.rand(3), torch.zeros(0, dtype=torch.uint8)),
    ),
    "histogramdd-weight-shape": (  # failed in a JAX broadcast
        lambda points, weight: torch.histogramdd(points, bins=[2, 2], weight=weight).hist,
        (torch.rand(4, 2), torch.rand(3)),
    ),
    "histogram-weight-shape": (
        lambda values, weight: torch.histogram(values, 3, weight=weight).hist,
        (torch.rand(2, 3), torch.rand(5)),
    ),
    "ctc_loss-empty-targets": (  # a single state: the alpha recursion's shifts outgrew it
        lambda log_probs, targets: F.ctc_loss(log_probs, targets, torch.tensor([5, 3]), torch.tensor([0, 0])),
        (torch.randn(5, 2, 4).log_softmax(2), torch.zeros(2, 0, dtype=torch.long)),
    ),
    **{  # PyTorch's decompositions (the meta kernels) divided by the element count: ZeroDivisionError
        f"{loss.__name__}-backward": (_input_gradient(loss), (torch.rand(0), torch.rand(0)))
        for loss in (F.mse_loss, F.smooth_l1_loss, F.huber_loss, F.soft_margin_loss, F.binary_cross_entropy)
    },
    "group_norm-backward-no-spatial-elements": (_input_gradient(lambda x: F.group_norm(x, 2)), (torch.randn(2, 4, 0),)),
    "sdpa-no-head-dimension": (  # the default scale 1 / sqrt(0)
        F.scaled_dot_product_attention,
        (torch.randn(2, 2, 3, 0), torch.randn(2, 2, 3, 0), torch.randn(2, 2, 3, 4)),
    ),
    "adaptive_max_pool2d-no-output": (lambda x: F.adaptive_max_pool2d(x, 0), (torch.randn(2, 3, 8, 8),)),
    "fractional_max_pool2d-no-output": (
        lambda x: F.fractional_max_pool2d(x, 2, output_size=(0, 0)),
        (torch.randn(2, 3, 8, 8),),
    ),
    "median-empty-dim": (lambda x: torch.median(x, -2).values, (torch.rand(0, 3),)),  # gave NaN
    "nanmedian-empty-dim": (lambda x: torch.nanmedian(x, 1).values, (torch.rand(3, 0),)),
    "kthvalue-empty-dim": (lambda x: torch.kthvalue(x, 1).values, (torch.rand(0),)),
    "max_pool2d-empty-channels": (lambda x: F.max_pool2d(x, 2), (torch.rand(2, 0, 8, 8),)),
    "adaptive_avg_pool2d_backward-empty-channels": (  # PyTorch's meta kernel garbles the message
        torch.ops.aten._adaptive_avg_pool2d_backward,
        (torch.rand(2, 0, 3, 3), torch.rand(2, 0, 4, 4)),
    ),
    "unfold-empty-channels": (lambda x: F.unfold(x, 2), (torch.rand(2, 0, 4, 4),)),
    "fold-empty-channels": (lambda x: F.fold(x, (4, 4), 2), (torch.rand(2, 0, 9),)),
    "roll-shifts-and-dims-misaligned": (  # PyTorch's reference returned an empty tensor unchecked
        lambda x: torch.roll(x, (1, 2), (0,)),
        (torch.randn(0, 3),),
    ),
    "roll-two-shifts-no-dims": (lambda x: torch.roll(x, (1, 2)), (torch.randn(0, 3),)),
    # ATen returns an empty tensor before reading the dims; PyTorch's reference raised IndexError
    "roll-dim-out-of-range": (lambda x: torch.roll(x, 1, 1000), (torch.randn(0, 0, 0),)),
    "roll-dims-out-of-range": (lambda x: torch.roll(x, (1, 2), (5, 7)), (torch.randn(0, 3),)),
    "argmax-bool-empty-dim": (  # the bool refusal comes before the empty-dimension check
        lambda x: torch.argmax(x, 1),
        (torch.zeros(3, 0, dtype=torch.bool),),
    ),
    "foreach_norm-inf-empty": (lambda x: torch._foreach_norm([x], float("inf"))[0], (torch.rand(0),)),
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
    except (RuntimeError, IndexError, ValueError) as error:
        with pytest.raises(type(error), match=f"^{re.escape(str(error))}$"):
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


EMPTY_AXIS_TAKES = {
    "index_select": (lambda table, index: torch.index_select(table, 1, index), IndexError),
    "embedding": (lambda table, index: F.embedding(index, table.mT), IndexError),
    "embedding_bag": (lambda table, index: F.embedding_bag(index, table.mT, torch.zeros_like(index[:1])), RuntimeError),
}


@pytest.mark.parametrize("op", list(EMPTY_AXIS_TAKES))
def test_a_take_from_an_empty_axis_faults_as_an_index_out_of_range(op):
    # JAX refuses any take from an empty axis ("Cannot do a non-empty jnp.take() from an empty
    # axis"); every index is out of range there, a device fault as for any other.
    take, error = EMPTY_AXIS_TAKES[op]
    with pytest.raises(error, match=r"out of bounds for dimension \d with size 0|Expected idx >= 0"):
        take(torch.rand(5, 0, device="neuron"), torch.tensor([0, 1], device="neuron")).cpu()


def test_safe_softmax_of_an_empty_axis_as_the_cpu():
    # jnp.max of an empty axis raised ValueError.
    scores = torch.rand(2, 0, 4)
    torch.testing.assert_close(
        torch.ops.aten._safe_softmax(scores.to("neuron"), 1).cpu(), torch.ops.aten._safe_softmax(scores, 1)
    )


def test_convolution_without_input_channels_is_atens_empty_result():
    # ATen's "Empty" backend returns no output channels (bias or not); the lowering returned 4.
    results = []
    for device in ("cpu", "neuron"):
        x = torch.rand(1, 0, 5, 5, device=device, requires_grad=True)
        weight = torch.rand(4, 0, 3, 3, device=device, requires_grad=True)
        bias = torch.rand(4, device=device, requires_grad=True)
        out = F.conv2d(x, weight, bias)
        out.sum().backward()
        results.append([t.cpu() for t in (out, x.grad, weight.grad, bias.grad)])
    for actual, expected in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(actual, expected)


def test_multinomial_without_categories_faults_as_a_zero_sum():
    # jax.random.categorical over no categories raised ValueError (argmax of an empty sequence).
    with pytest.raises(RuntimeError, match=re.escape("invalid multinomial distribution (sum of probabilities <= 0)")):
        torch.multinomial(torch.rand(3, 0, device="neuron"), 1, replacement=True).cpu()


@pytest.mark.parametrize(
    ("call", "kernel"),
    [
        (lambda x: F.max_pool3d(x, 2), "max_pool3d_with_indices_out_cuda_template"),
        (lambda x: F.max_unpool3d(x, torch.zeros_like(x, dtype=torch.long), 2), "max_unpooling3d_forward_out_cuda"),
    ],
)
def test_pooling_shape_checks_name_cudas_kernel(call, kernel):
    # The CPU names its own kernel ("..._cpu_template()"); PyTorch's meta kernel named neither.
    with pytest.raises(RuntimeError, match=f"^{kernel}\\(\\): Expected input"):
        call(torch.rand(2, 0, 4, 4, 4, device="neuron"))


def test_group_norm_of_empty_groups_keeps_the_cpus_statistics_and_gradients():
    # The CPU's RowwiseMoments gives an empty group mean 0 and rstd NaN, so the weight's gradient
    # (its (ds - db * mean) * rstd) is NaN; neuron gave mean NaN and a weight gradient of 0.
    results = []
    for device in ("cpu", "neuron"):
        x = torch.randn(2, 4, 0, device=device)
        weight, bias = torch.ones(4, device=device), torch.zeros(4, device=device)
        out, mean, rstd = torch.ops.aten.native_group_norm(x, weight, bias, 2, 4, 0, 2, 1e-5)
        grads = torch.ops.aten.native_group_norm_backward(
            torch.randn(2, 4, 0, device=device), x, mean, rstd, weight, 2, 4, 0, 2, [True, True, True]
        )
        results.append([t.cpu() for t in (out, mean, rstd, *grads)])
    for actual, expected in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(actual, expected, equal_nan=True)
