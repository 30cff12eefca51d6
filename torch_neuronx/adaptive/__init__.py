"""Adaptive eager (experimental, decision 12): runs of eager ops fused into one executable.

``with torch_neuronx.adaptive_eager():`` (or ``TORCH_NEURONX_ADAPTIVE_EAGER=1`` for a whole
process) records ops on neuron tensors instead of launching them, and runs each recorded run as
one executable when a value or an ordering becomes visible: a host read (``.cpu()``, ``.item()``,
printing, ``bool()``), ``synchronize()``, a stream or event operation, a copy between cores or a
resize, an op that runs on the CPU or whose output shape depends on data, an op whose check eager
makes at the call (it raises at the op), a launch that cannot be recorded,
``TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS`` ops, or leaving the context. Values, dtypes, the
random stream, in-place and view semantics, autograd and memory statistics are eager's (see
trace.py for how). ``torch.use_deterministic_algorithms(True)`` runs plain eager. Importing this package does not
import JAX (``import torch`` stays cheap).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

__all__ = ["adaptive_eager", "adaptive_eager_metrics", "reset_adaptive_eager_metrics"]


@contextlib.contextmanager
def adaptive_eager(enabled: bool = True) -> Iterator[None]:
    """Records eager ops inside the block and fuses them (``enabled=False``: runs plain eager inside
    a block that records). What was recorded is run when the block is left. The mode is
    process-wide: ops of other threads (autograd's backward among them) are recorded too, in the
    order they are called; while blocks of several threads overlap, recording is on if one enables
    it and none disables it, and once every block has ended the mode is what it was before the first.

    Raises:
        whatever an op's eager kernel raises, at the op (its executable is traced when first recorded),
        and the checks eager makes at the call (``torch.linalg``'s ``info``), at the op too;
        device faults, at the next synchronisation, naming the op.
    """
    from torch_neuronx.adaptive import trace

    trace.enter_block(enabled)
    try:
        yield
    finally:
        try:
            trace.flush(None, "leaving adaptive_eager()")
        finally:  # a fault the flush raises must not leave recording on for the rest of the process
            trace.leave_block(enabled)


def adaptive_eager_metrics() -> dict[str, Any]:
    """What adaptive eager did since the start (or :func:`reset_adaptive_eager_metrics`):
    ``ops_recorded``, ``traces_run`` (fused executables launched), ``fused_ops`` ({ops in a trace:
    traces}), ``mean_ops_per_trace``, ``compiled`` (trace signatures compiled) and ``cache_hits``
    (traces that replayed a cached executable), ``flush_reasons`` ({reason: flushes}) and
    ``plain_launches`` (launches that ran at once while recording was installed)."""
    from torch_neuronx.adaptive import trace

    metrics = dataclasses.asdict(trace.METRICS)
    metrics["fused_ops"] = dict(trace.METRICS.fused_ops)
    metrics["flush_reasons"] = dict(trace.METRICS.flush_reasons)
    runs = trace.METRICS.traces_run
    metrics["mean_ops_per_trace"] = sum(n * c for n, c in trace.METRICS.fused_ops.items()) / runs if runs else 0.0
    return metrics


def reset_adaptive_eager_metrics() -> None:
    """Starts the counts of :func:`adaptive_eager_metrics` again."""
    from torch_neuronx.adaptive import trace

    trace.reset_metrics()
