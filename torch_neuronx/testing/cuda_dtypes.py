"""The CUDA-dtype phases of the conformance runner: op/dtype pairs where CUDA and the CPU differ,
or where both refuse.

Decision 8: which dtypes an op accepts follows CUDA (libraries branch on "accelerator vs CPU":
transformers' MoE routing calls ``torch.histc`` on int32 on every device but the CPU), values follow
the CPU.

Phase :data:`PHASE` (``cuda-dtype``): for every OpInfo, the dtypes of ``op.supported_dtypes("cuda")``
that ``op.supported_dtypes("cpu")`` lacks (float64 and complex128 left to the FP64 policy) must run
on neuron. The CPU has no kernel for them, so the expected values are the CPU's in a wider dtype
(:data:`WIDER`: the sample's tensors of the pair's dtype upcast, the first wider dtype the CPU computes
in), with each result of the wider dtype (or its complex or real counterpart) cast back to the pair's
dtype, as CUDA's result would be; where the OpInfo's CPU list is stale and the CPU computes the
dtype after all, its own values pass too.

Phase :data:`REFUSED_PHASE` (``cuda-refused``): the dtypes that neither list holds (among those
test_ops' ``test_dtypes`` checks: complex32 is checked only where an OpInfo claims it) must be
refused on neuron as on the CPU, with an exception of the CPU's kind (the message is CUDA's,
eager/dispatched_dtypes.py; any RuntimeError where the CPU raises one, since CUDA's cuDNN
convolutions refuse with RuntimeError where the CPU raises NotImplementedError). A pair the CPU
computes after all is skipped: the OpInfo's list is stale.

:func:`cuda_only_dtypes` and :func:`cuda_refused_dtypes` list a pair's dtypes; :func:`run_cuda_sample`
and :func:`run_refused_sample` run one sample and return its
:class:`~torch_neuronx.testing.conformance.SampleOutcome`: ``pass``, ``mismatch`` (a value, or for a
refused pair: neuron computed or raised another type), ``error`` (neuron refuses a CUDA dtype: the
exception) or ``skipped``.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

import torch_neuronx
from torch_neuronx._compat.testing_internals import all_types_and_complex_and
from torch_neuronx._compat.torch_internals import pytree
from torch_neuronx.testing import conformance, opinfo
from torch_neuronx.testing.compare import compare

__all__ = [
    "PHASE",
    "REFUSED_PHASE",
    "WIDER",
    "check_cuda_sample",
    "check_refused_sample",
    "cuda_only_dtypes",
    "cuda_refused_dtypes",
    "run_cuda_sample",
    "run_refused_sample",
]

#: The phase name of the rows of dtypes CUDA computes and the CPU refuses.
PHASE = "cuda-dtype"
#: The phase name of the rows of dtypes CUDA and the CPU both refuse.
REFUSED_PHASE = "cuda-refused"

#: The dtypes test_ops' ``test_dtypes`` checks every OpInfo in (complex32 only where one claims it).
_CHECKED_DTYPES = frozenset(all_types_and_complex_and(torch.float16, torch.bfloat16, torch.bool))

#: Dtypes the FP64 policy keeps off the device (decision 8): not part of this phase.
_FP64 = frozenset((torch.float64, torch.complex128))

#: For each dtype, the wider dtypes the CPU reference is computed in, tried in order.
WIDER: dict[torch.dtype, tuple[torch.dtype, ...]] = {
    torch.float16: (torch.float32, torch.float64),
    torch.bfloat16: (torch.float32, torch.float64),
    torch.float32: (torch.float64,),
    torch.complex32: (torch.complex64, torch.complex128),
    torch.complex64: (torch.complex128,),
    torch.bool: (torch.uint8, torch.int64, torch.float64),
    **dict.fromkeys((torch.int8, torch.int16, torch.int32, torch.uint8), (torch.int64, torch.float64)),
    torch.int64: (torch.float64,),
}

#: Real and complex dtypes of one precision: a wide result's counterpart maps back the same way.
_COMPLEX = {torch.float16: torch.complex32, torch.float32: torch.complex64, torch.float64: torch.complex128}
_REAL = {complex_: real for real, complex_ in _COMPLEX.items()}


def cuda_only_dtypes(op: Any) -> list[torch.dtype]:
    """The dtypes in which CUDA computes ``op`` (an OpInfo) and the CPU does not, float64 and
    complex128 excepted, sorted by name."""
    dtypes = op.supported_dtypes("cuda") - op.supported_dtypes("cpu") - _FP64
    return sorted(dtypes, key=str)


def cuda_refused_dtypes(op: Any) -> list[torch.dtype]:
    """The dtypes in which neither CUDA nor the CPU computes ``op`` (an OpInfo), among those
    test_ops checks, float64 and complex128 excepted, sorted by name."""
    dtypes = _CHECKED_DTYPES - op.supported_dtypes("cuda") - op.supported_dtypes("cpu") - _FP64
    return sorted(dtypes, key=str)


def _counterparts(narrow: torch.dtype, wide: torch.dtype) -> dict[torch.dtype, torch.dtype]:
    """Result dtypes of the wide computation -> the dtype CUDA's result has."""
    mapping = {wide: narrow}
    for table in (_COMPLEX, _REAL):
        if wide in table and narrow in table:
            mapping[table[wide]] = table[narrow]
    return mapping


def _cast(value: Any, mapping: dict[torch.dtype, torch.dtype]) -> Any:
    def cast(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor) and leaf.dtype in mapping:
            return leaf.to(mapping[leaf.dtype])
        return leaf

    return pytree.tree_map(cast, value)


def _reference(op: Any, sample: Any, dtype: torch.dtype) -> Any:
    """The CPU's result of ``sample`` with its ``dtype`` tensors in the first wider dtype the CPU
    computes in, cast back to ``dtype``.

    Raises:
        conformance._NotCompared: the CPU computes the sample in no wider dtype either.
    """
    failures = []
    for wide in WIDER.get(dtype, ()):
        mapping = {dtype: wide}
        widened = _cast(conformance._arguments(sample), mapping)
        input_, args, kwargs = widened
        if kwargs.get("dtype") == dtype:
            kwargs = {**kwargs, "dtype": wide}
        try:
            result = sample.output_process_fn_grad(op(input_, *args, **kwargs))
        except Exception as err:  # the CPU refuses this width too: try the next
            failures.append(f"{wide}: {conformance._describe(err)}")
            continue
        return _cast(conformance._to_cpu(result), _counterparts(dtype, wide))
    raise conformance._NotCompared("no CPU reference: " + "; ".join(failures or [f"no wider dtype than {dtype}"]))


def _own_dtype_reference(op: Any, sample: Any) -> Any:
    """The CPU's result of ``sample`` in its own dtype, where the CPU computes it after all (the
    OpInfo's CPU list is stale: ``batch_norm``'s ``without_cudnn`` variant lists no bfloat16, which
    the CPU's kernels compute, each step rounded), else None. On copies of the sample's tensors: an
    op may update an argument (batch norm's running statistics)."""
    input_, args, kwargs = pytree.tree_map(
        lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf, conformance._arguments(sample)
    )
    try:
        return conformance._to_cpu(sample.output_process_fn_grad(op(input_, *args, **kwargs)))
    except Exception:  # the CPU's refusal this phase is about
        return None


def run_cuda_sample(op: Any, sample: Any, dtype: torch.dtype, index: int = 0) -> conformance.SampleOutcome:
    """Runs one OpInfo sample (made on CPU in ``dtype``, a dtype CUDA computes and the CPU refuses)
    on neuron and compares it with the CPU's result in a wider dtype. Never raises: a refusal on
    neuron is an ``error`` outcome, a sample without a CPU reference is ``skipped``."""
    row = conformance.make_row(op, dtype, index, PHASE, "pass")
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = _reference(op, sample, dtype)
            torch_neuronx.clear_op_tracking()
            try:
                neuron_sample = conformance._neuron_sample(sample, frozenset())
                actual = conformance._to_cpu(conformance._forward(op, neuron_sample))
                torch.neuron.synchronize()
            except Exception as err:  # neuron refusing the dtype is what this phase measures
                conformance._drain_faults()
                row.outcome, row.detail = "error", conformance._describe(err)
                return row
            fallback = sorted(torch_neuronx.get_fallback_ops())
            atol, rtol = opinfo.tolerance(op, dtype)
            result = compare(actual, expected, atol=atol, rtol=rtol)
            if result.problem is not None:  # values follow the CPU's own kernel where it has one
                own = _own_dtype_reference(op, sample)
                if own is not None and compare(actual, own, atol=atol, rtol=rtol).problem is None:
                    result = compare(actual, own, atol=atol, rtol=rtol)
            row.max_abs_error, row.max_rel_error = result.max_abs_error, result.max_rel_error
            if result.problem is not None:
                row.outcome, row.detail = "mismatch", result.problem
            elif fallback:
                row.outcome, row.detail = "fallback", "ran on the CPU: " + ", ".join(fallback)
    except conformance._NotCompared as reason:
        row.outcome, row.detail = "skipped", str(reason)
    except Exception as err:  # a sample must never stop the sweep
        row.outcome, row.detail = "error", conformance._describe(err)
        conformance._drain_faults()
    finally:
        row.seconds = time.perf_counter() - start
    return row


def _check_sample(op: Any, dtype: torch.dtype, index: int, phase: str) -> conformance.SampleOutcome:
    """The outcome of sample ``index`` of ``op`` in ``dtype`` in ``phase``, or why it did not run."""
    if phase == PHASE:
        listed, run, other = cuda_only_dtypes, run_cuda_sample, f"CUDA and the CPU agree on {dtype}"
    else:
        listed, run, other = cuda_refused_dtypes, run_refused_sample, f"CUDA or the CPU computes {dtype}"
    if dtype not in listed(op):
        return conformance.make_row(op, dtype, index, phase, "skipped", other)
    reason = opinfo.opinfo_skip(op, dtype)
    if reason is not None:
        return conformance.make_row(op, dtype, index, phase, "skipped", reason)
    made = conformance.samples(op, dtype, False, index + 1)
    if len(made) <= index:
        detail = f"the OpInfo has only {len(made)} samples"
        return conformance.make_row(op, dtype, index, phase, "skipped", detail)
    return run(op, made[index][0], dtype, index)


def check_cuda_sample(op: Any, dtype: torch.dtype, index: int = 0) -> conformance.SampleOutcome:
    """The outcome of sample ``index`` of ``op`` in ``dtype`` (one of :func:`cuda_only_dtypes`)."""
    return _check_sample(op, dtype, index, PHASE)


def _same_kind(actual: BaseException, expected: BaseException) -> bool:
    """Whether neuron's refusal is of the CPU's kind: any RuntimeError where the CPU raises one (a
    CUDA kernel may refuse with a RuntimeError where the CPU's raises NotImplementedError, a
    RuntimeError's subclass: cuDNN's convolutions), else the same type."""
    if isinstance(expected, RuntimeError):
        return isinstance(actual, RuntimeError)
    return type(actual) is type(expected)


def run_refused_sample(op: Any, sample: Any, dtype: torch.dtype, index: int = 0) -> conformance.SampleOutcome:
    """Runs one OpInfo sample (made on CPU in ``dtype``, a dtype CUDA and the CPU refuse) on the CPU
    and on neuron: ``pass`` when both raise exceptions of one kind (:func:`_same_kind`),
    ``mismatch`` when neuron computes or raises another kind, ``skipped`` when the CPU computes.
    Never raises."""
    row = conformance.make_row(op, dtype, index, REFUSED_PHASE, "pass")
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                conformance._to_cpu(conformance._forward(op, sample))
            except Exception as err:  # the refusal this phase expects
                expected = err
            else:
                row.outcome, row.detail = "skipped", f"the CPU computes {dtype}: the OpInfo's dtype lists are stale"
                return row
            try:
                neuron_sample = conformance._neuron_sample(sample, frozenset())
                conformance._to_cpu(conformance._forward(op, neuron_sample))
                torch.neuron.synchronize()
            except Exception as err:
                conformance._drain_faults()
                if not _same_kind(err, expected):
                    row.outcome = "mismatch"
                    row.detail = f"neuron: {conformance._describe(err)}; CPU: {conformance._describe(expected)}"
                return row
            row.outcome = "mismatch"
            row.detail = f"computed what CUDA and the CPU refuse (CPU: {conformance._describe(expected)})"
    except Exception as err:  # a sample must never stop the sweep
        row.outcome, row.detail = "error", conformance._describe(err)
        conformance._drain_faults()
    finally:
        row.seconds = time.perf_counter() - start
    return row


def check_refused_sample(op: Any, dtype: torch.dtype, index: int = 0) -> conformance.SampleOutcome:
    """The outcome of sample ``index`` of ``op`` in ``dtype`` (one of :func:`cuda_refused_dtypes`)."""
    return _check_sample(op, dtype, index, REFUSED_PHASE)
