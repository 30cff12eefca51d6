"""timm image models from ``timm.create_model(pretrained=False)``: training-mode forward and
backward, and a ``torch.compile(backend="neuron")`` forward, on neuron against the CPU.

Each model is built with seeded random weights (no download) for 10 classes and runs on small
seeded images in training mode (batch-norm statistics from the batch, dropout off as timm's
defaults have it), so the forward, the cross-entropy loss and every parameter's gradient can be
compared with the same model on the CPU. The compiled forward runs in eval mode.

Gradients are compared relative to the model's largest gradient: a bias followed by a
batch-norm in training mode, or a key projection's bias before a softmax, has a gradient that
is zero in exact arithmetic, so both devices hold only rounding noise there.

timm imports torchvision; its build must match torch's (PyPI's torchvision wheel is built for
CUDA and does not import next to torch's CPU wheel: then install torchvision from
https://download.pytorch.org/whl/cpu).

    python -m examples.timm_models          # neuron against the CPU, with the differences
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

#: Model names and the extra ``create_model`` arguments each needs for small images.
MODELS = {
    "resnet18": {},
    "convnext_atto": {},
    "mobilenetv3_small_050": {},
    "efficientnet_b0": {},
    "vit_tiny_patch16_224": {"img_size": 32, "patch_size": 8},
}


@dataclasses.dataclass
class ModelRun:
    """One model's training-mode step on one device, on the CPU.

    Attributes:
        device: where it ran.
        logits: (batch, 10) float32; ``loss``: their cross-entropy.
        grads: each parameter's gradient, by name.
        compiled_logits: eval-mode logits of ``torch.compile(model, backend=...)`` (neuron) or of the
            eager model (CPU); None when not asked for.
        seconds: wall time of the forward and backward.
    """

    device: str
    logits: torch.Tensor
    loss: float
    grads: dict[str, torch.Tensor]
    compiled_logits: torch.Tensor | None
    seconds: float


def build(name: str):
    """``timm.create_model(name, pretrained=False, num_classes=10)`` with seeded weights, on the CPU."""
    import timm

    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=10, **MODELS[name])


def images(batch: int, side: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded images (batch, 3, side, side) float32 and labels (batch,) int64, on the CPU."""
    generator = torch.Generator().manual_seed(1)
    return torch.randn(batch, 3, side, side, generator=generator), torch.arange(batch) % 10


def run(name: str, device: str, *, batch: int = 4, side: int = 32, compile: bool = False) -> ModelRun:
    """Forward and backward of model ``name`` in training mode on ``device``; with ``compile``, also an
    eval-mode forward, through ``torch.compile(backend="neuron")`` when ``device`` is neuron."""
    model = build(name).to(device).train()
    inputs, labels = images(batch, side)
    inputs, labels = inputs.to(device), labels.to(device)
    start = time.perf_counter()
    logits = model(inputs)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    grads = {n: p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None}
    seconds = time.perf_counter() - start
    compiled_logits = None
    if compile:
        model.eval()
        forward = torch.compile(model, backend="neuron") if device != "cpu" else model
        with torch.no_grad():
            compiled_logits = forward(inputs).cpu()
    return ModelRun(device, logits.detach().cpu(), loss.item(), grads, compiled_logits, seconds)


def gradient_difference(cpu: ModelRun, neuron: ModelRun) -> float:
    """The largest absolute gradient difference, relative to the largest CPU gradient."""
    largest = max(g.abs().max().item() for g in cpu.grads.values())
    return max((cpu.grads[n] - neuron.grads[n]).abs().max().item() for n in cpu.grads) / largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--side", type=int, default=32, help="image side in pixels")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--compile", default="resnet18", help="the model also run under torch.compile")
    args = parser.parse_args()
    for name in args.models:
        compile = name == args.compile
        cpu = run(name, "cpu", batch=args.batch, side=args.side, compile=compile)
        neuron = run(name, "neuron", batch=args.batch, side=args.side, compile=compile)
        logits = (cpu.logits - neuron.logits).abs().max().item()
        line = (
            f"{name:24} cpu {cpu.seconds:6.2f} s, neuron {neuron.seconds:6.2f} s; "
            f"max |logit difference| {logits:.2e}, |loss difference| {abs(cpu.loss - neuron.loss):.2e}, "
            f"gradients {gradient_difference(cpu, neuron):.2e} of the largest"
        )
        if compile:
            compiled = (cpu.compiled_logits - neuron.compiled_logits).abs().max().item()
            line += f"; compiled eval logits {compiled:.2e}"
        print(line)


if __name__ == "__main__":
    main()
