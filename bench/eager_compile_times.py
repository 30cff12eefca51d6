"""How long an eager op's first call on `neuron` takes over its second: the executable's trace,
lowering and XLA compilation, for the first float32 sample of every OpInfo (issue 17's target: no
eager op takes more than a few seconds to compile).

An OpInfo's first call compiles one executable per ATen op it dispatches that no earlier OpInfo
compiled (a composite such as ``nn.functional.*`` may compile several); its second call, on the same
inputs, reuses them. The persistent compile cache is turned off for the run, so each executable is
compiled, not loaded. Samples the device refuses are left out and counted.

    python -m bench.eager_compile_times [--ops PATTERN ...] [--top 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any


def first_call_overheads(patterns: list[str] | None) -> tuple[list[tuple[str, float, float]], int]:
    """(OpInfo name, first call s, second call s) per OpInfo, and the number refused or failing."""
    import torch
    from torch.utils import _pytree as pytree

    import torch_neuronx  # noqa: F401  (registers the device)
    from torch_neuronx.testing import opinfo

    def to_device(value: Any) -> Any:
        return value.to("neuron") if isinstance(value, torch.Tensor) else value

    def timed(op: Any, inputs: Any, args: Any, kwargs: Any) -> float:
        start = time.perf_counter()
        result = op(inputs, *args, **kwargs)
        for leaf in pytree.tree_leaves(result):
            if isinstance(leaf, torch.Tensor) and leaf.device.type == "neuron":
                leaf.cpu()  # a read waits for the launch: the time covers completed work
        return time.perf_counter() - start

    torch.zeros(1, device="neuron").cpu()  # the device starts outside the first op's time
    rows, failed = [], 0
    for op in opinfo.select_ops(patterns):
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        try:
            sample = next(iter(op.sample_inputs("cpu", torch.float32)))
            call = pytree.tree_map(to_device, (sample.input, sample.args, sample.kwargs))
            first = timed(op, *call)
            second = timed(op, *call)
        except Exception:  # noqa: BLE001  (a refused sample is counted, not timed)
            failed += 1
            continue
        rows.append((opinfo.full_name(op), first, second))
    return rows, failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", nargs="*", help="OpInfo name patterns (fnmatch); default: every OpInfo")
    parser.add_argument("--top", type=int, default=20, help="how many of the slowest first calls to list")
    options = parser.parse_args(argv)
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = ""  # compile every executable, load none
    started = time.perf_counter()
    rows, failed = first_call_overheads(options.ops)
    overheads = sorted(((first - second, name) for name, first, second in rows), reverse=True)
    values = [overhead for overhead, _ in overheads]
    print(f"{len(rows)} OpInfos timed, {failed} refused or failing, in {time.perf_counter() - started:.0f} s")
    if values:
        percentiles = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
        print(
            f"first call over second, seconds: median {statistics.median(values):.3f}, "
            f"p90 {percentiles[89]:.3f}, p99 {percentiles[98]:.3f}, max {values[0]:.3f}"
        )
    print("\n| OpInfo | first call over second (s) |\n|---|---:|")
    for overhead, name in overheads[: options.top]:
        print(f"| {name} | {overhead:.3f} |")


if __name__ == "__main__":
    main()
