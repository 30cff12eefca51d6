"""DDP step time on 2 processes against 1, on `neuron` (the neuron c10d backend) and on the CPU
(gloo) for scale: the same MLP and the same per-process batch (weak scaling), so a ratio of 1.0
means the gradient all-reduce and the second process cost nothing.

    python -m bench.ddp_step [--steps 20] [--hidden 512]

Each setting runs under torchrun (``python -m torch.distributed.run``) in turn; rank 0 reports the
median of the timed steps (forward, backward, all-reduce, SGD step, device work finished).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

ROOT = pathlib.Path(__file__).resolve().parents[1]
WARMUP_STEPS = 3


def _synchronize(device: torch.device) -> None:
    if device.type == "neuron":
        torch.neuron.synchronize()


def worker(device_type: str, steps: int, hidden: int, batch: int, out: str) -> None:
    """One rank: times ``steps`` DDP steps after the compiles of the first ones; rank 0 writes the median."""
    if device_type == "neuron":
        torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
        device = torch.device("neuron", torch.neuron.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("neuron" if device_type == "neuron" else "gloo")
    torch.manual_seed(0)
    layers = [nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 16)]
    model = DistributedDataParallel(nn.Sequential(*layers).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, hidden, device=device), torch.randn(batch, 16, device=device)
    times = []
    for step in range(WARMUP_STEPS + steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        _synchronize(device)
        if step >= WARMUP_STEPS:
            times.append(time.perf_counter() - start)
    if dist.get_rank() == 0:
        pathlib.Path(out).write_text(json.dumps(statistics.median(times)))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(device_type: str, processes: int, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "median.json"
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc-per-node={processes}",
            f"--master-port={_free_port()}",
            "-m",
            "bench.ddp_step",
            "--worker",
            device_type,
            f"--steps={args.steps}",
            f"--hidden={args.hidden}",
            f"--batch={args.batch}",
            f"--out={out}",
        ]
        # One intra-op thread per process in both settings (torchrun sets it for 2 processes only).
        env = dict(os.environ, OMP_NUM_THREADS="1")
        subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=300)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32, help="per process")
    parser.add_argument("--devices", default="neuron,cpu")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.hidden, args.batch, args.out)
        return
    print(f"DDP step, MLP hidden {args.hidden}, batch {args.batch} per process, median of {args.steps} steps")
    print(f"{'device':<8}{'1 process':>14}{'2 processes':>14}{'2 / 1':>8}")
    for device_type in args.devices.split(","):
        one, two = _run(device_type, 1, args), _run(device_type, 2, args)
        print(f"{device_type:<8}{one * 1e3:>11.2f} ms{two * 1e3:>11.2f} ms{two / one:>8.2f}")


if __name__ == "__main__":
    main()
