"""The CPU fallback: ops the device cannot compute run on the CPU, visibly (decision 7).

The PrivateUse1 fallback (registered by ``torch_neuronx._startup``, which starts the device on the
first op) hands every op without a neuron kernel to :func:`run_on_cpu`: it has no lowering and no
decomposition, so it runs on the CPU with its inputs copied to the host and its results copied back,
warns once, and is counted in ``torch_neuronx.get_fallback_ops()``. ``NEURON_FALLBACK_ENABLED=0``
makes it a NotImplementedError that names the op instead.

Sparse layouts, quantized tensors and nested tensors of the strided layout have no neuron kernels
and no CPU fallback (such a neuron tensor could not hold the CPU result): :func:`layout_fallback`
raises for every op on them, naming the op and the way out, where PyTorch's dispatcher would say only
that the op has no kernel for the ``SparsePrivateUse1``, ``QuantizedPrivateUse1`` or
``NestedTensorPrivateUse1`` key. :data:`REFUSED_FACTORIES` refuse to make a nested tensor of neuron
tensors in the first place. One made otherwise (``as_nested_tensor`` of CPU tensors with
``device="neuron"`` runs CPU kernels) still answers :data:`NESTED_METADATA`: autograd reads a new
nested tensor's sizes from a C++ path that cannot raise, where the fallback's error aborted the
process.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from torch_neuronx import _config
from torch_neuronx._compat.torch_internals import OpOverload, op_name, pytree, schema_of
from torch_neuronx.eager import tracking
from torch_neuronx.runtime import launch_records
from torch_neuronx.runtime.spans import INTERNAL_OVERLAP_MESSAGE, byte_span, refers_twice

_warned: set[str] = set()


#: The dispatch keys of the tensor kinds neuron does not have: (what they hold, how to do without).
_DENSE_FIX = "Keep sparse tensors on the CPU, or convert them with .to_dense() before moving them to neuron."
UNSUPPORTED_KEYS = {
    "SparsePrivateUse1": ("sparse COO", _DENSE_FIX),
    "SparseCsrPrivateUse1": ("sparse compressed (CSR/CSC/BSR/BSC)", _DENSE_FIX),
    "QuantizedPrivateUse1": (
        "quantized",
        "Keep quantized tensors on the CPU, or convert them with .dequantize() before moving them to neuron.",
    ),
    "NestedTensorPrivateUse1": (
        "nested (torch.strided layout)",
        "Make them with layout=torch.jagged, whose values are one dense neuron tensor, or keep them on the CPU.",
    ),
}

#: Ops that would make a tensor of an :data:`UNSUPPORTED_KEYS` kind out of dense neuron tensors,
#: by that key: their PrivateUse1 kernel raises as the key's fallback does (CUDA makes one).
REFUSED_FACTORIES = {"_nested_tensor_from_tensor_list": "NestedTensorPrivateUse1"}

#: The metadata ops of a nested tensor of the strided layout, registered for
#: ``NestedTensorPrivateUse1`` as PyTorch's ``NestedTensorCPU`` kernels: they read the sizes, strides
#: and offsets the tensor holds on the host whatever its device (CUDA's kernels are the same
#: functions), so autograd can record one before the next op raises.
NESTED_METADATA = ("_nested_tensor_size", "_nested_tensor_strides", "_nested_tensor_storage_offsets")


def layout_fallback(kind: str, fix: str) -> Any:
    """The fallback of a dispatch key of :data:`UNSUPPORTED_KEYS`: raises NotImplementedError for
    every op, naming the op, the kind of tensor (``kind``) and ``fix``."""

    def raise_unsupported(op: OpOverload, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{op_name(op)}: {kind} tensors are not supported on neuron. {fix}")

    return raise_unsupported


#: How far a fallback op advances a neuron generator's offset: one draw, as CUDA's Philox offsets
#: advance in multiples of 4.
_FALLBACK_OFFSET_STEP = 4


def _cpu_generator(generator: torch.Generator) -> torch.Generator:
    """A CPU generator standing in for a neuron ``generator`` in an op that runs on the CPU (poisson,
    binomial, the gamma and Dirichlet samplers): seeded from the neuron generator's (seed, offset),
    whose offset then advances, so a call is reproducible under the neuron generator's seed and the
    next call draws anew. The CPU kernel refused the neuron generator ("Expected a 'cpu' device type
    for generator")."""
    seed, offset = (int(v) % 2**64 for v in generator.get_state().view(torch.int64))
    cpu = torch.Generator("cpu")
    cpu.manual_seed((seed ^ (offset * 0x9E3779B97F4A7C15)) % 2**64)  # distinct per (seed, offset)
    advanced = torch.tensor([seed - 2**64 if seed >= 2**63 else seed, offset + _FALLBACK_OFFSET_STEP])
    generator.set_state(advanced.view(torch.uint8))
    return cpu


def refuse_neuron_generator_for_cpu_tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A neuron generator's dispatch key brings a call of CPU tensors (``torch.randn(3, generator=g)``,
    ``torch.poisson(cpu, generator=g)``) to neuron's kernels: ATen's check_generator in the CPU kernel
    refuses the generator first, in these words.

    Raises:
        RuntimeError: a neuron generator and no neuron tensor among the arguments.
    """
    leaves = pytree.tree_leaves((args, kwargs))
    if any(isinstance(leaf, torch.Generator) and leaf.device.type == "neuron" for leaf in leaves) and not any(
        isinstance(leaf, torch.Tensor) and leaf.device.type == "neuron" for leaf in leaves
    ):
        raise RuntimeError("Expected a 'cpu' device type for generator but found 'neuron'") from None


def run_on_cpu(op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Runs ``op`` on the CPU for neuron arguments and moves the results back.

    Raises:
        NotImplementedError: NEURON_FALLBACK_ENABLED=0.
    """
    name = op_name(op)
    if not _config.fallback_enabled():
        raise NotImplementedError(
            f"{name} has no neuron lowering or decomposition, and the CPU fallback is disabled "
            "(NEURON_FALLBACK_ENABLED=0). Unset NEURON_FALLBACK_ENABLED to run it on the CPU with a warning."
        )
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"{name} is not supported natively on neuron: it runs on the CPU, with its inputs copied to "
            "the host and its results copied back. torch_neuronx.get_fallback_ops() lists every op "
            "that fell back; NEURON_FALLBACK_ENABLED=0 makes this an error.",
            stacklevel=3,
        )
    tracking.fallback[name] += 1
    started = launch_records.now() if launch_records.active else 0
    # The results go to the first neuron tensor's device, or a factory's device= argument.
    device = next(
        (
            leaf.device if isinstance(leaf, torch.Tensor) else leaf
            for leaf in pytree.tree_leaves((args, kwargs))
            if (isinstance(leaf, torch.Tensor) and leaf.device.type == "neuron")
            or (isinstance(leaf, torch.device) and leaf.type == "neuron")
        ),
        None,
    )

    for leaf in pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Generator) and device is not None and leaf.device.type != "neuron":
            # ATen's check_generator, as a neuron op's own kernel makes it (the CPU kernel would take it)
            raise RuntimeError(
                f"Expected a 'neuron' device type for generator but found '{leaf.device.type}'; create it with "
                "torch.Generator(device='neuron')"
            )

    if device is None:
        refuse_neuron_generator_for_cpu_tensors(args, kwargs)

    schema = schema_of(op)
    originals = list(args) + [kwargs.get(a.name) for a in schema.arguments[len(args) :]]
    _check_written_arguments(name, schema, originals)
    shared = _shared_storages(pytree.tree_leaves((args, kwargs)))

    def to_cpu(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device.type == "neuron":
            storage = value.untyped_storage().data_ptr()
            if storage in shared:  # a view of the storage's one host copy, as on the device
                return _view_of_copy(value, *shared[storage])
            return value.cpu()
        if isinstance(value, torch.device) and value.type == "neuron":
            return torch.device("cpu")  # a factory's device= argument
        if isinstance(value, torch.Generator) and value.device.type == "neuron":
            return _cpu_generator(value)
        return value

    cpu_args, cpu_kwargs = pytree.tree_map(to_cpu, (args, kwargs))
    result = op(*cpu_args, **cpu_kwargs)

    copies = list(cpu_args) + [cpu_kwargs.get(a.name) for a in schema.arguments[len(args) :]]
    aliases: dict[Any, Any] = {}
    for argument, original, copy in zip(schema.arguments, originals, copies, strict=False):
        if argument.alias_info is None:
            continue
        aliases[frozenset(argument.alias_info.before_set)] = original
        if argument.alias_info.is_write:
            for target, value in zip(pytree.tree_leaves(original), pytree.tree_leaves(copy), strict=True):
                if isinstance(target, torch.Tensor) and target.device.type == "neuron":
                    if target.shape != value.shape:
                        target.resize_(value.shape)
                    target.copy_(value)

    def to_device(value: Any) -> Any:
        return value.to(device) if isinstance(value, torch.Tensor) and device is not None else value

    if not schema.returns:
        _record_fallback(name, device, started)
        return None
    results = result if len(schema.returns) > 1 else (result,)
    mapped = []
    for returned, value in zip(schema.returns, results, strict=True):
        if returned.alias_info is not None and frozenset(returned.alias_info.before_set) in aliases:
            mapped.append(aliases[frozenset(returned.alias_info.before_set)])
        else:
            mapped.append(pytree.tree_map(to_device, value))
    _record_fallback(name, device, started)
    return mapped[0] if len(schema.returns) == 1 else tuple(mapped)


def _check_written_arguments(name: str, schema: Any, originals: list[Any]) -> None:
    """ATen's ``assert_no_internal_overlap`` of the tensors ``op`` writes, before the CPU runs it:
    the result could not be written back into such a tensor (the CPU's ``_fused_adagrad_`` reads an
    expanded gradient as if it were dense, past its storage's end).

    Raises:
        RuntimeError: ATen's internal-overlap message, after the op and the argument.
    """
    for argument, original in zip(schema.arguments, originals, strict=False):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        for index, tensor in enumerate(pytree.tree_leaves(original)):
            if isinstance(tensor, torch.Tensor) and refers_twice(tensor.shape, tensor.stride()):
                where = f"{argument.name}[{index}]" if isinstance(original, (list, tuple)) else argument.name
                raise RuntimeError(f"{name}: {where} (written by the op): {INTERNAL_OVERLAP_MESSAGE}")


#: Bytes a shared storage's host copy is padded to a multiple of: the widest element (complex128), so
#: that it can be viewed in any dtype.
_WIDEST_ELEMENT = 16


def _shared_storages(leaves: list[Any]) -> dict[int, tuple[int, torch.Tensor]]:
    """For each device storage that two or more of the call's tensors view, by storage address:
    (first byte, host copy of the bytes from there to the end of the last view, padded), so that
    the CPU kernel sees the tensors share memory as they do on the device (a parameter given twice
    to ``_fused_adagrad_`` is updated twice, in turn). Tensors alone on their storage are copied as
    themselves."""
    viewers: dict[int, list[torch.Tensor]] = {}
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.device.type == "neuron" and leaf.numel():
            viewers.setdefault(leaf.untyped_storage().data_ptr(), []).append(leaf)
    copies = {}
    for address, tensors in viewers.items():
        if len(tensors) < 2:
            continue
        spans = [byte_span(t) for t in tensors]
        first, end = min(s for s, _ in spans), max(e for _, e in spans)
        first -= first % _WIDEST_ELEMENT
        storage = tensors[0].untyped_storage()
        window = torch.empty(0, dtype=torch.uint8, device=tensors[0].device).set_(storage, first, (end - first,))
        padded = torch.zeros(-(-(end - first) // _WIDEST_ELEMENT) * _WIDEST_ELEMENT, dtype=torch.uint8)
        padded[: end - first] = window.cpu()
        copies[address] = (first, padded)
    return copies


def _view_of_copy(tensor: torch.Tensor, first: int, copy: torch.Tensor) -> torch.Tensor:
    """``tensor`` as a view of the host copy of its storage's bytes from ``first`` on."""
    size = tensor.element_size()
    return copy.view(tensor.dtype).as_strided(tensor.shape, tensor.stride(), tensor.storage_offset() - first // size)


def _record_fallback(name: str, device: torch.device | None, started: int) -> None:
    """The fallback of ``name`` as a runtime event (copies to and from the host included)."""
    if started:
        index = device.index if device is not None and device.index is not None else -1
        launch_records.runtime_event("neuronCpuFallback", index, started, 0, name)
