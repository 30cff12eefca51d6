"""Train a small CNN on scikit-learn's handwritten digits, on any device.

The same script runs on "cpu" and on "neuron": the only difference is the device string. Weights are
initialised on the CPU from a fixed seed and the batch order comes from a CPU generator, so the two
runs see identical inputs and start from identical parameters.

    python examples/digits_cnn.py --device neuron
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn


def make_model() -> nn.Module:
    """Two conv blocks and a classifier head for 1x8x8 images, 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def load_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 1797 digits as float32 images in [0, 1], split 80/20 with a fixed seed."""
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    train_x, test_x, train_y, test_y = train_test_split(images, labels, test_size=0.2, random_state=0, stratify=labels)
    return train_x, train_y, test_x, test_y


@dataclasses.dataclass
class Result:
    device: str
    losses: list[float]
    test_accuracy: float
    seconds: float


def train(device: str, epochs: int = 10, batch_size: int = 64, seed: int = 0) -> Result:
    """Trains from a seeded initialisation and returns the per-step losses and the test accuracy."""
    train_x, train_y, test_x, test_y = load_data()
    torch.manual_seed(seed)
    model = make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    order = torch.Generator().manual_seed(seed)
    losses = []
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        permutation = torch.randperm(len(train_x), generator=order)
        for first in range(0, len(train_x), batch_size):
            index = permutation[first : first + batch_size]
            inputs, targets = train_x[index].to(device), train_y[index].to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        predictions = model(test_x.to(device)).argmax(dim=1).cpu()
    accuracy = (predictions == test_y).float().mean().item()
    return Result(device, losses, accuracy, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    result = train(args.device, args.epochs)
    print(
        f"{result.device}: test accuracy {result.test_accuracy:.4f}, final loss {result.losses[-1]:.4f}, "
        f"{len(result.losses)} steps in {result.seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
