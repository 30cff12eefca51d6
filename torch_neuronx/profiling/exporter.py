"""``NeuronProfiler``: writes a finished torch.profiler session's traces and tables to one directory."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from torch_neuronx.profiling.config import NeuronConfig

__all__ = ["NeuronProfiler"]

_exports = itertools.count()


class NeuronProfiler:
    """Exports profiles into ``config.profile_output_dir``; pass :meth:`export_trace` as
    ``torch.profiler.profile(on_trace_ready=...)``.

    Each call (each active cycle of a schedule) writes, under a fresh profile id
    (``neuron_<pid>_<n>_<trace start in ms>``):

    - ``<id>.pt.trace.json``: the framework trace (``prof.export_chrome_trace``): PyTorch's ops,
      Python stacks and the device and runtime events, linked by flow arrows;
    - ``<id>.neuron.trace.json``: the device and runtime trace, one process per NeuronCore with a
      track per stream (docs/profiling.md);
    - ``<id>.<table>.parquet`` for each table of :mod:`torch_neuronx.profiling.tables`.

    Args:
        config: the session's :class:`NeuronConfig` (only its ``profile_output_dir`` is read here:
            what is recorded is decided by the config passed to the profiler).
    """

    def __init__(self, config: NeuronConfig | None = None) -> None:
        self.config = config if config is not None else NeuronConfig()
        self.output_dir = Path(self.config.profile_output_dir)
        #: The files the last export wrote.
        self.last_export: list[Path] = []

    def export_trace(self, prof: Any) -> list[Path]:
        """Writes the profile of the finished session ``prof`` (a ``torch.profiler.profile``);
        returns the paths written.

        Raises:
            OSError: the output directory cannot be created or written.
            ImportError: pyarrow is not installed.
        """
        from torch_neuronx.profiling import tables, trace

        self.output_dir.mkdir(parents=True, exist_ok=True)
        base_ns = prof.profiler.kineto_results.trace_start_ns()
        profile_id = f"neuron_{os.getpid()}_{next(_exports)}_{base_ns // 1_000_000}"
        framework = self.output_dir / f"{profile_id}.pt.trace.json"
        prof.export_chrome_trace(str(framework))
        records = tables.Records.of_last_session()
        metadata = {
            "profile_id": profile_id,
            "schema_version": tables.SCHEMA_VERSION,
            "dropped_over_limit": records.dropped_over_limit,
            "dropped_unfinished": records.dropped_unfinished,
        }
        device_trace = trace.write_trace(
            self.output_dir / f"{profile_id}.neuron.trace.json", records, base_ns, metadata
        )
        written = [framework, device_trace]
        written += tables.write_tables(
            self.output_dir, profile_id, tables.build_tables(profile_id, records, prof.events())
        )
        self.last_export = written
        return written
