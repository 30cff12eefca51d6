"""Latency of small all_reduces on 2 processes: the neuron group's one-round-trip path (the data
travels with the ranks' agreement, ``distributed/agreement.py``), the same calls through gloo's
all-reduce after the agreement (two round trips), and gloo on CPU tensors, in one run.

The three engines alternate in short loops (a loaded machine slows them alike); the medians of
the loops are printed, and the median of the per-loop ratios of the first two.

    python -m bench.distributed_small_all_reduce [--loops 60] [--calls 20]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time

import torch
import torch.distributed as dist

from tests.distributed import harness

SIZES = [4, 1024, 4096]  # bytes: a scalar, 256 floats, the largest that travels with the agreement


def _milliseconds(tensor: torch.Tensor, calls: int, group: dist.ProcessGroup | None = None) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(tensor, group=group)
    if tensor.device.type == "neuron":
        torch.neuron.synchronize()
    return (time.perf_counter() - start) / calls * 1e3


def _worker(rank: int, world_size: int, loops: int, calls: int) -> list[tuple[int, float, float, float, float]]:
    from torch_neuronx.distributed import process_group

    dist.init_process_group("neuron", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    inlines = process_group._inlines_all_reduce
    rows = []
    for nbytes in SIZES:
        neuron, cpu = torch.ones(nbytes // 4, device="neuron"), torch.ones(nbytes // 4)
        dist.all_reduce(neuron)  # warm-up: the copies' executables
        one_trip, two_trips, on_cpu = [], [], []
        for _ in range(loops):
            process_group._inlines_all_reduce = inlines
            one_trip.append(_milliseconds(neuron, calls))
            process_group._inlines_all_reduce = lambda *_: False  # the agreement, then gloo's all-reduce
            two_trips.append(_milliseconds(neuron, calls))
            on_cpu.append(_milliseconds(cpu, calls, gloo))
        process_group._inlines_all_reduce = inlines
        ratio = statistics.median(a / b for a, b in zip(one_trip, two_trips, strict=True))
        rows.append((nbytes, *map(statistics.median, (one_trip, two_trips, on_cpu)), ratio))
    dist.destroy_process_group()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=60, help="alternating timed loops per engine and size")
    parser.add_argument("--calls", type=int, default=20, help="all_reduce calls per loop")
    options = parser.parse_args()
    rows = harness.spawn(_worker, 2, args=(options.loops, options.calls), timeout=1200)[0]
    print(f"{'bytes':>6}  {'one trip ms':>11}  {'two trips ms':>12}  {'gloo cpu ms':>11}  {'one / two':>9}")
    for nbytes, one_trip, two_trips, on_cpu, ratio in rows:
        print(f"{nbytes:>6}  {one_trip:>11.3f}  {two_trips:>12.3f}  {on_cpu:>11.3f}  {ratio:>8.2f}x")


if __name__ == "__main__":
    main()
