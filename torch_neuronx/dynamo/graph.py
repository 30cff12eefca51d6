"""One AOTAutograd graph compiled into one executable (decision 13).

A :class:`CompiledGraph` is what the backend hands back to AOTAutograd for a forward, backward or
inference graph. A call reads its inputs' storages exactly as an eager op does (the C++ call
signature: storage slots, views read inside the executable), runs the graph's nodes through the
same lowerings as eager (lowering/engine.py), and returns new neuron tensors.

Shapes are static: an executable is built per input signature. Graphs that Dynamo made symbolic on
its own (automatic dynamic shapes after a shape change) are specialised at run time to the concrete
sizes they receive, which is the same thing as recompiling for the new shape.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.fx

from torch_neuronx import _C, _config
from torch_neuronx._compat.torch_internals import (
    OpOverload,
    dynamo_disabled,
    fake_like,
    make_fx,
    mark_boxed,
    pytree,
    same_storage,
    without_aot_first_call_analysis,
)
from torch_neuronx.dynamo import eager_refusals
from torch_neuronx.dynamo.random_replays import eager_random_replays
from torch_neuronx.dynamo.runtime_ints import HostArithmetic, RuntimeInts
from torch_neuronx.dynamo.runtime_ints import concretise as concretise_runtime_ints
from torch_neuronx.dynamo.runtime_ints import find as find_runtime_ints
from torch_neuronx.dynamo.runtime_ints import set_values as set_runtime_int_values
from torch_neuronx.eager.math_bits import resolve_math_bits
from torch_neuronx.lowering import engine
from torch_neuronx.runtime import arguments, executable, host_memory, launch_records, storage_writes
from torch_neuronx.runtime.cores import device_entry_point
from torch_neuronx.runtime.dtypes import CODE_OF
from torch_neuronx.runtime.executable_cache import EXECUTABLES, with_thread_count

_graph_ids = itertools.count()


@dataclasses.dataclass
class GraphMetrics:
    """Per-graph numbers reported by ``torch_neuronx.get_dynamo_metrics()``.

    Times are seconds: ``lowering_s`` traces the FX graph into StableHLO, ``compile_s`` is XLA
    compilation (a persistent-cache hit makes it small); both sum over the graph's input signatures.
    """

    graph_id: int
    kind: str
    nodes: int
    signatures: int = 0
    lowering_s: float = 0.0
    compile_s: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    persistent_cache_hits: int = 0
    eager_fallback: bool = False


METRICS: list[GraphMetrics] = []


class CompileError(RuntimeError):
    """A graph node cannot be lowered; names the node and the user source line that produced it."""


def _is_symbolic(value: Any) -> bool:
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        return True
    return isinstance(value, torch.Tensor) and any(isinstance(size, torch.SymInt) for size in value.shape)


def source_line(node: torch.fx.Node) -> str:
    """The user's source location of a node: the innermost frame of the stack Dynamo recorded; for
    a node without one (conversions AOTAutograd inserts), the nearest later node's that uses it."""
    own = _innermost_frame(node)
    if own is not None:
        return own
    queue, seen = list(node.users), set()
    while queue:
        user = queue.pop(0)
        if user in seen:
            continue
        seen.add(user)
        found = _innermost_frame(user)
        if found is not None:
            return f"no source location recorded; its result is used at {found}"
        queue.extend(user.users)
    return "no source location recorded"


def _innermost_frame(node: torch.fx.Node) -> str | None:
    lines = [line.strip() for line in (node.meta.get("stack_trace") or "").splitlines() if line.strip()]
    frames = [i for i, line in enumerate(lines) if line.startswith('File "')]
    if not frames:
        return None
    last = frames[-1]
    code = lines[last + 1] if last + 1 < len(lines) and not lines[last + 1].startswith("^") else ""
    return f"{lines[last]}: {code}".rstrip(": ")


def _is_host_scalar(tensor: torch.Tensor) -> bool:
    """A 0-d CPU tensor: a runtime scalar beside neuron tensors (``np.sqrt(d)`` that Dynamo computes
    on the CPU in float64)."""
    return tensor.device.type == "cpu" and tensor.dim() == 0


_PYTHON_FLOAT_NOTE = (
    "A 0-dim float64 tensor in a compiled graph is a Python float: arithmetic on a float read with "
    ".item() (torch._dynamo.config.capture_scalar_outputs) is float64 arithmetic in the graph. Do it "
    "on the tensor instead (x.sum() * 0.1, not x.sum().item() * 0.1), or let .item() break the graph."
)


def _check_dtypes(graph: torch.fx.GraphModule) -> None:
    """Raises the eager dtype policy's TypeError (decision 8: no FP64 on Trainium) for the first node
    that computes a float64 or complex128 tensor, naming the node and its source line."""
    for node in graph.graph.nodes:
        value = node.meta.get("val")
        for tensor in value if isinstance(value, (tuple, list)) else [value]:
            if node.op == "placeholder" and isinstance(tensor, torch.Tensor) and _is_host_scalar(tensor):
                continue  # a 0-d CPU input is a scalar to the ops on neuron, as in eager (their results are checked)
            if isinstance(tensor, torch.Tensor) and tensor.dtype in (torch.float64, torch.complex128):
                name = f"torch.compile(backend='neuron') node {node.name} ({source_line(node)})"
                try:
                    _C._check_dtype_supported(CODE_OF[tensor.dtype], name)
                except TypeError as error:
                    if tensor.dim() == 0:
                        error.add_note(_PYTHON_FLOAT_NOTE)
                    raise


def _check_dispatched_dtypes(graph: torch.fx.GraphModule) -> None:
    """Raises CUDA's error for the first node whose op CUDA's eager kernel refuses in its dtype
    (eager/dispatched_dtypes.py), as the same ops raise eagerly. A compiled graph runs eager's
    kernels' refusals where aot_eager and inductor's fallback kernels would reach CUDA's; without
    this the lowering computed values of no defined meaning (softmax of integers) or leaked JAX's
    errors (silu of integers). The exception is CUDA's, with a note naming the node.

    Raises:
        NotImplementedError, RuntimeError: CUDA's exception and message.
    """
    for node in graph.graph.nodes:
        if (
            node.op != "call_function"
            or not isinstance(node.target, OpOverload)
            or not eager_refusals.checks(node.target)
        ):
            continue
        values = [
            pytree.tree_map_only(torch.fx.Node, lambda v: v.meta.get("val"), value)
            for value in engine.schema_values(node.target, node.args, node.kwargs)
        ]
        try:
            eager_refusals.check_call(node.target, values, node.meta.get("val"))
        except RuntimeError as error:
            error.add_note(f"torch.compile(backend='neuron') node {node.name} ({source_line(node)})")
            raise


def _returned_inputs(graph: torch.fx.GraphModule) -> list[tuple[int, int]]:
    """(output position, input position) of each input ``graph`` returns as it is."""
    positions = {node: index for index, node in enumerate(n for n in graph.graph.nodes if n.op == "placeholder")}
    output = next(node for node in graph.graph.nodes if node.op == "output")
    leaves = pytree.tree_leaves(output.args[0])
    return [
        (at, positions[leaf]) for at, leaf in enumerate(leaves) if isinstance(leaf, torch.fx.Node) and leaf in positions
    ]


class CompiledGraph:
    """The callable AOTAutograd runs for one graph, with one list of inputs (the boxed convention,
    so that inputs can be freed early). Graph inputs are tensors and integers, never lists, so a call
    with the inputs as separate arguments is accepted too."""

    def __init__(self, graph: torch.fx.GraphModule, example_inputs: list[Any], kind: str) -> None:
        mark_boxed(self)
        self.graph = graph
        self.kind = kind
        self.metrics = GraphMetrics(next(_graph_ids), kind, sum(n.op == "call_function" for n in graph.graph.nodes))
        METRICS.append(self.metrics)
        caller_inputs = len(example_inputs)
        self.host_arithmetic, example_inputs = HostArithmetic.hoist(graph, example_inputs)
        self.returned_inputs = _returned_inputs(graph)
        runtime_ints = find_runtime_ints(graph, example_inputs)
        runtime_ints.caller_inputs = caller_inputs
        self.symbolic = any(
            _is_symbolic(value) for index, value in enumerate(example_inputs) if index not in runtime_ints.inputs
        )
        if self.symbolic:  # specialised on every value with the shapes
            runtime_ints = RuntimeInts([])
        else:
            concretise_runtime_ints(graph, example_inputs, runtime_ints)
        self.runtime_ints = runtime_ints
        #: The core of a graph whose inputs hold no tensor (factories only: ``torch.rand(3,
        #: device="neuron:1")``), which the call signature cannot take from its inputs; else None.
        self.core = None if any(isinstance(v, torch.Tensor) for v in example_inputs) else _core_of_results(graph)
        self.signature = arguments.graph_signature(
            f"neuron graph {self.metrics.graph_id} ({kind})", example_inputs, runtime_ints.inputs
        )
        self.cache: dict[bytes, Any] = {}  # bounded by runtime.executable_cache
        self.eager = False
        if not self.symbolic:
            try:
                self._check_lowerable(graph)
            except CompileError:
                if _config.disable_fallback_execution():
                    raise
                self.eager = True

    @device_entry_point
    def __call__(self, *args: Any) -> list[Any]:
        if len(args) == 1 and type(args[0]) is list:
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()  # the boxed convention lets the callee drop its references to the inputs
        if self.host_arithmetic.results:
            args = (*args, *self.host_arithmetic.values(args))
        if self.core is not None and self.core != _C._current_device():
            previous = _C._current_device()
            _C._set_device(self.core)  # the executable runs on the core its factories name
            try:
                return self._call(args)
            finally:
                _C._set_device(previous)
        return self._call(args)

    def _call(self, args: tuple[Any, ...]) -> list[Any]:
        if self.runtime_ints.inputs:
            self.runtime_ints.check(args)
        call_args, args = args, self.runtime_ints.executable_args(args)
        if storage_writes.active:  # an async collective's result still to land (runtime/storage_writes.py)
            storage_writes.wait_for_writes_into(args)
        key, inputs, device, slot_tensors, generator, values, convert_first = self.signature.prepare(args, {})
        key = with_thread_count(key)
        if convert_first:  # a lazy conjugate/negative view (x.conj(), or an eagerly run _conj node)
            return self._call(tuple(resolve_math_bits(a) if isinstance(a, torch.Tensor) else a for a in call_args))
        self.metrics.calls += 1
        run = self.cache.get(key)
        if run is None:
            # Building traces and compiles: keep Dynamo out of JAX's frames, and AOTAutograd's
            # first-call analysis out of the lowering's meta-kernel calls.
            started = launch_records.now() if launch_records.active else 0
            compile_before = self.metrics.lowering_s + self.metrics.compile_s
            with dynamo_disabled(), without_aot_first_call_analysis():
                run = self._build(args, inputs)
                EXECUTABLES.admit(self.cache, key, run)
                outputs = run(inputs, device, slot_tensors, generator, values)
            if started:
                built_s = self.metrics.lowering_s + self.metrics.compile_s - compile_before
                detail = f"{self.signature.op_name}: lowering and compilation {built_s * 1e3:.3f} ms"
                launch_records.runtime_event("neuronCacheMiss", device, started, 0, detail)
            return self._with_returned_inputs(outputs, call_args)
        EXECUTABLES.touch(self.cache, key)
        self.metrics.cache_hits += 1
        return self._with_returned_inputs(run(inputs, device, slot_tensors, generator, values), call_args)

    def _with_returned_inputs(self, outputs: list[Any], args: tuple[Any, ...]) -> list[Any]:
        """The outputs, with the caller's own object for each input the graph returns as it is: this
        call's value of a runtime int (the executable returns the value it was built with), and the
        input tensor itself, as AOTAutograd's eager and Inductor's graphs return it. A forward saving
        an input for the backward must save that tensor, which requires grad: a double backward then
        reaches AOTAutograd's "does not currently support double backward" through it, where a copy
        left the input out of the graph ("appears to not have been used", or None)."""
        for at, index in self.returned_inputs:
            outputs[at] = args[index]
        return outputs

    def _check_lowerable(self, graph: torch.fx.GraphModule) -> None:
        _check_dtypes(graph)
        try:
            engine.check_lowerable(graph)
        except engine.Unsupported as unsupported:
            node = next(  # in the graph or in one of its control-flow subgraphs
                n
                for module in graph.modules()
                if isinstance(module, torch.fx.GraphModule)
                for n in module.graph.nodes
                if n.op == "call_function" and n.target is unsupported.op
            )
            raise CompileError(
                f"torch.compile(backend='neuron') cannot compile node {node.format_node()}: "
                f"{unsupported.op} {unsupported.reason}. It comes from: {source_line(node)}. "
                "Set TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 to run such graphs eagerly instead."
            ) from unsupported

    def _specialised(self, args: tuple[Any, ...], values: list[Any]) -> torch.fx.GraphModule:
        """The graph retraced with the concrete sizes of this call (automatic dynamic shapes): fake
        tensors of the call's tensors (on their devices, as Dynamo's were), its sizes as numbers.
        Meta tensors would not do: a tensor the graph creates on the device (``torch.zeros(...,
        device=x.device)``) would then meet meta inputs in one op (JetMoE's ``index_add``)."""
        concrete = fake_like(
            [arg if isinstance(arg, torch.Tensor) else value for arg, value in zip(args, values, strict=True)]
        )
        graph = make_fx(self.graph, tracing_mode="fake")(*concrete)
        self._check_lowerable(graph)
        return graph

    def _build(self, args: tuple[Any, ...], inputs: list[Any]) -> executable.Runner:
        if self.eager:
            return self._eager_fallback()
        description = self.signature.describe(args, {})
        if self.runtime_ints.inputs:
            set_runtime_int_values(self.graph, self.runtime_ints, args)
        try:
            graph = self._specialised(args, list(description.values)) if self.symbolic else self.graph
        except CompileError:
            if _config.disable_fallback_execution():
                raise
            return self._eager_fallback()
        _check_dispatched_dtypes(graph)
        output_node = next(n for n in graph.graph.nodes if n.op == "output")
        output_metas = [
            leaf.meta["val"] if isinstance(leaf, torch.fx.Node) else leaf
            for leaf in pytree.tree_leaves(output_node.args[0])
        ]

        def compute(context: Any, graph_inputs: list[Any]) -> list[Any]:
            return engine.run_graph(graph, graph_inputs)

        built = executable.build(
            self.signature.op_name,
            description,
            inputs,
            compute,
            results=[
                executable.ResultLayout.of(meta) if isinstance(meta, torch.Tensor) else _host_value(meta)
                for meta in output_metas
            ],
            random_elements=engine.random_elements(graph),
            keep_text=self._artifact_keeper(graph),
            kind="graph",
        )
        host_memory.trim()  # what compiling freed goes back to the system (runtime/host_memory.py)
        self.metrics.signatures += 1
        self.metrics.lowering_s += built.times.lowering_s
        self.metrics.compile_s += built.times.compile_s
        self.metrics.persistent_cache_hits += built.times.persistent_cache_hit
        return _with_input_views(built.launch, _input_views(graph, output_metas)) if self.symbolic else built.launch

    def _eager_fallback(self) -> Any:
        """Runs the graph op by op on the device's eager kernels (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0)."""
        self.metrics.eager_fallback = True
        eager_random_replays(self.graph)
        warnings.warn(
            f"{self.signature.op_name} could not be compiled; it runs eagerly, op by op "
            "(TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0).",
            stacklevel=3,
        )
        graph = self.graph

        def run(
            inputs: list[Any], device: int, slot_tensors: list[Any], generator: Any, values: list[Any]
        ) -> list[Any]:
            outputs = graph(*values)
            return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]

        return run

    def _artifact_keeper(self, graph: torch.fx.GraphModule) -> Any:
        """With TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1, what keeps the graph's FX code and, given
        to the executable builder, its StableHLO text under TORCH_NEURONX_DEBUG_DIR; else None."""
        if not _config.preserve_compilation_artifacts():
            return None
        folder = Path(_config.debug_dir()) / f"graph_{self.metrics.graph_id}_{self.kind}"
        folder.mkdir(parents=True, exist_ok=True)
        signature = self.metrics.signatures + 1  # this signature, counted once it is built
        (folder / f"fx_graph_{signature}.py").write_text(graph.print_readable(print_output=False))
        return (folder / f"stablehlo_{signature}.mlir").write_text


def _input_views(graph: torch.fx.GraphModule, output_metas: list[Any]) -> list[tuple[int, int, Any, Any, int]]:
    """(output position, input position, sizes, strides, storage offset) of each output of a
    specialised graph that is a view of an input. AOTAutograd rebuilds an output that aliases an
    input of a symbolic graph with ``as_strided`` over that input from the output's own metadata;
    the executable's copy starts at offset 0, so ``t[n]`` gave ``t[0]`` for every n (helper-64)."""
    inputs = [node.meta.get("val") for node in graph.graph.nodes if node.op == "placeholder"]
    views = []
    for at, meta in enumerate(output_metas):
        if not isinstance(meta, torch.Tensor):
            continue
        for index, value in enumerate(inputs):
            if isinstance(value, torch.Tensor) and same_storage(meta, value):
                views.append((at, index, tuple(meta.shape), meta.stride(), meta.storage_offset()))
                break
    return views


def _with_input_views(launch: executable.Runner, views: list[tuple[int, int, Any, Any, int]]) -> executable.Runner:
    """``launch``, its outputs that are views of inputs made as those views of the call's inputs."""
    if not views:
        return launch

    def launch_with_views(inputs: list[Any], device: int, slot_tensors: list[Any], generator: Any, values: list[Any]):
        outputs = launch(inputs, device, slot_tensors, generator, values)
        for at, index, sizes, strides, offset in views:
            outputs[at] = values[index].as_strided(sizes, strides, offset)
        return outputs

    return launch_with_views


def _core_of_results(graph: torch.fx.GraphModule) -> int | None:
    """The index of the neuron core the graph's tensors are on (one per executable), or None."""
    for node in graph.graph.nodes:
        for value in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(value, torch.Tensor) and value.device.type == "neuron":
                return value.device.index or 0
    return None


def _host_value(meta: Any) -> Any:
    """A non-tensor graph output (None, or an int PyTorch computed while tracing)."""
    return int(meta) if isinstance(meta, torch.SymInt) else meta
