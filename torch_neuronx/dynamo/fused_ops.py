"""Puts back the ATen ops that Dynamo rewrites into ``prims.fma`` before AOTAutograd sees them.

Dynamo traces ``Tensor.addcmul_(t1, t2, value=v)`` as ``prims.fma(t1 * t2, v, self)`` and
``Tensor.addcdiv_(t1, t2, value=v)`` as ``prims.fma(t1 / t2, v, self)``
(torch/_dynamo/variables/tensor.py, ``config.enable_dynamo_decompositions``, which "can affect
numerics for non-inductor backends"). Those round otherwise than ATen's kernels, which eager runs:
addcmul's is ``fma(v * t1, t2, self)`` and addcdiv's ``((v * t1) / t2) + self``, so a compiled
Adam or RMSprop step would drift from eager's in the last bit of most parameters. This pass finds
the pattern in AOTAutograd's graph (``aten.mul.Tensor`` / ``aten.div.Tensor`` feeding only
``prims.fma`` with a Python number as its multiplier) and puts ``aten.addcmul`` / ``aten.addcdiv``
back, whose lowerings compute as ATen's kernels do. A tensor ``value`` is left alone: Dynamo makes
the same graph of ``x.add_(a * b, alpha=t)``, which eager rounds as ``fma(a * b, t, x)``.

``prims.fma`` exists only once ``torch._inductor.inductor_prims`` is imported, which Dynamo does
before any backend runs. The ``prims.fma`` nodes left (``Tensor.add_(other, alpha=tensor)``) are
one fused multiply-add, as ATen's ``add_`` computes them (lowering/pointwise.py).
"""

from __future__ import annotations

import torch
import torch.fx

__all__ = ["restore_fused_ops"]

aten = torch.ops.aten

#: The producer of fma's first operand -> the ATen op Dynamo's rewrite came from.
_RESTORED = {aten.mul.Tensor: aten.addcmul.default, aten.div.Tensor: aten.addcdiv.default}


def _dtype(node: object) -> torch.dtype | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value.dtype if isinstance(value, torch.Tensor) else None


def restore_fused_ops(graph: torch.fx.GraphModule) -> int:
    """Replaces each ``prims.fma(mul_or_div(t1, t2), value, self)`` of AOTAutograd's ``graph`` by
    ``addcmul``/``addcdiv(self, t1, t2, value=value)`` where that is the op Dynamo rewrote: the
    product or quotient has no other user, ``value`` is a Python number (Dynamo's ``add_`` rewrite,
    ``prims.fma(other, alpha, self)``, makes the same pattern from ``x.add_(a * b, alpha=t)`` with
    a tensor ``alpha``, which must keep its own rounding) and the three tensors share one floating
    dtype (a mixed-dtype call promotes otherwise). Returns how many it replaced."""
    fma = getattr(getattr(torch.ops.prims, "fma", None), "default", None)
    if fma is None:
        return 0
    replaced = 0
    for node in list(graph.graph.nodes):
        if node.op != "call_function" or node.target is not fma or node.kwargs:
            continue
        operand, value, addend = node.args
        if not isinstance(operand, torch.fx.Node) or operand.target not in _RESTORED or len(operand.users) != 1:
            continue
        if operand.kwargs or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        t1, t2 = operand.args
        dtypes = {_dtype(t1), _dtype(t2), _dtype(addend), _dtype(node)}
        dtype = dtypes.pop()
        if dtypes or dtype is None or not dtype.is_floating_point:
            continue
        with graph.graph.inserting_before(node):
            restored = graph.graph.call_function(_RESTORED[operand.target], (addend, t1, t2), {"value": value})
        restored.meta = dict(node.meta)
        node.replace_all_uses_with(restored)
        graph.graph.erase_node(node)
        graph.graph.erase_node(operand)
        replaced += 1
    if replaced:
        graph.recompile()
    return replaced
