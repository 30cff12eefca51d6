"""Compiled ``optimizer.step()`` on neuron (Dynamo's ``OptimizerVariable``, PyTorch 2.13).

A first compiled step of an optimizer without state is made capturable, as Dynamo does for CUDA and
XPU parameters (``_set_capturable``): the state lives on the device.

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
    set_capturable = variable._set_capturable

    def _set_capturable(self: object, tx: object) -> None:
        # Dynamo makes a compiled step capturable (its state on the device, no host scalars) where
        # every parameter of a group is on CUDA or XPU and has no state yet; neuron is such a
        # device. Left non-capturable, a compiled AdamW step after a fused one failed in
        # _foreach_addcdiv_ ("Expected scalars to be on CPU, got meta instead", helper-61).
        for group in self.value.param_groups:  # type: ignore[attr-defined]
            params = group.get("params", [])
            if (
                "capturable" in group
                and params
                and all(p.device.type == "neuron" and p not in self.value.state for p in params)  # type: ignore[attr-defined]
            ):
                group["capturable"] = True
        set_capturable(self, tx)

    variable._set_capturable = _set_capturable

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
