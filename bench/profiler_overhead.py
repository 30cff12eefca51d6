"""What torch.profiler costs per eager op on `neuron`: profiling off, host activity only
(ProfilerActivity.CPU), and host plus device activity (CPU + PrivateUse1, what docs/profiling.md
describes), in rounds that visit the three in turn so that they share the machine's slow and fast
moments; each keeps its best round.

    python -m bench.profiler_overhead [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity

SETTINGS: dict[str, list[ProfilerActivity] | None] = {
    "off": None,
    "CPU": [ProfilerActivity.CPU],
    "CPU + PrivateUse1": [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
}


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` calls, the device work finished."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.neuron.synchronize()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    a, b = torch.randn(16, 16, device="neuron"), torch.randn(16, 16, device="neuron")
    m = torch.randn(256, 256, device="neuron")
    cases = {"add 16x16": (lambda: torch.add(a, b), 2000), "matmul 256x256": (lambda: m @ m, 200)}
    for fn, calls in cases.values():
        per_call(fn, calls)  # compiled and warm
    best = {(case, setting): float("inf") for case in cases for setting in SETTINGS}
    for _ in range(args.rounds):
        for setting, activities in SETTINGS.items():
            scope = torch.profiler.profile(activities=activities) if activities else contextlib.nullcontext()
            with scope:
                for case, (fn, calls) in cases.items():
                    best[case, setting] = min(best[case, setting], per_call(fn, calls))
    print(f"{'op':<18}" + "".join(f"{setting:>20}" for setting in SETTINGS))
    for case in cases:
        print(f"{case:<18}" + "".join(f"{best[case, setting] * 1e6:>17.1f} us" for setting in SETTINGS))


if __name__ == "__main__":
    main()
