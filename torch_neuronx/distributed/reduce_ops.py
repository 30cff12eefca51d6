"""Reduction operators of the neuron group, mapped onto the ones gloo runs.

gloo reduces SUM, PRODUCT, MIN, MAX, BAND, BOR and BXOR itself. The two NCCL adds are computed on
the staged host tensors around a gloo SUM, as NCCL computes them around its sum (``ncclAvg`` in
NCCL's enqueue.cc): AVG of floating-point tensors multiplies each rank's input by 1 / size first
(NCCL's pre-multiplied sum, so an average of values near the dtype's largest does not overflow),
AVG of integers divides the sum afterwards, truncating (NCCL's sum-then-divide); PREMUL_SUM
(``torch.distributed._make_nccl_premul_sum(factor)``) multiplies each rank's input by ``factor``
first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

__all__ = ["op_type", "prepare"]

_OWN = {
    dist.ReduceOp.SUM,
    dist.ReduceOp.PRODUCT,
    dist.ReduceOp.MIN,
    dist.ReduceOp.MAX,
    dist.ReduceOp.BAND,
    dist.ReduceOp.BOR,
    dist.ReduceOp.BXOR,
}


def op_type(op: dist.ReduceOp) -> dist.ReduceOp.RedOpType:
    """The kind of ``op`` (a ``ReduceOp`` object, PREMUL_SUM's included, or a ``RedOpType``)."""
    return op.op if isinstance(op, dist.ReduceOp) else op


def prepare(
    collective: str, op: dist.ReduceOp, hosts: Sequence[torch.Tensor], size: int
) -> tuple[dist.ReduceOp, Callable[[Sequence[torch.Tensor]], None]]:
    """The operator gloo runs on ``hosts`` (the staged inputs, changed in place for PREMUL_SUM) and
    the step that turns gloo's results into ``op``'s (applied in place to the host results).

    Raises:
        TypeError: AVG or PREMUL_SUM of boolean tensors, PREMUL_SUM of integers (NCCL raises too).
        ValueError: an operator the neuron group does not know.
    """
    kind = op_type(op)
    if kind in _OWN:
        return op, _nothing
    dtypes = {host.dtype for host in hosts}
    if kind == dist.ReduceOp.AVG:
        if torch.bool in dtypes:
            raise TypeError(f"neuron {collective}: cannot use ReduceOp.AVG with boolean inputs")
        for host in hosts:
            if host.dtype.is_floating_point or host.dtype.is_complex:
                host.mul_(1 / size)
        return dist.ReduceOp.SUM, lambda results: _divide_integers(results, size)
    if kind == dist.ReduceOp.PREMUL_SUM:
        if any(not dtype.is_floating_point for dtype in dtypes):
            raise TypeError(
                f"neuron {collective}: ReduceOp.PREMUL_SUM needs floating-point tensors, got {sorted(map(str, dtypes))}"
            )
        factor = op.factor
        if isinstance(factor, torch.Tensor):
            factor = factor.to("cpu")
        for host in hosts:
            host.mul_(factor)
        return dist.ReduceOp.SUM, _nothing
    raise ValueError(f"neuron {collective}: unknown reduction operator {op}")


def _nothing(results: Sequence[torch.Tensor]) -> None:
    return None


def _divide_integers(results: Sequence[torch.Tensor], size: int) -> None:
    for result in results:
        if not (result.dtype.is_floating_point or result.dtype.is_complex):
            result.div_(size, rounding_mode="trunc")
