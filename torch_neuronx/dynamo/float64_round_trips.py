"""Conversions through float64 that change no value, folded out of graphs before the FP64 policy's
check (decision: float64 tensors are refused on neuron).

With ``torch._dynamo.config.capture_scalar_outputs = True``, a Python float read from a tensor
(``s = x.sum().item()``) stays in the graph as a 0-dim tensor converted to float64, Python's float,
and converted back to the dtype of the op that uses it (``x * s``): ``convert_element_type(
convert_element_type(t, float64), float32)``. When ``t``'s dtype converts to float64 exactly
(floats of up to 32 bits, integers of up to 32 bits, bool) the pair is one conversion from ``t``'s
dtype, or none, and the graph computes no float64. A 0-dim float64 value that meets only floating
tensors of one or more dimensions (``w.clamp(max=s)``, the ``w <= s`` mask of its gradient) computes
in their dtype whatever its own, so its floating source replaces it. Arithmetic on the float
(``s * 2``) is float64 arithmetic in the graph too, which the policy still refuses, naming the node.
"""

from __future__ import annotations

import torch
import torch.fx

from torch_neuronx._compat.torch_internals import OpOverload, pytree

#: The dtypes whose every value float64 holds exactly.
_EXACT_IN_FLOAT64 = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.uint16,
        torch.uint32,
        torch.float16,
        torch.bfloat16,
        torch.float32,
    }
)
_CONVERT = torch.ops.prims.convert_element_type.default


def _converted_to_float64(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is not _CONVERT or node.args[1] is not torch.float64:
        return False
    source = node.args[0]
    return isinstance(source, torch.fx.Node) and source.meta["val"].dtype in _EXACT_IN_FLOAT64


def _converted_back(user: torch.fx.Node) -> bool:
    return user.target is _CONVERT and user.args[1].itemsize <= 4


def _outweighed(user: torch.fx.Node, value: torch.fx.Node) -> bool:
    """Whether ``value``, a 0-dim float64 tensor, only meets floating tensors of one or more
    dimensions in ``user`` (``le(w, s)``, ``clamp(w, max=s)``), which decide the computation's dtype
    whatever the 0-dim tensor's floating dtype is (PyTorch's type promotion), and ``user`` makes no
    float64 result: a 0-dim tensor of the same value in another floating dtype changes nothing."""
    if not isinstance(user.target, OpOverload):
        return False
    others = [
        arg.meta.get("val")
        for arg in pytree.tree_leaves((user.args, user.kwargs))
        if isinstance(arg, torch.fx.Node) and arg is not value
    ]
    results = pytree.tree_leaves(user.meta.get("val"))
    return (
        any(isinstance(t, torch.Tensor) for t in others)
        and all(not isinstance(t, torch.Tensor) or (t.dtype.is_floating_point and t.dim() >= 1) for t in others)
        and all(not isinstance(t, torch.Tensor) or t.dtype is not torch.float64 for t in results)
    )


def fold_float64_round_trips(graph: torch.fx.GraphModule) -> None:
    """Rewrites each exact conversion to float64 whose every user converts it again to a dtype of
    at most 32 bits into those conversions from its source (or the source itself, for its own
    dtype), and gives a 0-dim one's users that other floating tensors outweigh (a clamp bound, a
    comparison: :func:`_outweighed`) its floating source; removes the float64 conversion."""
    changed = False
    for node in list(graph.graph.nodes):
        if not _converted_to_float64(node) or not node.users:
            continue
        source = node.args[0]
        users = list(node.users)
        floating_scalar = source.meta["val"].dtype.is_floating_point and source.meta["val"].dim() == 0
        if not all(_converted_back(user) or (floating_scalar and _outweighed(user, node)) for user in users):
            continue
        for user in users:
            if not _converted_back(user):
                user.replace_input_with(node, source)
            elif user.args[1] is source.meta["val"].dtype:
                user.replace_all_uses_with(source)
                graph.graph.erase_node(user)
            else:
                user.args = (source, user.args[1])
        graph.graph.erase_node(node)
        changed = True
    if changed:
        graph.recompile()
