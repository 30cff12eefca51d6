"""LoRA fine-tuning with PEFT on a small Llama model, on neuron and on the CPU.

The base model is transformers' ``LlamaForCausalLM`` from a small ``LlamaConfig`` with seeded
random weights (no download). ``peft.get_peft_model`` wraps it with a ``LoraConfig`` on the
attention projections, the usual training loop runs a few AdamW steps on seeded random token
batches, and ``merge_and_unload()`` folds the adapters back into the base weights. The same code
runs on both devices; only ``device`` differs.

    python -m examples.peft_lora            # neuron against the CPU, with the differences
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch


@dataclasses.dataclass(frozen=True)
class Size:
    """One model and run size.

    Attributes:
        hidden: hidden size of the base model; ``layers``: its decoder layers.
        vocab: vocabulary size (random token ids below it).
        rank: LoRA rank ``r`` (``lora_alpha`` is twice it).
        seq_len: tokens per sequence; ``batch``: sequences per step; ``steps``: optimizer steps.
    """

    hidden: int
    layers: int
    vocab: int
    rank: int
    seq_len: int
    batch: int
    steps: int


SIZES = {
    "main": Size(hidden=128, layers=4, vocab=512, rank=8, seq_len=64, batch=8, steps=20),
    "tiny": Size(hidden=32, layers=2, vocab=128, rank=4, seq_len=16, batch=2, steps=3),
}


@dataclasses.dataclass
class LoraRun:
    """What one fine-tuning run produced, on the CPU whatever the device.

    Attributes:
        device: where it ran.
        losses: the training loss of each step (float32).
        adapters: the trainable LoRA parameters after the last step, by name (float32).
        frozen_changed: names of base parameters that changed during training (should be none).
        merged: the state dict of ``merge_and_unload()``'s plain model (float32).
        merged_logits: that model's logits on the first batch, (batch, seq_len, vocab).
        seconds: wall time of the training steps.
    """

    device: str
    losses: list[float]
    adapters: dict[str, torch.Tensor]
    frozen_changed: list[str]
    merged: dict[str, torch.Tensor]
    merged_logits: torch.Tensor
    seconds: float


def build_model(size: Size):
    """The PEFT-wrapped model on the CPU, from seeded random weights.

    PEFT starts LoRA's ``B`` factor at zero; here it starts small and random, so that the first
    step's gradients reach both factors and the merged model differs from the base from step one.
    """
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=size.vocab,
        hidden_size=size.hidden,
        intermediate_size=2 * size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=size.seq_len,
    )
    base = LlamaForCausalLM(config)
    lora = LoraConfig(
        r=size.rank,
        lora_alpha=2 * size.rank,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        lora_dropout=0.0,
        init_lora_weights="gaussian",
    )
    model = get_peft_model(base, lora)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.02)
    return model


def batches(size: Size) -> list[torch.Tensor]:
    """``size.steps`` seeded token batches, (batch, seq_len) int64 on the CPU.

    Each sequence counts up from a random start in a random stride (1 to 4), modulo the vocabulary:
    learnable from its context, so the loss falls within a few steps.
    """
    generator = torch.Generator().manual_seed(1)
    positions = torch.arange(size.seq_len)
    result = []
    for _ in range(size.steps):
        start = torch.randint(0, size.vocab, (size.batch, 1), generator=generator)
        stride = torch.randint(1, 5, (size.batch, 1), generator=generator)
        result.append((start + stride * positions) % size.vocab)
    return result


def fine_tune(device: str, size: Size) -> LoraRun:
    """LoRA fine-tuning of :func:`build_model` on ``device`` (AdamW, lr 3e-3), then merge."""
    model = build_model(size).to(device)
    frozen_before = {n: p.detach().cpu().clone() for n, p in model.named_parameters() if not p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    token_batches = batches(size)
    model.train()
    losses = []
    start = time.perf_counter()
    for input_ids in token_batches:
        input_ids = input_ids.to(device)
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    adapters = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
    frozen_changed = [
        n for n, p in model.named_parameters() if not p.requires_grad and not torch.equal(p.cpu(), frozen_before[n])
    ]
    merged = model.merge_and_unload().eval()
    with torch.no_grad():
        merged_logits = merged(input_ids=token_batches[0].to(device)).logits.cpu()
    state = {n: t.detach().cpu() for n, t in merged.state_dict().items()}
    return LoraRun(device, losses, adapters, frozen_changed, state, merged_logits, seconds)


def max_difference(cpu: dict[str, torch.Tensor], neuron: dict[str, torch.Tensor]) -> float:
    """The largest absolute elementwise difference over tensors with the same names."""
    return max((cpu[name] - neuron[name]).abs().max().item() for name in cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="main", choices=sorted(SIZES))
    args = parser.parse_args()
    size = SIZES[args.size]
    cpu = fine_tune("cpu", size)
    neuron = fine_tune("neuron", size)
    for run in (cpu, neuron):
        print(f"{run.device:7} losses {run.losses[0]:.5f} .. {run.losses[-1]:.5f}, {run.seconds:.2f} s")
    loss_difference = max(abs(a - b) for a, b in zip(cpu.losses, neuron.losses, strict=True))
    print(f"max |loss difference| {loss_difference:.2e}")
    print(f"max |adapter difference| {max_difference(cpu.adapters, neuron.adapters):.2e}")
    print(f"max |merged weight difference| {max_difference(cpu.merged, neuron.merged):.2e}")
    print(f"max |merged logits difference| {(cpu.merged_logits - neuron.merged_logits).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
