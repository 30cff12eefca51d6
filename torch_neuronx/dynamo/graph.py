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
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import torch
import torch.fx

from torch_neuronx import _C, _config
from torch_neuronx._compat.torch_internals import dynamo_disabled, make_fx, without_aot_first_call_analysis
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime import arguments, compile_cache, cores, faults, queue
from torch_neuronx.runtime.dtypes import CODE_OF
from torch_neuronx.runtime.executable_cache import EXECUTABLES
from torch_neuronx.runtime.layout import contiguous_strides

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


def compile_graph(graph: torch.fx.GraphModule, example_inputs: list[Any], kind: str) -> Any:
    """The callable AOTAutograd gets for one graph: one executable, or compiled parts around custom
    ops that run eagerly (dynamo/partition.py)."""
    from torch_neuronx.dynamo.partition import PartitionedGraph, runs_eagerly

    if any(runs_eagerly(node) for node in graph.graph.nodes):
        return PartitionedGraph(graph, kind)
    return CompiledGraph(graph, example_inputs, kind)


class CompileError(RuntimeError):
    """A graph node cannot be lowered; names the node and the user source line that produced it."""


def _is_symbolic(value: Any) -> bool:
    if isinstance(value, torch.SymInt):
        return True
    return isinstance(value, torch.Tensor) and any(isinstance(size, torch.SymInt) for size in value.shape)


def _source_line(node: torch.fx.Node) -> str:
    """The user's source location of a node: the innermost frame of the stack Dynamo recorded."""
    lines = [line.strip() for line in (node.meta.get("stack_trace") or "").splitlines() if line.strip()]
    frames = [i for i, line in enumerate(lines) if line.startswith('File "')]
    if not frames:
        return "(no source location recorded)"
    last = frames[-1]
    code = lines[last + 1] if last + 1 < len(lines) and not lines[last + 1].startswith("^") else ""
    return f"{lines[last]}: {code}".rstrip(": ")


def _check_dtypes(graph: torch.fx.GraphModule) -> None:
    """Raises the eager dtype policy's TypeError (decision 8: no FP64 on Trainium) for the first node
    that computes a float64 or complex128 tensor, naming the node and its source line."""
    for node in graph.graph.nodes:
        value = node.meta.get("val")
        for tensor in value if isinstance(value, (tuple, list)) else [value]:
            if isinstance(tensor, torch.Tensor) and tensor.dtype in (torch.float64, torch.complex128):
                name = f"torch.compile(backend='neuron') node {node.name} ({_source_line(node)})"
                _C._check_dtype_supported(CODE_OF[tensor.dtype], name)


class CompiledGraph:
    """The callable AOTAutograd runs for one graph, with one list of inputs (the boxed convention,
    so that inputs can be freed early). Graph inputs are tensors and integers, never lists, so a call
    with the inputs as separate arguments is accepted too."""

    def __init__(self, graph: torch.fx.GraphModule, example_inputs: list[Any], kind: str) -> None:
        # An instance attribute, so that Dynamo's wrapper around backward compilers copies it.
        self._boxed_call = True
        self.graph = graph
        self.kind = kind
        self.metrics = GraphMetrics(next(_graph_ids), kind, sum(n.op == "call_function" for n in graph.graph.nodes))
        METRICS.append(self.metrics)
        self.symbolic = any(_is_symbolic(value) for value in example_inputs)
        specs = []
        for index, value in enumerate(example_inputs):
            kind_of = _C.ArgKind.TENSOR if isinstance(value, torch.Tensor) else _C.ArgKind.STATIC
            specs.append(_C.ArgSpec(f"input{index}", kind_of, False, False, None))
        self.signature = _C.CallSignature(f"neuron graph {self.metrics.graph_id} ({kind})", specs)
        self.cache: dict[bytes, Any] = {}  # bounded by runtime.executable_cache
        self.eager = False
        if not self.symbolic:
            try:
                self._check_lowerable(graph)
            except CompileError:
                if _config.disable_fallback_execution():
                    raise
                self.eager = True

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) == 1 and type(args[0]) is list:
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()  # the boxed convention lets the callee drop its references to the inputs
        key, inputs, device, _, generator, values, _, _ = self.signature.prepare(args, {})
        self.metrics.calls += 1
        run = self.cache.get(key)
        if run is None:
            # Building traces and compiles: keep Dynamo out of JAX's frames, and AOTAutograd's
            # first-call analysis out of the lowering's meta-kernel calls.
            with dynamo_disabled(), without_aot_first_call_analysis():
                run = self._build(values, inputs)
                EXECUTABLES.admit(self.cache, key, run)
                return run(inputs, device, generator, values)
        EXECUTABLES.touch(self.cache, key)
        self.metrics.cache_hits += 1
        return run(inputs, device, generator, values)

    def _check_lowerable(self, graph: torch.fx.GraphModule) -> None:
        _check_dtypes(graph)
        try:
            engine.check_lowerable(graph)
        except engine.Unsupported as unsupported:
            node = next(n for n in graph.graph.nodes if n.op == "call_function" and n.target is unsupported.op)
            raise CompileError(
                f"torch.compile(backend='neuron') cannot compile node {node.format_node()}: "
                f"{unsupported.op} has no neuron lowering or decomposition. It comes from: {_source_line(node)}. "
                "Set TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 to run such graphs eagerly instead."
            ) from unsupported

    def _specialised(self, values: list[Any]) -> torch.fx.GraphModule:
        """The graph retraced with the concrete sizes of this call (automatic dynamic shapes)."""
        concrete = [
            torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor) else v
            for v in values
        ]
        graph = make_fx(self.graph, tracing_mode="real")(*concrete)
        self._check_lowerable(graph)
        return graph

    def _build(self, values: list[Any], inputs: list[Any]) -> Any:
        _, _, device, _, _, _, description, _ = self.signature.prepare(tuple(values), {}, describe=True)
        described, slots, buffer_count, scalar_count = description
        start = time.perf_counter()
        if self.eager:
            return self._eager_fallback()
        try:
            graph = self._specialised(values) if self.symbolic else self.graph
        except CompileError:
            if _config.disable_fallback_execution():
                raise
            return self._eager_fallback()
        random_elements = engine.random_elements(graph)
        checks: list[tuple[str, type[Exception]]] = []  # filled when the executable is traced

        def compute(*flat_inputs: Any) -> tuple[Any, ...]:
            _, graph_inputs, seed, offset = arguments.unpack(
                flat_inputs, described, slots, buffer_count, scalar_count, bool(random_elements)
            )
            context = registry.TraceContext(seed, offset)
            with registry.tracing(context):
                results = engine.run_graph(graph, graph_inputs)
            checks[:] = [(message, error) for _, _, message, error in context.checks]
            check_outputs = [x for failed, detail, _, _ in context.checks for x in (failed, detail)]
            tensors = [r.reshape(-1) for r, meta in zip(results, output_metas, strict=True) if _is_tensor(meta)]
            return (*tensors, *check_outputs)

        output_node = next(n for n in graph.graph.nodes if n.op == "output")
        output_metas = [
            leaf.meta["val"] if isinstance(leaf, torch.fx.Node) else leaf
            for leaf in torch.utils._pytree.tree_leaves(output_node.args[0])
        ]
        jitted = jax.jit(compute, out_shardings=jax.sharding.SingleDeviceSharding(cores.core(device)))
        lowered = jitted.lower(*inputs, *((0, 0) if random_elements else ()))
        lowered_at = time.perf_counter()
        hits_before = compile_cache.hits
        executable = lowered.compile()
        compiled_at = time.perf_counter()
        self.metrics.signatures += 1
        self.metrics.lowering_s += lowered_at - start
        self.metrics.compile_s += compiled_at - lowered_at
        self.metrics.persistent_cache_hits += compile_cache.hits - hits_before
        self._keep_artifacts(graph, lowered)
        layout = _C.OutputLayout(
            [
                (list(m.shape), list(contiguous_strides(tuple(m.shape))), CODE_OF[m.dtype])
                for m in output_metas
                if _is_tensor(m)
            ]
        )
        name = self.signature.op_name

        def run(inputs: list[Any], device: int, generator: Any, values: list[Any]) -> list[Any]:
            tensors = layout.allocate(device)  # before the launch: an OOM raises with nothing in flight
            if random_elements:
                inputs = [*inputs, *_C._philox_inputs(generator, device, random_elements)]
            results = executable(*inputs)
            if checks:
                faults.record(device, name, list(results[-2 * len(checks) :]), checks)
            if results:
                queue.note_launch(device, results[0])
            layout.bind(tensors, results)
            produced = iter(tensors)
            return [next(produced) if _is_tensor(meta) else _host_value(meta) for meta in output_metas]

        return run

    def _eager_fallback(self) -> Any:
        """Runs the graph op by op on the device's eager kernels (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0)."""
        self.metrics.eager_fallback = True
        warnings.warn(
            f"{self.signature.op_name} could not be compiled; it runs eagerly, op by op "
            "(TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0).",
            stacklevel=3,
        )
        graph = self.graph

        def run(inputs: list[Any], device: int, generator: Any, values: list[Any]) -> list[Any]:
            outputs = graph(*values)
            return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]

        return run

    def _keep_artifacts(self, graph: torch.fx.GraphModule, lowered: Any) -> None:
        if not _config.preserve_compilation_artifacts():
            return
        folder = Path(_config.debug_dir()) / f"graph_{self.metrics.graph_id}_{self.kind}"
        folder.mkdir(parents=True, exist_ok=True)
        signature = self.metrics.signatures
        (folder / f"fx_graph_{signature}.py").write_text(graph.print_readable(print_output=False))
        (folder / f"stablehlo_{signature}.mlir").write_text(lowered.as_text())


def _is_tensor(meta: Any) -> bool:
    return isinstance(meta, torch.Tensor)


def _host_value(meta: Any) -> Any:
    """A non-tensor graph output (None, or an int PyTorch computed while tracing)."""
    return int(meta) if isinstance(meta, torch.SymInt) else meta
