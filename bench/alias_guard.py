"""What the input-overlap guard of torch.compile(backend="neuron") costs per call (dynamo/aliasing.py):
compiled functions that mutate inputs, with 2 tensor inputs and with 201 (an SGD-like step over
100 parameters), called with the guard and with it bypassed (AOTAutograd's function called
directly), in rounds that visit both in turn; each keeps its best round. Also the check alone
(``overlapping_pair``) on the same number of tensors.

    python -m bench.alias_guard [--rounds 5] [--calls 1000]
"""

from __future__ import annotations

import argparse

import torch

from bench.profiler_overhead import per_call
from torch_neuronx.dynamo.aliasing import AliasGuard, overlapping_pair


def _small(x: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    total.add_(x.sum())
    return x * 2


def _step(params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
    for param, grad in zip(params, grads, strict=True):
        param.add_(grad, alpha=-0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    params = [torch.randn(32, device="neuron") for _ in range(100)]
    grads = [torch.randn(32, device="neuron") for _ in range(100)]
    workloads = {
        "2 inputs, 1 mutated": (_small, (torch.randn(64, device="neuron"), torch.zeros((), device="neuron"))),
        "200 inputs, 100 mutated": (_step, (params, grads)),
    }
    guarded_call = AliasGuard.__call__

    def bypassed_call(self: AliasGuard, *call_args: object) -> object:
        return self.compiled(*call_args)

    print("| graph | guard bypassed, µs/call | guarded, µs/call | check alone, µs |")
    print("|---|---:|---:|---:|")
    for name, (fn, call_args) in workloads.items():
        compiled = torch.compile(fn, backend="neuron")
        compiled(*call_args)
        best = {"bypassed": float("inf"), "guarded": float("inf")}
        for _ in range(args.rounds):
            for how, call in (("bypassed", bypassed_call), ("guarded", guarded_call)):
                AliasGuard.__call__ = call  # type: ignore[method-assign]
                best[how] = min(best[how], per_call(lambda c=compiled, a=call_args: c(*a), args.calls))
        AliasGuard.__call__ = guarded_call  # type: ignore[method-assign]
        tensors = [t for value in call_args for t in (value if isinstance(value, list) else [value])]
        positions, mutated = list(range(len(tensors))), [i < len(tensors) // 2 for i in range(len(tensors))]
        check = min(
            per_call(lambda t=tensors, p=positions, m=mutated: overlapping_pair(t, p, m), args.calls) for _ in range(3)
        )
        print(f"| {name} | {best['bypassed'] * 1e6:.1f} | {best['guarded'] * 1e6:.1f} | {check * 1e6:.1f} |")


if __name__ == "__main__":
    main()
