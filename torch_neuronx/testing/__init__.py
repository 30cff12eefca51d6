"""Conformance testing of the neuron device against the CPU, on PyTorch's OpInfo database.

``torch-neuronx conformance`` runs the sweep from the command line and writes its report;
:func:`run_conformance`, :func:`check_sample` and :func:`write_report` do the same from Python.

- :mod:`~torch_neuronx.testing.conformance`: one sample on CPU and neuron, judged (pass, mismatch,
  error, fallback, skipped).
- :mod:`~torch_neuronx.testing.sweep`: every op, dtype and sample within a time budget, in a worker
  process that crashes and hangs cannot take down.
- :mod:`~torch_neuronx.testing.report`: the Parquet table and the markdown summary.
- :mod:`~torch_neuronx.testing.opinfo`: PyTorch's OpInfo database (the only user of its internals).
- :mod:`~torch_neuronx.testing.tables`: dtypes, tolerances and known failures, each with a reason.
"""

from __future__ import annotations

from torch_neuronx.testing.conformance import OUTCOMES, SampleOutcome, check_sample, run_sample
from torch_neuronx.testing.report import write_report
from torch_neuronx.testing.sweep import run_conformance

__all__ = ["OUTCOMES", "SampleOutcome", "check_sample", "run_conformance", "run_sample", "write_report"]
