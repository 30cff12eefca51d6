"""Profiling on neuron: ``torch.profiler`` with the device's activity (decision 16).

``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])`` records
each launch on its NeuronCore through PyTorch's own PrivateUse1 Kineto registration (csrc/profiler),
so ``key_averages()`` reports device time per op. This package adds the vendor's API on top:
:class:`NeuronConfig` (what to record, passed as ``experimental_config``), :class:`ProfileMode`,
and :class:`NeuronProfiler`, whose ``export_trace`` (an ``on_trace_ready`` callback) writes the
framework trace, the device and runtime trace and the Parquet tables into one directory.
``torch-neuronx profile summarize DIR`` reads them back. See docs/profiling.md.

The layer sits above eager and dynamo (it reads their executables' records) and below the CLI.
"""

from __future__ import annotations

from typing import Any

from torch_neuronx.profiling.config import NeuronConfig, ProfileMode
from torch_neuronx.profiling.exporter import NeuronProfiler

__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode", "read_table"]


def read_table(directory: str, name: str) -> Any:
    """Every profile's ``name`` table in ``directory`` as one ``pyarrow.Table`` (see
    :func:`torch_neuronx.profiling.tables.read_table`)."""
    from torch_neuronx.profiling import tables

    return tables.read_table(directory, name)
