"""A torchrun job: init_process_group() with no backend (the accelerator's, neuron), an all_reduce
and a DeviceMesh; prints one line per rank for the test to read."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

dist.init_process_group()
rank = dist.get_rank()
tensor = torch.full((4,), float(rank + 1), device="neuron")
dist.all_reduce(tensor)
mesh = init_device_mesh("neuron", (dist.get_world_size(),))
assert mesh.device_type == "neuron"
print(f"rank {rank} on {tensor.device} all_reduce {tensor[0].item()} backend {dist.get_backend()}", flush=True)
dist.destroy_process_group()
