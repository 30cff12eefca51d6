"""torch.compile(backend="neuron") (decision 13). See backend.py and graph.py."""

from __future__ import annotations

from typing import Any

from torch_neuronx.dynamo.backend import neuron_backend

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
