"""A 4-layer Llama-style decoder: forward and full training step, each engine in its own process.

Model: d_model 256, 4 heads, SwiGLU FFN 768, vocab 4096, RMSNorm, rotary embeddings, causal SDPA;
sequence 128, batch 8, AdamW, float32. Engines: torch CPU eager, torch.compile with inductor on CPU,
torch.compile with ``aot_eager`` on CPU (PyTorch's compile front end, Dynamo and AOTAutograd, with no
compiler behind it: the floor of any torch.compile backend's first call), the same model in plain
JAX as a JAX user writes it (one jitted training step, parameters and optimizer state donated),
torch.compile(backend="neuron"), and neuron's adaptive eager. For each: the first call (cold
compilation included), steady-state tokens/s, peak resident memory, and the share of this machine's
fp32 matmul peak (a 2048^3 matmul, the faster of torch's and JAX's, measured in the same run); ratios
against plain JAX, torch eager and aot_eager, the targets of the compile issues, and the part of
neuron's first training call that the backend itself spends (lowering and XLA compilation).

Each engine runs in a process of its own with a clean environment (bench/isolated.py): in one
process, JAX set up for the emulated NeuronCores ran plain JAX 2.2x slower. Steady-state rates come
from ``--rounds`` rounds that visit every engine in turn, one engine running at a time, each keeping
its best run of ``--steps`` calls: the engines then share the machine's slow and fast moments, which
on a small shared machine move a rate by 10-20% between runs.

    python -m bench.llama_decoder [--steps 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import tempfile
import time
from collections.abc import Callable

# First-call times are cold compiles for every engine: no inductor FX/AOT cache (ENGINES), and an
# empty persistent executable cache for neuron, made by the parent and shared by its workers.
if "TORCH_NEURONX_NEFF_CACHE_DIR" not in os.environ:  # a fresh folder, removed at exit
    _cache = tempfile.TemporaryDirectory(prefix="neff-bench-")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = _cache.name

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from bench import isolated  # noqa: E402

D_MODEL, HEADS, FFN, VOCAB, LAYERS = 256, 4, 768, 4096, 4
SEQ, BATCH = 128, 8
LR, WEIGHT_DECAY, BETAS, EPS = 1e-3, 0.01, (0.9, 0.95), 1e-8


def rotary_tables(head_dim: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inverse)
    return torch.cos(angles), torch.sin(angles)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
        self.out = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.ffn_norm = nn.RMSNorm(D_MODEL)
        self.gate = nn.Linear(D_MODEL, FFN, bias=False)
        self.up = nn.Linear(D_MODEL, FFN, bias=False)
        self.down = nn.Linear(FFN, D_MODEL, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).split(D_MODEL, dim=-1)
        q, k, v = (t.view(batch, length, HEADS, D_MODEL // HEADS).transpose(1, 2) for t in (q, k, v))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attention.transpose(1, 2).reshape(batch, length, D_MODEL))
        hidden = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(hidden)) * self.up(hidden))


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.RMSNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
        cos, sin = rotary_tables(D_MODEL // HEADS, SEQ)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        return self.head(self.norm(x))


def loss_of(model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(tokens).reshape(-1, VOCAB), targets.reshape(-1))


def torch_engine(device: str, backend: str | None) -> tuple[Callable, Callable, Callable[[object], None]]:
    """(forward, train_step, synchronize(result)) for a torch engine."""
    torch.manual_seed(0)
    model = Decoder().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)

    def forward(tokens: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(tokens)

    def train_step(tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model, tokens, targets)
        loss.backward()
        optimizer.step()
        return loss

    if backend is not None:
        forward, train_step = torch.compile(forward, backend=backend), torch.compile(train_step, backend=backend)

    def synchronize(result: torch.Tensor) -> None:
        if device == "neuron":
            torch.neuron.synchronize()

    return forward, train_step, synchronize


def jax_engine() -> tuple[Callable, Callable, Callable[[object], None]]:
    """The same decoder and AdamW written in JAX, each jitted as one function; the training step
    donates the parameters and the optimizer state, which it replaces."""
    import jax
    import jax.numpy as jnp

    key = jax.random.key(0)
    keys = iter(jax.random.split(key, 64))

    def dense(rows: int, columns: int) -> jax.Array:
        bound = 1 / math.sqrt(rows)
        return jax.random.uniform(next(keys), (rows, columns), jnp.float32, -bound, bound)

    params = {
        "embedding": jax.random.normal(next(keys), (VOCAB, D_MODEL), jnp.float32),
        "blocks": [
            {
                "attention_norm": jnp.ones(D_MODEL),
                "qkv": dense(D_MODEL, 3 * D_MODEL),
                "out": dense(D_MODEL, D_MODEL),
                "ffn_norm": jnp.ones(D_MODEL),
                "gate": dense(D_MODEL, FFN),
                "up": dense(D_MODEL, FFN),
                "down": dense(FFN, D_MODEL),
            }
            for _ in range(LAYERS)
        ],
        "norm": jnp.ones(D_MODEL),
        "head": dense(D_MODEL, VOCAB),
    }
    cos, sin = (jnp.asarray(t.numpy()) for t in rotary_tables(D_MODEL // HEADS, SEQ))

    def rms_norm(x, weight):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + jnp.finfo(x.dtype).eps) * weight

    def rotary(x):
        even, odd = x[..., 0::2], x[..., 1::2]
        return jnp.stack((even * cos - odd * sin, even * sin + odd * cos), axis=-1).reshape(x.shape)

    def model(params, tokens):
        x = params["embedding"][tokens]
        batch, length, _ = x.shape
        mask = jnp.tril(jnp.ones((length, length), jnp.bool_))
        for block in params["blocks"]:
            q, k, v = jnp.split(rms_norm(x, block["attention_norm"]) @ block["qkv"], 3, axis=-1)
            q, k, v = (t.reshape(batch, length, HEADS, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
            q, k = rotary(q), rotary(k)
            scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / math.sqrt(D_MODEL // HEADS), -jnp.inf)
            attention = jax.nn.softmax(scores, axis=-1) @ v
            x = x + attention.transpose(0, 2, 1, 3).reshape(batch, length, D_MODEL) @ block["out"]
            hidden = rms_norm(x, block["ffn_norm"])
            x = x + (jax.nn.silu(hidden @ block["gate"]) * (hidden @ block["up"])) @ block["down"]
        return rms_norm(x, params["norm"]) @ params["head"]

    def loss(params, tokens, targets):
        logits = model(params, tokens).reshape(-1, VOCAB)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets.reshape(-1, 1), axis=1))

    def adamw(params, grads, state):
        step, first, second = state
        step = step + 1
        first = jax.tree.map(lambda m, g: BETAS[0] * m + (1 - BETAS[0]) * g, first, grads)
        second = jax.tree.map(lambda v, g: BETAS[1] * v + (1 - BETAS[1]) * g * g, second, grads)
        correction1, correction2 = 1 - BETAS[0] ** step, 1 - BETAS[1] ** step

        def update(p, m, v):
            p = p * (1 - LR * WEIGHT_DECAY)
            return p - LR * (m / correction1) / (jnp.sqrt(v / correction2) + EPS)

        return jax.tree.map(update, params, first, second), (step, first, second)

    moments = [jax.tree.map(jnp.zeros_like, params) for _ in range(2)]  # distinct buffers: both donated
    state = [params, (jnp.zeros((), jnp.float32), *moments)]
    forward_jit = jax.jit(model)

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(params, optimizer_state, tokens, targets):
        value, grads = jax.value_and_grad(loss)(params, tokens, targets)
        params, optimizer_state = adamw(params, grads, optimizer_state)
        return params, optimizer_state, value

    def forward(tokens):
        return forward_jit(state[0], tokens)

    def train_step(tokens, targets):
        state[0], state[1], value = step(state[0], state[1], tokens, targets)
        return value

    return forward, train_step, lambda result: jax.block_until_ready((result, state))


def first_call(run: Callable[[], object], synchronize: Callable[[object], None]) -> float:
    """Seconds of the first call of ``run`` (its compilation included), waiting for the work."""
    start = time.perf_counter()
    synchronize(run())
    return time.perf_counter() - start


def rate(run: Callable[[], object], synchronize: Callable[[object], None], steps: int) -> float:
    """Calls per second over ``steps`` calls after one warm-up call, waiting for the work at the end."""
    synchronize(run())
    start = time.perf_counter()
    for _ in range(steps):
        result = run()
    synchronize(result)
    return steps / (time.perf_counter() - start)


def backend_seconds(metrics: list[dict[str, object]]) -> float:
    """Seconds the neuron backend spent lowering and compiling the graphs ``metrics`` describe."""
    return sum(float(graph["lowering_s"]) + float(graph["compile_s"]) for graph in metrics)


def forward_flops() -> float:
    """Floating-point operations of one forward pass: the matmuls (2 per multiply-add), attention's
    two batched matmuls counted whole (every engine computes the masked half too)."""
    per_token_layer = 2 * D_MODEL * 3 * D_MODEL + 2 * D_MODEL * D_MODEL + 3 * 2 * D_MODEL * FFN + 2 * 2 * SEQ * D_MODEL
    return BATCH * SEQ * (LAYERS * per_token_layer + 2 * D_MODEL * VOCAB)


#: Engine -> the variables its worker process adds to the cleaned environment (bench/isolated.py).
#: Engines that do not use the neuron device do not load it at ``import torch``.
NO_NEURON = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
ENGINES = {
    "torch cpu eager": NO_NEURON,
    "torch inductor cpu": {**NO_NEURON, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"},
    "torch aot_eager cpu": NO_NEURON,
    "plain jax jit": NO_NEURON,
    "neuron compiled": {},
    "neuron adaptive eager": {"TORCH_NEURONX_ADAPTIVE_EAGER": "1"},
}
MATMUL = "fp32 matmul peak"
MATMUL_SIZE = 2048


def _inputs(engine: str) -> tuple[object, object]:
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    if engine == "plain jax jit":
        import jax.numpy as jnp

        return jnp.asarray(tokens.numpy()), jnp.asarray(targets.numpy())
    if engine.startswith("neuron"):
        return tokens.to("neuron"), targets.to("neuron")
    return tokens, targets


def _engine(engine: str) -> tuple[Callable, Callable, Callable[[object], None]]:
    if engine == "plain jax jit":
        return jax_engine()
    device, backend = {
        "torch cpu eager": ("cpu", None),
        "torch inductor cpu": ("cpu", "inductor"),
        "torch aot_eager cpu": ("cpu", "aot_eager"),
        "neuron compiled": ("neuron", "neuron"),
        "neuron adaptive eager": ("neuron", None),
    }[engine]
    return torch_engine(device, backend)


def _matmul_worker() -> None:
    """Serves ``rate STEPS``: the best fp32 GFLOP/s of a square matmul, torch's and JAX's kernels."""
    import jax
    import jax.numpy as jnp

    a, b = torch.randn(MATMUL_SIZE, MATMUL_SIZE), torch.randn(MATMUL_SIZE, MATMUL_SIZE)
    ja, jb = jnp.asarray(a.numpy()), jnp.asarray(b.numpy())
    dot = jax.jit(jnp.dot)
    engines = {"torch": (lambda: a @ b, lambda r: None), "jax": (lambda: dot(ja, jb), jax.block_until_ready)}

    def measure(steps: str) -> dict[str, float]:
        best = max(rate(run, synchronize, int(steps)) for run, synchronize in engines.values())
        return {"gflops": best * 2 * MATMUL_SIZE**3 / 1e9}

    isolated.serve({"ready": lambda: {}, "rate": measure})


def _worker(engine: str) -> None:
    """An engine's process: builds it once, then serves ``ready``, ``first`` and ``rate STEPS``."""
    if engine == MATMUL:
        _matmul_worker()
        return
    forward, train_step, synchronize = _engine(engine)
    x, y = _inputs(engine)

    def first() -> dict[str, float]:
        if engine.startswith("neuron"):
            import torch_neuronx

            graphs_before = len(torch_neuronx.get_dynamo_metrics())
        result = {
            "forward_s": first_call(lambda: forward(x), synchronize),
            "train_s": first_call(lambda: train_step(x, y), synchronize),
        }
        if engine == "neuron compiled":
            result["backend_s"] = backend_seconds(torch_neuronx.get_dynamo_metrics()[graphs_before:])
        return result

    def rates(steps: str) -> dict[str, float]:
        return {
            "forward": rate(lambda: forward(x), synchronize, int(steps)),
            "train": rate(lambda: train_step(x, y), synchronize, int(steps)),
        }

    isolated.serve({"ready": lambda: {}, "first": first, "rate": rates})


def measure(steps: int, rounds: int) -> tuple[dict[str, dict[str, float]], float]:
    """Every engine's first calls, best rates over ``rounds`` alternating rounds and peak memory,
    each in its own process; and the machine's fp32 matmul peak in GFLOP/s."""
    with isolated.workers("bench.llama_decoder", {**ENGINES, MATMUL: NO_NEURON}) as running:
        for worker in running.values():  # every process has started before anything is timed
            worker.ask("ready")
        results = {name: running[name].ask("first") for name in ENGINES}
        peak = 0.0
        for name in ENGINES:
            results[name].update(forward=0.0, train=0.0)
        for _ in range(rounds):
            for name, worker in running.items():
                answer = worker.ask(f"rate {steps}")
                if name == MATMUL:
                    peak = max(peak, answer["gflops"])
                    continue
                results[name]["forward"] = max(results[name]["forward"], answer["forward"])
                results[name]["train"] = max(results[name]["train"], answer["train"])
                results[name]["peak_rss_mb"] = answer["peak_rss_mb"]
    return results, peak


def report(results: dict[str, dict[str, float]], peak: float) -> None:
    """Prints the table and the ratios the compile issues target."""
    tokens = BATCH * SEQ
    flops = forward_flops()
    print(f"Llama-style decoder, {LAYERS} layers, d_model {D_MODEL}, batch {BATCH} x seq {SEQ}, fp32, AdamW")
    print(f"each engine in its own process; fp32 matmul peak of this machine: {peak:.1f} GFLOP/s")
    print(
        f"{'engine':<23}{'fwd tok/s':>10}{'fwd first':>10}{'train tok/s':>12}{'train first':>12}"
        f"{'peak RSS':>10}{'fwd % peak':>11}{'train % peak':>13}"
    )
    for name, r in results.items():
        forward_share = 100 * r["forward"] * flops / 1e9 / peak
        train_share = 100 * r["train"] * 3 * flops / 1e9 / peak
        print(
            f"{name:<23}{r['forward'] * tokens:>10.0f}{r['forward_s']:>9.2f}s{r['train'] * tokens:>12.0f}"
            f"{r['train_s']:>11.2f}s{r['peak_rss_mb']:>8.0f}MB{forward_share:>10.1f}%{train_share:>12.1f}%"
        )
    neuron, jax_, eager, frontend = (
        results[k] for k in ("neuron compiled", "plain jax jit", "torch cpu eager", "torch aot_eager cpu")
    )
    adaptive = results["neuron adaptive eager"]
    print("ratios:")
    print(
        f"  neuron compiled / plain JAX: forward {neuron['forward'] / jax_['forward']:.2f}x (>= 1.1), "
        f"training {neuron['train'] / jax_['train']:.2f}x (>= 1.15)"
    )
    print(
        f"  neuron compiled / torch eager: forward {neuron['forward'] / eager['forward']:.2f}x, "
        f"training {neuron['train'] / eager['train']:.2f}x; peak memory "
        f"{neuron['peak_rss_mb'] / eager['peak_rss_mb']:.2f}x (<= 1.2)"
    )
    print(
        f"  first training call: neuron {neuron['train_s']:.1f} s = {neuron['train_s'] / frontend['train_s']:.2f}x "
        f"aot_eager's {frontend['train_s']:.1f} s (<= 1.5; PyTorch's front end is the floor), "
        f"{neuron['train_s'] / jax_['train_s']:.2f}x plain JAX's; the backend's lowering and XLA "
        f"compilation {neuron['backend_s']:.1f} s of it"
    )
    print(
        f"  adaptive eager / compiled: forward {adaptive['forward'] / neuron['forward']:.2f}x, "
        f"training {adaptive['train'] / neuron['train']:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="calls per timed run")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each engine, taken in turn")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # an engine's process (bench/isolated.py)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker)
        return
    report(*measure(args.steps, args.rounds))


if __name__ == "__main__":
    main()
