# The same measurement as apps/bench, in PyTorch, for side-by-side ratios (../shared/BENCHMARK.md):
# data on the device, each step gathers its batch with index_select, 50 uncounted warm-up steps,
# one timed epoch of 60,000 images (last partial batch included), strict float32 (no TF32).
# --mode graph captures the whole step (gather, forward, loss, backward, SGD) in one CUDA graph; the
# last partial batch then runs eagerly, since a graph has fixed shapes. --mode best is what a
# PyTorch user would pick for speed: the graph captured with the gradients set to None first (so
# they live in the graph's pool), cudnn.benchmark = True and SGD(fused=True). --mode all runs the
# three, one after the other, in fresh models.
#
#   python3 scripts/bench_pytorch.py --model cnn --batch-size 64 --data DIR/mnist [--mode eager|graph|best|all]
import argparse, time
import torch
import torch.nn.functional as F

from mnist_torch import make_model, training_set

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--device", default="cuda")
p.add_argument("--data", required=True, help="folder with the MNIST IDX files (raw or .gz)")
p.add_argument("--mode", choices=["eager", "graph", "best", "all"], default="eager")
p.add_argument("--graph", action="store_true", help="same as --mode graph")
p.add_argument("--warmup", type=int, default=50)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--profile", action="store_true", help="after the timed epoch, list each kernel's time per step")
a = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device(a.device)
images, targets = training_set(a.data, dev)


def run(mode):
    torch.backends.cudnn.benchmark = mode == "best"
    torch.manual_seed(a.seed)
    model = make_model(a.model).to(dev)
    fused = mode == "best" and dev.type == "cuda"
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, **({"fused": True} if fused else {}))
    n, bs = images.shape[0], a.batch_size
    order = torch.randperm(n, device=dev)
    index = torch.empty(bs, dtype=torch.int64, device=dev)

    def step(ix, set_to_none):
        opt.zero_grad(set_to_none=set_to_none)
        loss = F.cross_entropy(model(images.index_select(0, ix)), targets.index_select(0, ix))
        loss.backward()
        opt.step()
        return loss

    graph = None
    if mode in ("graph", "best"):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up on a side stream, as graph capture requires
            for i in range(max(a.warmup, 3)):
                index.copy_(order[(i * bs) % (n - bs):][:bs])
                step(index, set_to_none=mode == "best")
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        if mode == "best":
            opt.zero_grad(set_to_none=True)  # the gradients are then allocated in the graph's pool
        with torch.cuda.graph(graph):
            step(index, set_to_none=mode == "best")
    else:
        for i in range(a.warmup):
            step(order[(i * bs) % (n - bs):][:bs], set_to_none=True)
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    order = torch.randperm(n, device=dev)
    t0 = time.perf_counter()
    for begin in range(0, n, bs):
        ix = order[begin:begin + bs]
        if graph is not None and ix.numel() == bs:
            index.copy_(ix)
            graph.replay()
        else:
            step(ix, set_to_none=True)
    sync()
    sec = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else 0
    print(f"pytorch {mode}  model {a.model}  batch {bs}  {n / sec:.0f} img/s  epoch {sec:.3f} s  peak device {peak:.0f} MB",
          flush=True)
    if a.profile and graph is not None:
        profile(graph, index, order[:bs])


def profile(graph, index, ix, steps=20):
    index.copy_(ix)
    sync()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            graph.replay()
        sync()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total, count = kernels.get(e.name, (0.0, 0))
            kernels[e.name] = (total + e.time_range.elapsed_us(), count + 1)
    busy = sum(t for t, _ in kernels.values()) / steps
    launched = sum(c for _, c in kernels.values()) / steps
    print(f"  {launched:.1f} kernels/step, {busy:.0f} us of kernels/step")
    for name, (t, c) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:16]:
        print(f"  {t / steps:8.1f} us {c / steps:5.1f}x  {name[:110]}")


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


mode = "graph" if a.graph else a.mode
for m in (["eager", "graph", "best"] if mode == "all" else [mode]):
    run(m)
