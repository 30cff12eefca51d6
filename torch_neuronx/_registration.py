"""Makes ``neuron`` a PyTorch device. Runs once, when ``import torch`` autoloads the package.

Cheap by design (decision 1): it loads the C++ core (allocator, guard, hooks, generator and metadata
kernels register themselves as it loads), renames PrivateUse1, installs ``torch.neuron``, generates
the ``Tensor.neuron()``-style methods and registers the PrivateUse1 fallback. JAX is imported later,
when the first op reaches that fallback and starts the device (``_startup.py``).
"""

from __future__ import annotations

import atexit
import functools
import sys
from typing import Any

import torch

_library: list[torch.library.Library] = []


def register() -> None:
    """Registers the neuron device with PyTorch (idempotent)."""
    if _library:
        return
    from torch_neuronx import _C
    from torch_neuronx._compat import (
        accelerate_memory,
        compiled_optimizers,
        data_parallel,
        jit_load,
        jit_trace_check,
        meta_kernels,
        transformer_encoder,
    )
    from torch_neuronx._compat.torch_internals import (
        as_nested_tensor_cpu_kernel,
        format_values_on_host,
        grad_scaler_without_fp64,
        linear_cross_entropy_accumulates_in_float32,
        register_device_module,
        restride_fake_result,
        route_default_compiler,
    )
    from torch_neuronx._startup import boxed_fallback, register_starters
    from torch_neuronx.distributed import registration as distributed_registration
    from torch_neuronx.eager.fallback import NESTED_METADATA, REFUSED_FACTORIES, UNSUPPORTED_KEYS, layout_fallback
    from torch_neuronx.eager.memory_formats import convolution_fake_layout
    from torch_neuronx.runtime import xla_flags
    from torch_neuronx.runtime.callbacks import RuntimeCallbacks

    xla_flags.request_separate_rounding()  # before any code creates JAX's CPU client

    torch.utils.rename_privateuse1_backend("neuron")
    import torch_neuronx.device as device_module

    register_device_module("neuron", device_module)
    # `import torch.neuron.amp` finds this module, not a second copy of it (as torch.cuda.amp).
    sys.modules["torch.neuron.amp"] = device_module.amp
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    format_values_on_host()
    grad_scaler_without_fp64()
    linear_cross_entropy_accumulates_in_float32()
    accelerate_memory.install()
    transformer_encoder.install()
    compiled_optimizers.install()
    data_parallel.install()
    jit_trace_check.install()
    jit_load.install()
    # Dynamo runs a graph's fake tensors through the meta kernels before any neuron op has run.
    meta_kernels.register()
    # Compiled graphs lay out a convolution of neuron tensors as eager does (channels-last too).
    restride_fake_result(torch.ops.aten.convolution.default, convolution_fake_layout)
    route_default_compiler(_compile_default)
    # bfloat16 is Trainium's native 16-bit matmul type, so it is what autocast uses by default.
    torch.set_autocast_dtype("neuron", torch.bfloat16)
    _C._set_python_runtime(RuntimeCallbacks())
    atexit.register(_C._disable_python_runtime)
    # Registered through the C++ core, not Library.fallback, which fails an INTERNAL ASSERT when
    # reached under a TorchDispatchMode (csrc/aten/PythonFallback.h).
    _C._register_python_fallback("PrivateUse1", boxed_fallback)
    for key, (kind, fix) in UNSUPPORTED_KEYS.items():
        _C._register_python_fallback(key, layout_fallback(kind, fix))
    factories = torch.library.Library("aten", "IMPL")
    for name, key in REFUSED_FACTORIES.items():
        refuse = layout_fallback(*UNSUPPORTED_KEYS[key])
        factories.impl(name, functools.partial(refuse, getattr(torch.ops.aten, name).default), "PrivateUse1")
    for name in NESTED_METADATA:
        op = getattr(torch.ops.aten, name).default
        factories.impl(name, as_nested_tensor_cpu_kernel(op), "NestedTensorPrivateUse1")
    _library.append(factories)
    register_starters()
    distributed_registration.register()


def _compile_default(inductor: Any, graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    """torch.compile's default backend (torch_neuronx/dynamo/default_backend.py), imported on the
    first compiled graph: importing torch_neuronx.dynamo sets Dynamo up, which ``import torch_neuronx``
    must not pay for."""
    from torch_neuronx.dynamo.default_backend import compile_default

    return compile_default(inductor, graph, example_inputs)
