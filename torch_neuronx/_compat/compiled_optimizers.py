"""Compiled ``optimizer.step()`` of an optimizer whose state an eager step made (Dynamo's
``OptimizerVariable``, PyTorch 2.13).

Without ``capturable``, torch.optim keeps a parameter's scalar state on the host: ``step``, and
NAdam's ``mu_product``. When Dynamo traces ``_init_group`` of such a state it moves ``step`` to the
parameter's device (``OptimizerVariable.move_step_if_cpu``) and nothing else, so NAdam's single-tensor
step then computes ``mu`` from a device ``step`` and multiplies the host ``mu_product`` by it:
"FakeTensor is wrapped to wrong device, found cpu, expected neuron:0" (CUDA fails the same way).
For neuron parameters the other 0-dim host tensors of that state move with ``step``; eager steps
read them with ``.item()`` as before.

The patch is installed when Dynamo's module is first imported (a post-import hook), so that
``import torch_neuronx`` does not import Dynamo (about 1 s).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable

import torch

_MODULE = "torch._dynamo.variables.optimizer"


def install() -> None:
    """Patches ``OptimizerVariable.move_step_if_cpu`` now if Dynamo is imported, else on its import."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        _patch(module)
    elif not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(_MODULE, _patch))


def _patch(module: types.ModuleType) -> None:
    variable = module.OptimizerVariable
    move_step = variable.move_step_if_cpu
    if getattr(move_step, "_neuron_moves_scalar_state", False):
        return

    def move_step_if_cpu(self: object) -> None:
        for param, state in self.value.state.items():  # type: ignore[attr-defined]
            step = state.get("step")
            if param.device.type != "neuron" or not isinstance(step, torch.Tensor) or not step.is_cpu:
                continue
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.is_cpu and value.dim() == 0:
                    state[key] = value.to(param.device)
        move_step(self)

    move_step_if_cpu._neuron_moves_scalar_state = True  # type: ignore[attr-defined]
    variable.move_step_if_cpu = move_step_if_cpu


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then(module)`` right after the module ``name`` executes, then leaves ``sys.meta_path``."""

    def __init__(self, name: str, then: Callable[[types.ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)  # type: ignore[arg-type]
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            execute(module)
            self.then(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
