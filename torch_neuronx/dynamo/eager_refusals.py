"""The eager kernels' dtype and argument refusals, kept by compiled graphs.

A compiled graph must refuse what the same ops refuse eagerly (CUDA's kernels: eager/dispatched_dtypes.py,
and the lowerings' dtype rules), or it computes values of no defined meaning. Two checks keep them:

- :func:`check_call` of every node of each AOTAutograd graph at its first call (graph.py).
- :func:`find_refusal` of the Dynamo graph before AOTAutograd traces it: AOTAutograd decomposes
  ops with PyTorch's decompositions while it traces (with the Python dispatcher, also those PyTorch
  registers for tracing only, ``py_impl(DispatchKey.Autograd)``: hardshrink, multi_margin_loss,
  upsampling), so the graph never holds them and the node check cannot see them: ``F.celu``,
  ``F.hardshrink`` and ``F.multi_margin_loss`` of integers computed compiled where eager raises
  ``"elu_cuda" not implemented for 'Long'``. The Dynamo graph is run once on fake tensors, each ATen
  op checked as the device's eager kernel receives it; the compiled function of a graph with a
  refusal raises it at every call (:class:`RefusedCall`), as the eager op would, with a note naming
  the node and its source line. A meta kernel's argument error in that run is a refusal too
  (upsampling's size checks, which the decomposition skips). The dtype policy's TypeError for a
  float64 or complex128 result (decision 8) is raised the same way, as eager raises it.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import (
    OpOverload,
    fake_in_active_mode,
    is_wrapper_subclass,
    pytree,
    run_on_fakes,
)
from torch_neuronx.eager import dispatched_dtypes
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime.dtypes import CODE_OF

__all__ = ["RefusedCall", "check_call", "find_refusal"]

_FP64 = (torch.float64, torch.complex128)


def checks(op: OpOverload) -> bool:
    """Whether the eager kernel of ``op`` refuses any dtype (a dtype rule, or CUDA's dispatch)."""
    entry = registry.LOWERINGS.get(op)
    return (
        (entry is not None and entry.dtype_rule is not None)
        or op in registry.DECOMPOSED_DTYPE_RULES
        or op in dispatched_dtypes.CUDA_DISPATCH
    )


def check_call(op: OpOverload, values: list[Any], result: Any) -> None:
    """Raises what the eager kernel of ``op`` raises for the dtypes of ``values`` (its arguments in
    schema order, as PyTorch sees them) and ``result`` (the meta result): ATen's own checks (the
    dtype rule) first, then CUDA's dispatched dtypes.

    Raises:
        NotImplementedError, RuntimeError: CUDA's exception and message.
    """
    registry.check_dtype_rule(op, values)
    dispatched_dtypes.check_dispatched_dtype(op, values, result)


def _check_dtype_policy(op: OpOverload, result: Any) -> None:
    """Raises the dtype policy's TypeError (decision 8: no FP64 on Trainium) for a float64 or
    complex128 result on neuron, in the eager words ("aten::_to_copy on neuron: float64 (double)
    tensors are not supported ..."): raised at the call, not as Dynamo's BackendCompilerFailed."""
    for value in pytree.tree_leaves(result):
        if isinstance(value, torch.Tensor) and value.device.type == "neuron" and value.dtype in _FP64:
            _C._check_dtype_supported(CODE_OF[value.dtype], op.name())


class _Stop(Exception):
    """Ends the fake run at the first refusal: eager would not run the ops after it."""


def find_refusal(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[Exception, torch.fx.Node] | None:
    """The first refusal of an eager kernel among the ATen ops ``graph`` runs on ``example_inputs``
    (fake tensors of their shapes), and the node that ran the op; None when there is none or when
    the fake run cannot finish (data-dependent shapes: the compiled graph's own checks then apply)."""
    if any(
        isinstance(size, torch.SymInt)
        for value in example_inputs
        if isinstance(value, torch.Tensor)
        for size in value.shape
    ) or any(is_wrapper_subclass(value) for value in example_inputs):
        # Plain fakes cannot stand for DTensor inputs (their ops would meet mixed Tensor and
        # DTensor arguments): the AOTAutograd graphs' node checks apply to those graphs.
        return None
    found: list[tuple[Exception, torch.fx.Node]] = []
    running: list[torch.fx.Node] = []

    class Tracking(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            running[:] = [node]
            return super().run_node(node)

        def fetch_attr(self, target: str) -> Any:
            # A graph attribute is the real tensor (an optimizer's state, a module's buffer): the fake
            # mode would let an in-place op write it, so a compiled Adam's first step counted twice.
            value = super().fetch_attr(target)
            return fake_in_active_mode(value) if isinstance(value, torch.Tensor) else value

    def observe(op: OpOverload, args: tuple, kwargs: dict, result: Any) -> None:
        try:
            _check_dtype_policy(op, result)
            if checks(op):
                check_call(op, engine.schema_values(op, args, kwargs), result)
        except (RuntimeError, TypeError) as error:
            found.append((error, running[0]))
            raise _Stop from None

    def refused(op: OpOverload, error: Exception) -> None:
        found.append((error, running[0]))

    try:
        run_on_fakes(Tracking(graph).run, example_inputs, observe, refused)
    except Exception:  # noqa: BLE001, S110 - _Stop, or what the fake run cannot do: AOTAutograd's to report
        pass
    return found[0] if found else None


class RefusedCall:
    """The compiled function of a graph with an op that the eager kernel refuses: every call raises
    that refusal (CUDA's exception and message, with the note the backend added)."""

    def __init__(self, refusal: Exception) -> None:
        self.refusal = refusal

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self.refusal.with_traceback(None)
