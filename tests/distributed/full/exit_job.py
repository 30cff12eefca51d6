"""A torchrun job that ends with work in flight and without ``destroy_process_group``: a callback
chained on an async all_reduce's future (its first call compiles), a callback that starts another
async collective, a receive and a send never waited on. Each aborted the exit ("terminate called
without an active exception") while a thread of gloo's or the group's still ran Python as the
interpreter finalized."""

import torch
import torch.distributed as dist

dist.init_process_group("neuron")
rank = dist.get_rank()
# A collective as the first device work, on a tensor torch.empty made without starting the
# runtime: its copy back raised IndexError from cores.core (helper-79).
first = torch.empty(2, device="neuron")
dist.all_reduce(first)
tensor = torch.full((64,), float(rank + 1), device="neuron")
work = dist.all_reduce(tensor, async_op=True)
work.get_future().then(lambda future: (future.value()[0] * 3.25 + 1).sin().sum().item())
work.wait()
# A callback that starts another async collective, as PowerSGD's hooks chain them.
chained = torch.ones(1000, device="neuron")
dist.all_reduce(tensor, async_op=True).get_future().then(
    lambda _: dist.all_reduce(chained, async_op=True).get_future().then(lambda f: f.value()[0].sum().item())
)
received = torch.zeros(1000, device="neuron")
if rank == 0:
    dist.isend(torch.arange(1000.0, device="neuron"), dst=1)
else:
    dist.irecv(received, src=0)
print(f"rank {rank} done", flush=True)
