"""Hugging Face Accelerate and the Transformers Trainer under torchrun on `neuron`.

    torchrun --nproc-per-node 2 -m examples.accelerate_trainer --out runs/neuron
    torchrun --nproc-per-node 2 -m examples.accelerate_trainer --out runs/cpu --cpu

Accelerate (1.x) finds the device by itself: ``torch_neuronx`` installed and ``torch.neuron``
available make it ``DistributedType.MULTI_NEURON`` with the ``neuron`` c10d backend, each process
on the NeuronCore of its ``LOCAL_RANK``. Two jobs run one after the other in the same processes:
an ``Accelerator`` loop (``prepare``, ``backward``, ``gather``) over a small MLP, and a ``Trainer``
over a two-layer GPT-2 built from its config (no download, dropout off so no random op separates
the devices). ``--cpu`` is the reference: the same jobs on the CPU with gloo. Rank 0 writes both
jobs' per-step losses to ``OUT/losses.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import torch
from torch import nn

STEPS = 4
BATCH = 4  # per process


def accelerate_losses(cpu: bool) -> list[float]:
    """Per-step loss, averaged over the processes, of an Accelerator loop over an MLP."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=cpu)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS * BATCH * accelerator.num_processes, 8, generator=generator)
    y = x.sum(dim=1, keepdim=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        losses.append(accelerator.gather(loss.detach()).mean().item())
    return losses


def trainer_losses(cpu: bool, out: pathlib.Path) -> list[float]:
    """Per-step training loss the Trainer logs for a two-layer GPT-2 on random tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    config = GPT2Config(
        vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, config.vocab_size, (64, 16), generator=generator)
    dataset = [{"input_ids": row, "labels": row} for row in tokens]
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        learning_rate=1e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=cpu,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--cpu", action="store_true", help="the CPU reference (gloo)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    losses = {"accelerate": accelerate_losses(args.cpu), "trainer": trainer_losses(args.cpu, args.out)}
    if torch.distributed.get_rank() == 0:
        (args.out / "losses.json").write_text(json.dumps(losses))
        print(json.dumps(losses))


if __name__ == "__main__":
    main()
