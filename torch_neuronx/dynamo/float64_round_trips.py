"""Conversions through float64 that change no value, folded out of graphs before the FP64 policy's
check (decision: float64 tensors are refused on neuron).

With ``torch._dynamo.config.capture_scalar_outputs = True``, a Python float read from a tensor
(``s = x.sum().item()``) stays in the graph as a 0-dim tensor converted to float64, Python's float,
and converted back to the dtype of the op that uses it (``x * s``): ``convert_element_type(
convert_element_type(t, float64), float32)``. When ``t``'s dtype converts to float64 exactly
(floats of up to 32 bits, integers of up to 32 bits, bool) the pair is one conversion from ``t``'s
dtype, or none, and the graph computes no float64. Arithmetic on the float (``s * 2``) is float64
arithmetic in the graph too, which the policy still refuses, naming the node.
"""

from __future__ import annotations

import torch
import torch.fx

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


def fold_float64_round_trips(graph: torch.fx.GraphModule) -> None:
    """Rewrites each exact conversion to float64 whose every user converts it again to a dtype of
    at most 32 bits into those conversions from its source (or the source itself, for its own
    dtype); removes the float64 conversion."""
    changed = False
    for node in list(graph.graph.nodes):
        if not _converted_to_float64(node) or not node.users:
            continue
        users = list(node.users)
        if not all(user.target is _CONVERT and user.args[1].itemsize <= 4 for user in users):
            continue
        source = node.args[0]
        for user in users:
            if user.args[1] is source.meta["val"].dtype:
                user.replace_all_uses_with(source)
                graph.graph.erase_node(user)
            else:
                user.args = (source, user.args[1])
        graph.graph.erase_node(node)
        changed = True
    if changed:
        graph.recompile()
