"""Eager per-op cost on `neuron` next to torch CPU eager, in one run, as ratios.

Each case runs the op in a loop on already-placed tensors and takes the best of several repeats;
neuron timings include a final synchronize, so they measure completed work. Targets (issue 2):
a 16x16 add at most 15 us per op, a 1024x1024 matmul within 1.5x of torch CPU.

    python -m bench.eager_ops
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import torch


def best_per_call(fn: Callable[[], object], sync: Callable[[], None], calls: int, repeats: int = 5) -> float:
    """Best time per call, in seconds, over ``repeats`` loops of ``calls`` calls."""
    for _ in range(max(calls // 10, 3)):
        fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def cases() -> list[tuple[str, tuple[int, ...], Callable[[torch.Tensor, torch.Tensor], torch.Tensor], int]]:
    return [
        ("add 16x16", (16, 16), torch.add, 20000),
        ("matmul 1024x1024", (1024, 1024), torch.matmul, 40),
    ]


def main() -> None:
    torch.manual_seed(0)
    print(f"{'op':<20}{'torch cpu':>14}{'neuron':>14}{'neuron / cpu':>16}")
    for name, shape, op, calls in cases():
        a, b = torch.randn(shape), torch.randn(shape)
        cpu = best_per_call(functools.partial(op, a, b), lambda: None, calls)
        na, nb = a.to("neuron"), b.to("neuron")
        neuron = best_per_call(functools.partial(op, na, nb), torch.neuron.synchronize, calls)
        torch.testing.assert_close(op(na, nb).cpu(), op(a, b), rtol=1e-4, atol=1e-3)
        print(f"{name:<20}{cpu * 1e6:>11.1f} us{neuron * 1e6:>11.1f} us{neuron / cpu:>15.2f}x")


if __name__ == "__main__":
    main()
