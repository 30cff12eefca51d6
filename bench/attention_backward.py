"""Causal attention's backward on neuron next to torch CPU eager and plain JAX's autodiff.

The shapes of bench/llama_decoder's attention (batch 8, 4 heads, 128 positions, head dim 64,
causal, float32). Measured: the backward alone (the gradients of Q, K and V from dO) and forward
plus backward. Engines, each in its own process (bench/isolated.py), in alternating rounds, each
keeping its best round:

- torch CPU eager: ``F.scaled_dot_product_attention`` and ``backward()`` (PyTorch's CPU
  flash-attention kernels); the backward alone is timed through ``torch.autograd.grad`` of a kept
  graph.
- plain JAX: the attention written as a JAX user writes it (``jnp.where`` mask, ``jax.nn.softmax``),
  its backward ``jax.vjp`` in one jitted function, which recomputes the forward's softmax.
- neuron: the fused SDPA op and its backward (lowering/attention.py), eagerly: the backward
  rebuilds the probabilities from the forward's saved logsumexp.

    python -m bench.attention_backward [--rounds 3] [--calls 50]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from bench import isolated

BATCH, HEADS, LENGTH, HEAD_DIM = 8, 4, 128, 64
NO_NEURON = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
ENGINES = {"torch cpu eager": NO_NEURON, "plain jax vjp": NO_NEURON, "neuron": {}}


def _per_call_ms(run: Callable[[], object], wait: Callable[[object], None], calls: int) -> float:
    """Milliseconds per call of ``run`` over ``calls`` calls after one warm-up call."""
    wait(run())
    start = time.perf_counter()
    for _ in range(calls):
        result = run()
    wait(result)
    return (time.perf_counter() - start) / calls * 1e3


def _torch_runs(device: str) -> tuple[Callable[[], object], Callable[[], object], Callable[[object], None]]:
    generator = torch.Generator().manual_seed(0)
    q, k, v, grad_out = (torch.randn(BATCH, HEADS, LENGTH, HEAD_DIM, generator=generator).to(device) for _ in range(4))
    leaves = [t.requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=True)

    def backward() -> object:
        return torch.autograd.grad(out, leaves, grad_out, retain_graph=True)

    def forward_backward() -> object:
        return torch.autograd.grad(F.scaled_dot_product_attention(*leaves, is_causal=True), leaves, grad_out)

    def wait(result: object) -> None:
        if device == "neuron":
            torch.neuron.synchronize()

    return backward, forward_backward, wait


def _jax_runs() -> tuple[Callable[[], object], Callable[[], object], Callable[[object], None]]:
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v, grad_out = (jax.random.normal(key, (BATCH, HEADS, LENGTH, HEAD_DIM), jnp.float32) for key in keys)
    mask = jnp.tril(jnp.ones((LENGTH, LENGTH), jnp.bool_))

    def attention(q, k, v):
        scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM), -jnp.inf)
        return jax.nn.softmax(scores, axis=-1) @ v

    @jax.jit
    def gradients(q, k, v, grad_out):
        return jax.vjp(attention, q, k, v)[1](grad_out)

    def run() -> object:
        return gradients(q, k, v, grad_out)

    # jax.vjp recomputes the forward inside the backward either way: both columns time the same call.
    return run, run, jax.block_until_ready


def _worker(engine: str) -> None:
    backward, forward_backward, wait = (
        _jax_runs() if engine == "plain jax vjp" else _torch_runs("cpu" if engine == "torch cpu eager" else "neuron")
    )

    def rate(calls: str) -> dict[str, float]:
        return {
            "backward_ms": _per_call_ms(backward, wait, int(calls)),
            "forward_backward_ms": _per_call_ms(forward_backward, wait, int(calls)),
        }

    isolated.serve({"ready": lambda: {}, "rate": rate})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each engine, taken in turn")
    parser.add_argument("--calls", type=int, default=50, help="calls per timed run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # an engine's process (bench/isolated.py)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker)
        return
    best: dict[str, dict[str, float]] = {}
    with isolated.workers("bench.attention_backward", ENGINES) as running:
        for worker in running.values():
            worker.ask("ready")
        for _ in range(args.rounds):
            for name, worker in running.items():
                answer = worker.ask(f"rate {args.calls}")
                kept = best.setdefault(name, answer)
                for key in ("backward_ms", "forward_backward_ms"):
                    kept[key] = min(kept[key], answer[key])
    print(f"causal attention, batch {BATCH} x {HEADS} heads x {LENGTH} positions x head dim {HEAD_DIM}, float32")
    print(f"{'engine':<18}{'backward':>12}{'fwd + bwd':>12}")
    for name, result in best.items():
        print(f"{name:<18}{result['backward_ms']:>10.2f}ms{result['forward_backward_ms']:>10.2f}ms")
    neuron, jax_, eager = (best[name] for name in ("neuron", "plain jax vjp", "torch cpu eager"))
    print(
        f"neuron backward: {jax_['backward_ms'] / neuron['backward_ms']:.2f}x plain JAX's vjp, "
        f"{eager['backward_ms'] / neuron['backward_ms']:.2f}x torch eager's (higher is faster)"
    )


if __name__ == "__main__":
    main()
