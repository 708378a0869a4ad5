# PyTorch DistributedDataParallel under apps/bench's protocol, for the scaling comparison with
# `bench --distributed` (docs/distributed.md): the data on each GPU, each rank gathering its share of
# one shuffled epoch (every world_size-th index of a shared permutation) batch by batch with
# index_select, 50 uncounted warm-up steps, one timed epoch of 60,000 images in all, strict float32.
# Each rank runs the PyTorch user's fast settings: cudnn.benchmark, SGD(fused=True),
# gradient_as_bucket_view. --mode graph also captures the whole DDP step in a CUDA graph, as
# PyTorch's CUDA-graph notes describe (static_graph, 11+ eager warm-up steps on a side stream).
# Rank 0 prints the job's images per second. Started by torchrun, one process per GPU:
#
#   torchrun --nproc-per-node 2 scripts/bench_pytorch_ddp.py --model cnn --batch-size 512 --data DIR/mnist
import argparse, os, time
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from mnist_torch import make_model, training_set

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
p.add_argument("--batch-size", type=int, default=64, help="per GPU")
p.add_argument("--data", required=True, help="folder with the MNIST IDX files (raw or .gz)")
p.add_argument("--mode", choices=["eager", "graph"], default="eager")
p.add_argument("--warmup", type=int, default=50)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True

local_rank = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", local_rank)
images, targets = training_set(a.data, dev)

torch.manual_seed(a.seed)
model = make_model(a.model).to(dev)
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], gradient_as_bucket_view=True,
                                          static_graph=a.mode == "graph")
opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9, fused=True)
n, bs = images.shape[0], a.batch_size


def shard(seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randperm(n, generator=g)[rank::world].to(dev)  # the same permutation on every rank


def step(ix):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(ddp(images.index_select(0, ix)), targets.index_select(0, ix))
    loss.backward()
    opt.step()
    return loss


order = shard(a.seed)
index = torch.empty(bs, dtype=torch.int64, device=dev)
graph = None
if a.mode == "graph":
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(max(a.warmup, 11)):
            index.copy_(order[(i * bs) % (order.numel() - bs):][:bs])
            step(index)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step(index)
else:
    for i in range(a.warmup):
        step(order[(i * bs) % (order.numel() - bs):][:bs])
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats(dev)
order = shard(a.seed + 1)
dist.barrier()
t0 = time.perf_counter()
for begin in range(0, order.numel(), bs):
    ix = order[begin:begin + bs]
    if graph is not None and ix.numel() == bs:
        index.copy_(ix)
        graph.replay()
    else:
        step(ix)
torch.cuda.synchronize()
dist.barrier()
sec = time.perf_counter() - t0
peak = torch.cuda.max_memory_allocated(dev) / 2**20
if rank == 0:
    print(f"pytorch ddp {a.mode}  model {a.model}  batch {bs}  gpus {world}  {n / sec:.0f} img/s  epoch {sec:.3f} s  "
          f"peak device {peak:.0f} MB", flush=True)
dist.destroy_process_group()
