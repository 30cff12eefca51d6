"""torch.compile(backend="neuron") (decision 13). See backend.py and graph.py."""

from __future__ import annotations

from typing import Any

from torch_neuronx._compat.torch_internals import keep_dynamo_out_of
from torch_neuronx.dynamo.backend import neuron_backend

# Dynamo imports this module when torch.compile(backend="neuron") looks the backend up, before any
# compiled frame runs: from then on it must not trace into the backend's kernels or JAX.
keep_dynamo_out_of("torch_neuronx", "jax", "jaxlib")

__all__ = ["get_dynamo_metrics", "neuron_backend"]


def get_dynamo_metrics() -> list[dict[str, Any]]:
    """One entry per compiled graph: ``graph_id``, ``kind`` (forward, backward, inference),
    ``nodes`` (ATen ops in the graph), ``signatures`` (input signatures compiled), ``lowering_s`` and
    ``compile_s`` (seconds spent tracing to StableHLO and in XLA compilation), ``calls``,
    ``cache_hits`` (calls served by an executable already built), ``persistent_cache_hits``
    (executables loaded from the on-disk cache instead of compiled) and ``eager_fallback``."""
    import dataclasses

    from torch_neuronx.dynamo.graph import METRICS

    return [dataclasses.asdict(metrics) for metrics in METRICS]
