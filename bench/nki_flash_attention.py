"""The NKI flash attention kernels against the default SDPA lowering, in one run, as ratios.

Shapes: bench/llama_decoder.py's attention (batch 8, 4 heads, sequence 128, head dimension 64,
causal, float32), and a longer sequence (1024) where the kernel's tiling matters. Each case runs
the forward and the forward + backward, in eager and under ``torch.compile(backend="neuron")``:
``nki.kernels.ops.flash_attention`` (what ``TORCH_NEURONX_ENABLE_NKI_SDPA=1`` routes
``F.scaled_dot_product_attention`` to) against ``F.scaled_dot_product_attention`` on the default
lowering (torch_neuronx/lowering/attention.py). The first call of each (the kernel's tracing and
the executable's compilation, with a fresh executable cache) is reported apart from the
steady-state time, best of ``--rounds`` rounds that visit every engine in turn.

    python -m bench.nki_flash_attention [--steps 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

if "TORCH_NEURONX_NEFF_CACHE_DIR" not in os.environ:  # cold first calls: a fresh cache, removed at exit
    _cache = tempfile.TemporaryDirectory(prefix="neff-bench-")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = _cache.name

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_neuronx  # noqa: E402, F401
from nki.kernels import ops  # noqa: E402

SHAPES = {"llama bench (8x4x128x64)": (8, 4, 128, 64), "long (1x4x1024x64)": (1, 4, 1024, 64)}


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _flash(q, k, v):
    return ops.flash_attention(q, k, v, causal=True)


def engines() -> dict[str, object]:
    return {
        "default SDPA, eager": _sdpa,
        "flash kernel, eager": _flash,
        "default SDPA, compiled": torch.compile(_sdpa, backend="neuron", fullgraph=True),
        "flash kernel, compiled": torch.compile(_flash, backend="neuron", fullgraph=True),
    }


def _step(fn, inputs, backward: bool) -> None:
    if backward:
        fn(*inputs).sum().backward()
        inputs[0].grad.cpu()
    else:
        fn(*inputs).cpu()


def _timed(fn, inputs, backward: bool, steps: int) -> float:
    """Milliseconds per call over ``steps`` calls, the result read back each call."""
    start = time.perf_counter()
    for _ in range(steps):
        _step(fn, inputs, backward)
    return (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    torch.manual_seed(0)
    print(f"{'case':<34} {'engine':<24} {'first call':>11} {'ms/call':>9} {'time / default':>15}")
    for shape_name, shape in SHAPES.items():
        inputs = [torch.randn(shape, device="neuron", requires_grad=True) for _ in range(3)]
        for backward in (False, True):
            case = f"{shape_name} {'fwd+bwd' if backward else 'fwd'}"
            runs = engines()
            first = {}
            for name, fn in runs.items():
                start = time.perf_counter()
                _step(fn, inputs, backward)
                first[name] = time.perf_counter() - start
            best = {name: float("inf") for name in runs}
            for _ in range(options.rounds):
                for name, fn in runs.items():
                    best[name] = min(best[name], _timed(fn, inputs, backward, options.steps))
            for name in runs:
                mode = name.split(", ")[1]
                ratio = best[name] / best[f"default SDPA, {mode}"]
                print(f"{case:<34} {name:<24} {first[name]:>9.2f} s {best[name]:>9.2f} {ratio:>14.2f}x")


if __name__ == "__main__":
    main()
