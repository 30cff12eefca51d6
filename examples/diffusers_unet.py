"""A Diffusers UNet from a config: sampling with a pipeline and a training step, on neuron and CPU.

``UNet2DModel`` is built from a small config with seeded random weights (no download). Sampling
is ``DDIMPipeline`` (the UNet with a ``DDIMScheduler``) for a few denoising steps from seeded
noise; training is Diffusers' usual noise-prediction step: ``DDPMScheduler.add_noise`` at random
timesteps, the UNet predicts the noise, MSE loss, backward, AdamW. The same code runs on both
devices; only ``device`` differs. A small ``DiTTransformer2DModel`` takes the same kind of step
(:func:`dit_step`). The pipeline draws its noise from a CPU ``torch.Generator``, so
both devices start from the same latents.

    python -m examples.diffusers_unet       # neuron against the CPU, with the differences
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
        image: image side in pixels (3 channels); ``channels``: the two blocks' widths.
        batch: images per pipeline call and per training step.
        inference_steps: DDIM denoising steps of the pipeline.
    """

    image: int
    channels: tuple[int, int]
    batch: int
    inference_steps: int


SIZES = {
    "main": Size(image=32, channels=(32, 64), batch=4, inference_steps=10),
    "tiny": Size(image=16, channels=(16, 32), batch=2, inference_steps=1),
}


@dataclasses.dataclass
class TrainStep:
    """One training step's results, on the CPU whatever the device.

    Attributes:
        loss: the MSE between the predicted and the added noise.
        grads: each UNet parameter's gradient, by name.
        updated: each UNet parameter after the AdamW step, by name.
        seconds: wall time of the step.
    """

    loss: float
    grads: dict[str, torch.Tensor]
    updated: dict[str, torch.Tensor]
    seconds: float


def build_unet(size: Size):
    """A ``UNet2DModel`` with one plain and one attention block each way, seeded weights, on the CPU."""
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    return UNet2DModel(
        sample_size=size.image,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=size.channels,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    )


def sample(device: str, size: Size) -> tuple[torch.Tensor, float]:
    """``DDIMPipeline`` on ``device`` for ``size.inference_steps`` steps from seeded noise: the images,
    (batch, 3, image, image) float32 in [0, 1] on the CPU, and the call's wall time in seconds."""
    from diffusers import DDIMPipeline, DDIMScheduler

    pipeline = DDIMPipeline(unet=build_unet(size), scheduler=DDIMScheduler(num_train_timesteps=1000)).to(device)
    pipeline.set_progress_bar_config(disable=True)
    start = time.perf_counter()
    images = pipeline(
        batch_size=size.batch,
        generator=torch.Generator().manual_seed(1),
        num_inference_steps=size.inference_steps,
        output_type="np",
    ).images
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), time.perf_counter() - start


def train_step(device: str, size: Size) -> TrainStep:
    """One noise-prediction training step of the UNet on ``device`` (AdamW, lr 1e-3)."""
    from diffusers import DDPMScheduler

    unet = build_unet(size).to(device).train()
    noise_scheduler = DDPMScheduler(num_train_timesteps=1000)
    generator = torch.Generator().manual_seed(2)
    clean = torch.rand(size.batch, 3, size.image, size.image, generator=generator) * 2 - 1
    noise = torch.randn(clean.shape, generator=generator)
    timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (size.batch,), generator=generator)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-3)
    start = time.perf_counter()
    clean, noise, timesteps = clean.to(device), noise.to(device), timesteps.to(device)
    noisy = noise_scheduler.add_noise(clean, noise, timesteps)
    prediction = unet(noisy, timesteps).sample
    loss = torch.nn.functional.mse_loss(prediction, noise)
    loss.backward()
    grads = {name: p.grad.cpu() for name, p in unet.named_parameters()}
    optimizer.step()
    loss_value = loss.item()
    seconds = time.perf_counter() - start
    return TrainStep(loss_value, grads, {name: p.detach().cpu() for name, p in unet.named_parameters()}, seconds)


def dit_step(device: str) -> TrainStep:
    """Forward and backward of a two-layer ``DiTTransformer2DModel`` (class-conditional, adaLN-Zero) on
    (2, 4, 8, 8) latents, with an AdamW step (lr 1e-3).

    The model stays in eval mode: in training mode DiT drops 10% of the class labels (for
    classifier-free guidance) with ``torch.rand`` on the labels' device, whose generator on neuron
    is the core's Philox stream, as on CUDA, so other labels drop than on the CPU.
    """
    from diffusers import DiTTransformer2DModel

    torch.manual_seed(0)
    model = DiTTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=16,
        in_channels=4,
        out_channels=4,
        num_layers=2,
        sample_size=8,
        patch_size=2,
        num_embeds_ada_norm=10,
    )
    model = model.to(device).eval()
    generator = torch.Generator().manual_seed(3)
    latents = torch.randn(2, 4, 8, 8, generator=generator)
    noise = torch.randn(latents.shape, generator=generator)
    timesteps, labels = torch.tensor([10, 500]), torch.tensor([1, 7])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    prediction = model(latents.to(device), timestep=timesteps.to(device), class_labels=labels.to(device)).sample
    loss = torch.nn.functional.mse_loss(prediction, noise.to(device))
    loss.backward()
    grads = {name: p.grad.cpu() for name, p in model.named_parameters() if p.grad is not None}
    optimizer.step()
    loss_value = loss.item()
    seconds = time.perf_counter() - start
    return TrainStep(loss_value, grads, {name: p.detach().cpu() for name, p in model.named_parameters()}, seconds)


def max_gradient_difference(cpu: TrainStep, neuron: TrainStep) -> float:
    """The largest absolute gradient difference, relative to the largest CPU gradient."""
    largest = max(g.abs().max().item() for g in cpu.grads.values())
    return max((cpu.grads[n] - neuron.grads[n]).abs().max().item() for n in cpu.grads) / largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="main", choices=sorted(SIZES))
    args = parser.parse_args()
    size = SIZES[args.size]
    images = {device: sample(device, size) for device in ("cpu", "neuron")}
    steps = {device: train_step(device, size) for device in ("cpu", "neuron")}
    for device in ("cpu", "neuron"):
        print(
            f"{device:7} {size.inference_steps} DDIM steps {images[device][1]:.2f} s, "
            f"training step loss {steps[device].loss:.6f} in {steps[device].seconds:.2f} s"
        )
    cpu, neuron = steps["cpu"], steps["neuron"]
    print(f"max |image difference| {(images['cpu'][0] - images['neuron'][0]).abs().max().item():.2e}")
    print(f"|loss difference| {abs(cpu.loss - neuron.loss):.2e}")
    print(f"max |gradient difference| / max |gradient| {max_gradient_difference(cpu, neuron):.2e}")
    weights = {n: (cpu.updated[n] - neuron.updated[n]).abs().max().item() for n in cpu.updated}
    worst = max(weights, key=weights.get)
    print(f"max |weight difference| after AdamW {weights[worst]:.2e} ({worst})")
    dit = {device: dit_step(device) for device in ("cpu", "neuron")}
    print(
        f"DiT: |loss difference| {abs(dit['cpu'].loss - dit['neuron'].loss):.2e}, max |gradient difference| / "
        f"max |gradient| {max_gradient_difference(dit['cpu'], dit['neuron']):.2e}"
    )


if __name__ == "__main__":
    main()
