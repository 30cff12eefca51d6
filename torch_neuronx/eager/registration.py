"""Registers the eager kernels with the dispatcher when the runtime starts.

An overload gets a kernel when its values can be computed on the device: it has a lowering, or it
has a PyTorch decomposition, or it is the in-place or ``out=`` form of such an op (computed from the
functional form, then written into the mutated arguments). View ops keep PyTorch's own
implementations (they only touch metadata, through the C++ kernels), as do
CompositeImplicitAutograd ops (the dispatcher decomposes them before they reach a backend).
Everything else reaches the fallback (fallback.py).
"""

from __future__ import annotations

import threading

import torch

from torch_neuronx._compat.torch_internals import (
    OpOverload,
    OpOverloadPacket,
    has_kernel,
    op_name,
    overload_name,
    schema_of,
)
from torch_neuronx.eager import (
    complex32_conv,
    composites,
    copy,
    determinism,
    expanded_writes,
    half_fft,
    host_ops,
    list_items,
    math_bits,
    metadata,
    redirects,
    sync_batch_norm,
    views,
)
from torch_neuronx.eager.kernel import eager_kernel
from torch_neuronx.eager.plan import Plan
from torch_neuronx.lowering import engine, load_lowerings, registry
from torch_neuronx.runtime.cores import device_entry_point

aten = torch.ops.aten

#: Arguments that may be CPU tensors, moved to the device by the kernel (as CUDA accepts CPU indices).
ALLOW_CPU: dict[OpOverload, frozenset[str]] = {
    aten.index.Tensor: frozenset({"indices"}),
    aten.index_put.default: frozenset({"indices"}),
    aten.index_put_.default: frozenset({"indices"}),
    aten._index_put_impl_.default: frozenset({"indices"}),
    # masked_fill's kernels check that value is 0-d before any device check (CUDA's Indexing.cu):
    # a CPU value of other ranks then gets that error, not the device's.
    aten.masked_fill.Tensor: frozenset({"value"}),
    aten.masked_fill_.Tensor: frozenset({"value"}),
    aten.masked_fill.Tensor_out: frozenset({"value"}),
}

#: Mutating overloads whose functional form has another name: computed by the functional form,
#: whose leading results are the op's own returns and whose trailing results are written back.
FUNCTIONAL_FORM: dict[OpOverload, OpOverload] = {
    aten._native_batch_norm_legit.default: aten._native_batch_norm_legit_functional.default,
    aten._batch_norm_with_update.default: aten._batch_norm_with_update_functional.default,
    aten.conj_physical.out: aten._conj_physical.default,
    aten.geqrf.a: aten.geqrf.default,
    aten.linalg_eigvals.out: aten._linalg_eigvals.default,
    aten.conj_physical_.default: aten._conj_physical.default,
    aten.rrelu_with_noise.default: aten.rrelu_with_noise_functional.default,
    aten.rrelu_with_noise_.default: aten.rrelu_with_noise_functional.default,
}

#: Overloads never given a compute kernel: PyTorch's composite implementation is the right one.
KEEP_COMPOSITE: frozenset[OpOverload] = frozenset(
    {
        aten.copy.default,
        aten.copy_.default,
        aten._to_copy.default,
        aten.lift_fresh_copy.default,
        aten.clone.default,
        aten.empty_like.default,
        aten.new_empty.default,
        aten.new_empty_strided.default,
        aten.empty_strided.default,
        aten.empty.memory_format,
        aten.empty_permuted.default,
        aten._local_scalar_dense.default,
        # A view of self that autograd does not track (its schema declares no alias): C++
        # composites write through it (kron's out= writes its product into a _unsafe_view of out).
        aten._unsafe_view.default,
        aten.resize_.default,
        aten.set_.source_Storage,
        aten.set_.source_Storage_storage_offset,
        aten.set_.source_Tensor,
        # Empty tensors then uniform_/normal_/random_: their lowerings are for compiled graphs.
        aten.rand.default,
        aten.rand_like.default,
        aten.randn_like.default,
        aten.randint.default,
        aten.randint.low,
        aten.randint_like.default,
        aten.randint_like.low_dtype,
    }
)

_registered: list[torch.library.Library] = []
_lock = threading.Lock()


def _is_view(op: OpOverload) -> bool:
    """Returns alias an input without writing it: a view (its C++/composite kernel only touches metadata)."""
    schema = schema_of(op)
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _dispatcher_decomposes(op: OpOverload) -> bool:
    """Whether the dispatcher decomposes ``op`` before it reaches a backend: it has a
    CompositeImplicitAutograd kernel and no backend kernel. silu_backward and mish_backward have both:
    CPU and CUDA compute them directly, and so does neuron."""
    return has_kernel(op, "CompositeImplicitAutograd") and not has_kernel(op, "CPU")


def _written(op: OpOverload) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(schema_of(op).arguments) if a.alias_info is not None and a.alias_info.is_write)


#: Arguments of a factory's functional form that its ``out=`` form takes from ``out`` instead.
_FACTORY_OPTIONS = frozenset({"dtype", "layout", "device", "pin_memory"})


def _signature(op: OpOverload, skip: tuple[int, ...] = ()) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for i, a in enumerate(schema_of(op).arguments) if i not in skip]


def _out_signature(op: OpOverload) -> list[tuple[str, str]]:
    """A functional overload's arguments as its ``out=`` form has them (no factory options)."""
    return [(a.name, str(a.type)) for a in schema_of(op).arguments if not (a.kwarg_only and a.name in _FACTORY_OPTIONS)]


def _variants(functional: OpOverload) -> list[OpOverload]:
    """The in-place overload and the ``out=`` overloads computed by ``functional``."""
    name = schema_of(functional).name.split("::")[1]
    found = []
    inplace_packet = getattr(aten, name + "_", None)
    if isinstance(inplace_packet, OpOverloadPacket):
        # Usually the same overload name; not always (floor_divide.default, floor_divide_.Tensor).
        names = [overload_name(functional), *inplace_packet.overloads()]
        inplace = next(
            (
                getattr(inplace_packet, n)
                for n in names
                if n in inplace_packet.overloads() and _signature(getattr(inplace_packet, n)) == _signature(functional)
            ),
            None,
        )
        if inplace is not None:
            found.append(inplace)
    packet = getattr(aten, name)
    # A factory's out= form drops its dtype/device/... arguments; any other keeps them (sum's dtype).
    expected = (_signature(functional), _out_signature(functional))
    for candidate_name in packet.overloads():
        candidate = getattr(packet, candidate_name)
        written = _written(candidate)
        if candidate is functional or not written:
            continue
        if (
            all(schema_of(candidate).arguments[i].kwarg_only for i in written)
            and _signature(candidate, written) in expected
        ):
            found.append(candidate)
    return found


def plans() -> list[Plan]:
    """Every overload that gets an eager kernel, with how it is computed."""
    candidates: list[tuple[OpOverload, bool]] = [(op, False) for op in registry.LOWERINGS]
    candidates += [(op, True) for op in engine.decompositions()]
    result: dict[OpOverload, Plan] = {}
    for functional, decomposed in candidates:
        if not isinstance(functional, OpOverload) or functional.namespace != "aten":
            continue
        if functional in KEEP_COMPOSITE or _is_view(functional) or _dispatcher_decomposes(functional):
            continue
        # PyTorch's composite kernel already breaks such an op into ops the device runs; its
        # variants may still lack one (mvlgamma_ calls mvlgamma.out, a CPU/CUDA kernel).
        composite = decomposed and has_kernel(functional, "CompositeExplicitAutograd")
        written = _written(functional)
        if written:
            if not decomposed:  # an in-place lowering with no functional form: it returns the new values
                result.setdefault(functional, Plan(functional, functional, written, False))
            continue
        if not composite:
            result.setdefault(functional, Plan(functional, functional, (), decomposed))
        for variant in _variants(functional):
            if variant in KEEP_COMPOSITE or _dispatcher_decomposes(variant):
                continue
            if composite and has_kernel(variant, "CompositeExplicitAutograd"):
                continue
            if variant not in registry.LOWERINGS:
                result.setdefault(variant, Plan(variant, functional, _written(variant), decomposed))
    for op, functional in FUNCTIONAL_FORM.items():
        if functional in registry.LOWERINGS or functional in engine.decompositions():
            fresh = sum(r.alias_info is None for r in schema_of(op).returns)
            result[op] = Plan(op, functional, _written(op), functional not in registry.LOWERINGS, fresh)
    return list(result.values())


def register_kernels() -> None:
    """Registers every eager kernel for PrivateUse1 (once, after the runtime started; thread-safe)."""
    with _lock:
        if not _registered:
            _register_kernels()


def registered() -> bool:
    """Whether the eager kernels are registered."""
    return bool(_registered)


def _register_kernels() -> None:
    load_lowerings()
    determinism.install()
    math_bits.register_copy_fallthroughs()
    library = torch.library.Library("aten", "IMPL", "PrivateUse1")
    custom = {
        **copy.KERNELS,
        **host_ops.KERNELS,
        **redirects.KERNELS,
        **composites.BACKEND_KERNELS,
        **sync_batch_norm.KERNELS,
        **views.KERNELS,
        **metadata.KERNELS,
    }
    for op, kernel in custom.items():
        library.impl(op, device_entry_point(kernel))
    autograd = torch.library.Library("aten", "IMPL", "AutogradPrivateUse1")
    # On both keys: autograd differentiates the ops they call.
    for op, kernel in {**composites.KERNELS, **half_fft.KERNELS, **complex32_conv.KERNELS}.items():
        library.impl(op, device_entry_point(kernel))
        autograd.impl(op, device_entry_point(kernel))
    for plan in plans():
        if plan.op in custom or has_kernel(plan.op, "PrivateUse1"):
            continue
        kernel = eager_kernel(plan, ALLOW_CPU.get(plan.op, frozenset()))
        if plan.op is aten.index.Tensor:
            kernel = host_ops.index_with_masks(kernel)
        elif plan.op in (aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default):
            kernel = host_ops.index_put_with_masks(kernel)
        elif plan.op in (aten.where.self, aten.where.self_out):
            kernel = redirects.where_with_byte_condition(kernel)
        elif plan.op is aten.arange.start_step:
            kernel = redirects.arange_with_truncated_step(kernel)
        elif plan.op is aten.histc.default:
            kernel = redirects.histc_with_cudas_checks(kernel)
        elif plan.op is aten._foreach_abs_.default:
            kernel = redirects.foreach_abs_refusing_complex(kernel)
        elif plan.op is aten.convolution.default:
            kernel = redirects.convolution_recorded_by_tracer(kernel)
        elif plan.op is aten._native_multi_head_attention.default:
            kernel = redirects.multi_head_attention_weights(kernel)
        elif plan.op in (aten.fill_.Scalar, aten.fill_.Tensor, aten.zero_.default, aten.threshold_.default):
            kernel = expanded_writes.filling_shared_memory(kernel)
        elif plan.op is aten.threshold.out:
            kernel = expanded_writes.threshold_out_sharing_memory(kernel)
        if plan.op in expanded_writes.SHARED_MEMORY_WRITES:
            kernel = expanded_writes.writing_shared_memory(expanded_writes.SHARED_MEMORY_WRITES[plan.op], kernel)
        if plan.op in determinism.ALERTS:
            kernel = determinism.alerting(plan.op, kernel)
        if math_bits.reaches_backend_with_bits(plan.op):
            kernel = math_bits.resolving(plan.op, kernel)
        if list_items.bumps_versions(plan):
            kernel = list_items.with_version_bumps(plan, kernel)
        library.impl(plan.op, device_entry_point(kernel))
    _registered.extend([library, autograd])


def registered_ops() -> list[str]:
    """Names of the overloads with an eager kernel (for the docs and the conformance runner)."""
    load_lowerings()
    return sorted(op_name(plan.op) for plan in plans())
