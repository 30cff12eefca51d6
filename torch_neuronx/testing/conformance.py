"""The OpInfo conformance runner: every OpInfo sample on neuron, checked against the CPU.

For each OpInfo, dtype and sample input, :func:`run_sample` runs the op on CPU tensors and on their
neuron copies and records one :class:`SampleOutcome`: ``pass``, ``mismatch`` (values beyond the
tolerance, with the largest errors), ``error`` (the exception), ``fallback`` (right values, but some
ATen ops ran on the CPU) or ``skipped`` (with the reason). An exception CPU raises too, with the same
type, is a pass. The backward phase compares input gradients in float32 for differentiable ops.

:func:`torch_neuronx.testing.sweep.run_conformance` sweeps many ops within a time budget;
``torch-neuronx conformance`` (:mod:`torch_neuronx.cli`) runs it and writes the report
(:mod:`torch_neuronx.testing.report`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import re
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

import torch_neuronx
from torch_neuronx._compat.testing_internals import default_tolerances
from torch_neuronx._compat.torch_internals import pytree
from torch_neuronx.testing import opinfo, tables
from torch_neuronx.testing.compare import compare, widen

__all__ = ["OUTCOMES", "SampleOutcome", "check_sample", "family", "make_row", "run_sample", "same_words", "samples"]

#: Every value of :attr:`SampleOutcome.outcome`.
OUTCOMES = ("pass", "mismatch", "error", "fallback", "skipped")

#: Exception messages and assertion details are cut to this many characters.
_DETAIL_CHARS = 400


@dataclasses.dataclass
class SampleOutcome:
    """What happened to one sample of one OpInfo in one dtype and phase.

    ``sample_index`` is -1 for a row that stands for every sample of the (op, dtype, phase): a
    dtype the device lacks, an OpInfo skip, or samples the time budget left unrun.
    """

    op: str
    variant: str
    dtype: str
    sample_index: int
    phase: str
    outcome: str
    detail: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    seconds: float = 0.0
    fallback_ops: list[str] = dataclasses.field(default_factory=list)
    family: str = ""

    @property
    def name(self) -> str:
        """The OpInfo's full name (``div.floor_rounding``)."""
        return f"{self.op}.{self.variant}" if self.variant else self.op


def make_row(op: Any, dtype: torch.dtype, index: int, phase: str, outcome: str, detail: str = "") -> SampleOutcome:
    """A :class:`SampleOutcome` for sample ``index`` of ``op`` (an OpInfo) in ``dtype``."""
    return SampleOutcome(op.name, op.variant_test_name, _dtype_name(dtype), index, phase, outcome, detail)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _describe(error: BaseException) -> str:
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}"[:_DETAIL_CHARS]


def _unsupported_dtype(value: Any) -> str | None:
    """Why the device cannot hold a tensor of ``value`` (a pytree), or None."""
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor) and leaf.dtype in tables.UNSUPPORTED_DTYPES:
            return f"{_dtype_name(leaf.dtype)}: {tables.UNSUPPORTED_DTYPES[leaf.dtype]}"
    return None


def _flatten(value: Any) -> tuple[list[Any], Any]:
    """The leaves of a sample's arguments, keeping each ``torch.Size`` whole: pytree flattens one
    into its ints and rebuilds a tuple, which ops print otherwise ("(3, 6, 5)" for "torch.Size([3,
    6, 5])" in ``max_unpool``'s errors)."""
    return pytree.tree_flatten(value, is_leaf=lambda leaf: isinstance(leaf, torch.Size))


def _to_neuron(value: Any, host_leaves: frozenset[int] = frozenset()) -> Any:
    """A copy of ``value`` (a pytree) on neuron: tensors copied as leaves keeping ``requires_grad``
    (one copy per distinct tensor, so aliasing arguments stay aliased) except the leaves at the
    positions in ``host_leaves``, and CPU devices in factory arguments replaced by neuron."""
    copies: dict[int, torch.Tensor] = {}
    leaves, spec = _flatten(value)

    def move(position: int, leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor) and position not in host_leaves:
            if id(leaf) not in copies:
                copies[id(leaf)] = _same_layout_on_neuron(leaf.detach()).requires_grad_(leaf.requires_grad)
            return copies[id(leaf)]
        if isinstance(leaf, torch.device) and leaf.type == "cpu":
            return torch.device("neuron")
        return leaf

    return pytree.tree_unflatten([move(i, leaf) for i, leaf in enumerate(leaves)], spec)


def _same_layout_on_neuron(tensor: torch.Tensor) -> torch.Tensor:
    """A neuron copy of ``tensor`` with the same strides and storage offset over a copy of its whole
    storage, so that ops which read the storage (``as_strided`` with an absolute offset) see the
    same elements on both devices."""
    storage_elements = tensor.untyped_storage().nbytes() // tensor.element_size()
    if tensor.layout != torch.strided or (tensor.storage_offset() == 0 and storage_elements == tensor.numel()):
        return tensor.to("neuron")
    whole = torch.empty(0, dtype=tensor.dtype).set_(tensor.untyped_storage(), 0, (storage_elements,), (1,))
    return whole.to("neuron").as_strided(tensor.size(), tensor.stride(), tensor.storage_offset())


def _to_cpu(value: Any) -> Any:
    return pytree.tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, value)


def _arguments(sample: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    kwargs = dict(sample.kwargs)
    if kwargs.get("device") == "cpu":
        kwargs["device"] = torch.device("cpu")
    return sample.input, tuple(sample.args), kwargs


def _forward(op: Any, sample: Any) -> Any:
    input_, args, kwargs = _arguments(sample)
    return sample.output_process_fn_grad(op(input_, *args, **kwargs))


def _in_place(op: Any, sample: Any) -> Any:
    """The OpInfo's in-place variant applied to a copy of the sample's input: the values it leaves
    there. A sample whose input would have to broadcast (``broadcasts_input``) raises on the CPU, and
    must raise on neuron too."""
    input_, args, kwargs = _arguments(sample)
    target = input_.clone()
    returned = op.inplace_variant(target, *args, **kwargs)
    if returned is not target:
        raise RuntimeError(f"{opinfo.full_name(op)}: the in-place variant returned a new tensor, not its input")
    return target


def _differentiable(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor) and t.requires_grad]


def _backward(op: Any, sample: Any, seed: int, widened: bool = False) -> tuple[torch.Tensor | None, ...]:
    """Input gradients of ``op`` at ``sample`` for fixed random output gradients (drawn on CPU).
    ``widened`` marks the float64 reference run, whose forward is float64 by construction."""
    inputs = _differentiable((sample.input, sample.args, sample.kwargs))
    forward = _forward(op, sample)
    unsupported = None if widened else _unsupported_dtype(forward)
    if unsupported is not None:
        raise _NotCompared(f"the forward result holds a tensor of {unsupported}")
    outputs = _differentiable(forward)
    if not inputs or not outputs:
        raise _NotCompared("no input or output of the sample requires grad")
    generator = torch.Generator().manual_seed(seed)
    grads = [
        torch.randn(o.shape, dtype=torch.complex64 if o.is_complex() else torch.float32, generator=generator)
        for o in outputs
    ]
    grads = [g.to(o.device, o.dtype) for g, o in zip(grads, outputs, strict=True)]
    return torch.autograd.grad(outputs, inputs, grads, allow_unused=True)


class _NotCompared(Exception):
    """The sample has nothing to compare in this phase; the message says why."""


def _run_both(run: Callable[[Any], Any], sample: Any, neuron_sample: Any) -> tuple[Any, Any, BaseException | None]:
    """Runs ``run`` on CPU, then on neuron with op tracking cleared. Returns (CPU result or the
    exception it raised, neuron result with a synchronized host copy, the neuron exception)."""
    try:
        expected = _to_cpu(run(sample))
    except _NotCompared:
        raise
    except Exception as err:  # CPU errors are compared with neuron's (error parity)
        expected = err
    torch_neuronx.clear_op_tracking()
    try:
        actual = _to_cpu(run(neuron_sample))
        torch.neuron.synchronize()
        return expected, actual, None
    except _NotCompared:
        raise
    except Exception as err:  # every neuron failure becomes the sample's outcome
        _drain_faults()
        return expected, None, err


def run_sample(
    op: Any,
    sample: Any,
    dtype: torch.dtype,
    phase: str = "forward",
    index: int = 0,
    host_leaves: frozenset[int] = frozenset(),
    *,
    words: bool = False,
) -> SampleOutcome:
    """Runs one OpInfo sample (made on CPU) on CPU and on neuron and returns its outcome.

        ``phase`` is ``"forward"`` (compare results), ``"inplace"`` (compare what the OpInfo's in-place
        variant leaves in a copy of the input) or ``"backward"`` (compare input gradients; the
        sample must have been made with ``requires_grad=True``). ``host_leaves`` (see :func:`samples`)
    stay on the CPU in the neuron copy of the sample. With ``words``, an exception the CPU raises
    must be raised on neuron in the CPU's words too (:func:`same_words`), not only of its type.
    Never raises for a failing sample: every exception, including one the device raises at the
    synchronisation that ends the sample, becomes an ``error`` outcome.
    """
    row = make_row(op, dtype, index, phase, "pass")
    start = time.perf_counter()
    executed: dict[str, int] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            unsupported = _unsupported_dtype((sample.input, sample.args, sample.kwargs))
            if unsupported is not None:
                row.outcome, row.detail = "skipped", f"the sample holds a tensor of {unsupported}"
                return row
            neuron_sample = _neuron_sample(sample, host_leaves)
            if phase == "forward":
                run = reference_run = functools.partial(_forward, op)
            elif phase == "inplace":
                run = reference_run = functools.partial(_in_place, op)
            else:
                run = functools.partial(_backward, op, seed=index)
                reference_run = functools.partial(_backward, op, seed=index, widened=True)
            expected, actual, error = _run_both(run, sample, neuron_sample)
            row.fallback_ops = sorted(torch_neuronx.get_fallback_ops())
            executed = torch_neuronx.get_executed_ops()
            _judge(row, op, sample, expected, actual, error, lambda: _to_cpu(reference_run(_widened(sample))), words)
    except _NotCompared as reason:
        row.outcome, row.detail = "skipped", str(reason)
    except Exception as err:  # a sample must never stop the sweep
        row.outcome, row.detail = "error", _describe(err)
        _drain_faults()
    finally:
        row.seconds = time.perf_counter() - start
    row.family = family(op, executed)
    return row


def _neuron_sample(sample: Any, host_leaves: frozenset[int]) -> Any:
    return opinfo.sample_input(*_to_neuron(_arguments(sample), host_leaves), sample.output_process_fn_grad)


def _widened(sample: Any) -> Any:
    """The sample with its floating-point tensors in float64 (complex128), for the reference; a
    floating ``dtype=`` argument (a factory's result dtype) becomes float64 too."""
    input_, args, kwargs = widen(_arguments(sample))
    if isinstance(kwargs.get("dtype"), torch.dtype) and kwargs["dtype"].is_floating_point:
        kwargs = {**kwargs, "dtype": torch.float64}
    return opinfo.sample_input(input_, args, kwargs, sample.output_process_fn_grad)


def _judge(
    row: SampleOutcome,
    op: Any,
    sample: Any,
    expected: Any,
    actual: Any,
    error: BaseException | None,
    reference: Callable[[], Any] | None,
    words: bool = False,
) -> None:
    cpu_error = expected if isinstance(expected, Exception) else None
    unsupported = _unsupported_dtype(expected) if cpu_error is None else None
    if unsupported is not None:
        row.outcome, row.detail = "skipped", f"the CPU result holds a tensor of {unsupported}"
        return
    if error is not None:
        if cpu_error is not None and type(error) is type(cpu_error) and words and not same_words(error, cpu_error):
            row.outcome, row.detail = "error", f"{_describe(error)} (CPU raises {_describe(cpu_error)})"
        elif cpu_error is not None and type(error) is type(cpu_error):
            row.detail = f"both raise {type(error).__name__}"
        else:
            row.outcome = "error"
            row.detail = _describe(error) + (f" (CPU raises {_describe(cpu_error)})" if cpu_error else "")
        return
    if cpu_error is not None:
        row.outcome, row.detail = "mismatch", f"neuron returns a result, CPU raises {_describe(cpu_error)}"
        return
    atol, rtol = opinfo.tolerance(op, getattr(torch, row.dtype), row.phase)
    if opinfo.full_name(op) in tables.CUDA_STATISTICS:
        expected = _cuda_statistics(sample, actual, expected)
        if atol is None:
            atol, rtol = default_tolerances(getattr(torch, row.dtype))
    result = compare(actual, expected, atol=atol, rtol=rtol, reference=reference, ties=_ties(op, sample))
    row.max_abs_error, row.max_rel_error = result.max_abs_error, result.max_rel_error
    if result.problem is not None:
        row.outcome, row.detail = "mismatch", result.problem
    elif row.fallback_ops:
        row.outcome, row.detail = "fallback", "ran on the CPU: " + ", ".join(row.fallback_ops)
    else:
        row.detail = "; ".join(result.notes)


#: What a device fault adds to the kernel's message: the op and the core that raised it before, and
#: after, a note on where it was raised (runtime/faults.py).
_DEVICE_FAULT_PREFIX = re.compile(r"^aten::\S+ on neuron:\d+: ")
_DEVICE_FAULT_NOTE = "\nThis device fault was raised at a synchronization point"
#: How ATen prints a CPU tensor's type in its messages ("expand(torch.FloatTensor{[2, 3]}, ...)",
#: "stft(torch.FloatTensor[98], ..."); a neuron tensor's is "neuronFloatType", as CUDA's is
#: "torch.cuda.FloatTensor".
_CPU_TENSOR_TYPE = re.compile(r"\btorch\.(\w+)Tensor(?=[{\[])")


def same_words(error: BaseException, cpu_error: BaseException) -> bool:
    """Whether neuron's ``error`` says what the CPU's ``cpu_error`` says, word for word, once what an
    asynchronous device fault adds (the op: "aten::take on neuron:0: ", and a note after) is set
    aside and the CPU's tensor type names are read as the device's."""
    cpu_words = _CPU_TENSOR_TYPE.sub(r"neuron\1Type", str(cpu_error))
    words = _DEVICE_FAULT_PREFIX.sub("", str(error)).split(_DEVICE_FAULT_NOTE, 1)[0]
    return words == cpu_words


def _cuda_statistics(sample: Any, actual: Any, expected: Any) -> Any:
    """``expected`` with the saved statistics CUDA returns where the CPU's differ (see
    :data:`tables.CUDA_STATISTICS`): 16-bit float statistics widened to float32, and the empty eval
    mode statistics of batch norm replaced by the running mean and 1 / sqrt(running_var + eps)."""
    got, spec = pytree.tree_flatten(actual)
    want, want_spec = pytree.tree_flatten(expected)
    if spec != want_spec:
        return expected
    _, args, _ = _arguments(sample)
    training = args[4] if len(args) > 6 and isinstance(args[4], bool) else True
    if not training and len(want) == 3 and want[1].numel() == 0 and want[2].numel() == 0:
        running_mean, running_var, eps = args[2], args[3], args[6]
        want = [want[0], running_mean.float(), (running_var.float() + eps).rsqrt()]
    widened = [
        e.float()
        if isinstance(e, torch.Tensor)
        and isinstance(a, torch.Tensor)
        and a.dtype == torch.float32
        and e.dtype in (torch.bfloat16, torch.float16)
        else e
        for a, e in zip(got, want, strict=True)
    ]
    return pytree.tree_unflatten(widened, want_spec)


def _ties(op: Any, sample: Any) -> Callable[[torch.Tensor, torch.Tensor], bool] | None:
    """For ops in :data:`tables.TIES`: whether two index results select equal values of the
    sample's input along the op's dim."""
    if opinfo.full_name(op) not in tables.TIES or not isinstance(sample.input, torch.Tensor):
        return None
    source = sample.input.detach()
    dim = opinfo.dim_argument(op, sample.args, sample.kwargs)

    def same_values(got: torch.Tensor, want: torch.Tensor) -> bool:
        if got.dim() < source.dim():
            got, want = got.unsqueeze(dim), want.unsqueeze(dim)
        try:
            picked = torch.take_along_dim(source, got, dim), torch.take_along_dim(source, want, dim)
            torch.testing.assert_close(*picked, atol=0, rtol=0, equal_nan=True)
        except Exception:  # indices that cannot be gathered, or select other values: a mismatch
            return False
        return True

    return same_values


def _drain_faults() -> None:
    """Raises and drops the device faults a failed sample left pending (each synchronisation raises
    one), so that none is blamed on the next sample."""
    for _ in range(8):
        try:
            torch.neuron.synchronize()
            return
        except Exception:  # the fault belongs to the sample already recorded as failed
            continue


@functools.cache
def _lowering_families() -> tuple[dict[str, str], dict[str, str]]:
    """(ATen packet name -> family, ``aten::name.overload`` -> family) from the lowering modules."""
    from torch_neuronx._compat.torch_internals import op_name
    from torch_neuronx.lowering import load_lowerings, registry

    load_lowerings()
    packets: dict[str, str] = {}
    overloads: dict[str, str] = {}
    for overload, entry in registry.LOWERINGS.items():
        package, _, module = entry.fn.__module__.rpartition(".")
        if package != "torch_neuronx.lowering":
            continue  # a JAX function registered as it is: its module names no family
        name = op_name(overload)
        packets.setdefault(name.split("::")[-1].rsplit(".", 1)[0], module)
        overloads[name] = module
    return packets, overloads


def family(op: Any, executed: dict[str, int] | None = None) -> str:
    """The op family of an OpInfo: the lowering module of its ATen op, else the family its name
    prefix gives (``linalg.``, ``fft.``, ...), else the lowering module of the ATen op that ran most
    often for it (``executed``, from ``get_executed_ops()``), else one from the OpInfo's class."""
    packets, overloads = _lowering_families()
    for name in (op.aten_name, op.aten_name.replace(".", "_"), op.name.rsplit(".", 1)[-1]):
        if name in packets:
            return packets[name]
    by_prefix = opinfo.prefix_family(op)
    if by_prefix is not None:
        return by_prefix
    ran = collections.Counter({overloads[name]: count for name, count in (executed or {}).items() if name in overloads})
    if ran:
        return ran.most_common(1)[0][0]
    return opinfo.class_family(op)


def samples(
    op: Any, dtype: torch.dtype, requires_grad: bool, limit: int | None, seed: int = 0
) -> list[tuple[Any, frozenset[int]]]:
    """The first ``limit`` samples of ``op`` in ``dtype``, made on CPU from a fixed seed, each with
    its host leaves.

    The host leaves are the positions, among the sample's leaves, of the tensors the OpInfo makes on
    the CPU whatever the device (``tensor_split``'s indices): they stay on the CPU when the sample is
    copied to neuron. They are found by making the same samples on the meta device.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        made = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=requires_grad), limit))
        try:
            torch.manual_seed(seed)
            meta = list(itertools.islice(op.sample_inputs("meta", dtype, requires_grad=requires_grad), limit))
        except Exception:  # a generator that needs values: every tensor goes to neuron
            meta = []
    result = []
    for index, sample in enumerate(made):
        host: frozenset[int] = frozenset()
        if index < len(meta):
            spec = _flatten(_arguments(sample))[1]
            meta_leaves, meta_spec = _flatten(_arguments(meta[index]))
            if spec == meta_spec:
                host = frozenset(
                    i
                    for i, leaf in enumerate(meta_leaves)
                    if isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu"
                )
        result.append((sample, host))
    return result


def check_sample(op: Any, dtype: torch.dtype, phase: str = "forward", index: int = 0) -> SampleOutcome:
    """The outcome of sample ``index`` of ``op`` in ``dtype``, after the same checks as a sweep
    (device dtypes, the OpInfo's own skips)."""
    run, lacking = opinfo.device_dtypes(op, [dtype])
    reason = lacking.get(dtype) or opinfo.opinfo_skip(op, dtype)
    if reason is None and not run:
        reason = f"the OpInfo does not support {_dtype_name(dtype)} on CPU"
    if reason is None and phase == "backward" and not op.supports_autograd:
        reason = "the op is not differentiable"
    if reason is None and phase == "inplace" and op.inplace_variant is None:
        reason = "the op has no in-place variant"
    if reason is not None:
        return make_row(op, dtype, index, phase, "skipped", reason)
    made = samples(op, dtype, phase == "backward", index + 1)
    if len(made) <= index:
        return make_row(op, dtype, index, phase, "skipped", f"the OpInfo has only {len(made)} samples")
    return run_sample(op, made[index][0], dtype, phase, index, made[index][1])
