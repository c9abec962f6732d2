"""A worker of tests/gpu/run.sh's NCCL job (`rdzv-agent join
--nproc-per-node gpu -- python3 nccl_worker.py`): NCCL from env:// on its
GPU, an all_reduce whose sum it checks, and a few DDP steps; then one
line of JSON with what it saw (rank, world, torch's version, the NCCL
error-handling variables of its environment). Exits 1 when a check fails.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
world = dist.get_world_size()

t = torch.full((1 << 20,), float(rank + 1), device="cuda")
dist.all_reduce(t)
ok = t[0].item() == world * (world + 1) / 2

model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Linear(256, 256).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(5):
    opt.zero_grad()
    model(torch.randn(64, 256, device="cuda")).sum().backward()
    opt.step()
torch.cuda.synchronize()
dist.barrier()

print(json.dumps({
    "rank": rank, "world": world, "allreduce_ok": ok,
    "torch": torch.__version__,
    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    "device": torch.cuda.get_device_name(),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING":
        os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING"),
    "NCCL_ASYNC_ERROR_HANDLING": os.environ.get("NCCL_ASYNC_ERROR_HANDLING"),
}), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
