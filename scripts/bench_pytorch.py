# The same measurement as apps/bench, in PyTorch, for side-by-side ratios (../shared/BENCHMARK.md):
# data on the device, each step gathers its batch with index_select, 50 uncounted warm-up steps,
# timed epochs of 60,000 images (last partial batch included), strict float32 (no TF32) unless
# --precision says otherwise.
#
# Every mode gives PyTorch its fast settings: cudnn.benchmark = True, the gradients set to None at
# the start of each step, SGD(fused=True) where the step is not compiled (and with fp16's scaler). Every shape that is timed
# is warmed up first, outside the timing: the full batch for --warmup steps, then the last partial
# batch (60,000 mod batch images, its own shape for cudnn.benchmark's search) for a few steps.
#   eager    the step as a PyTorch user writes it.
#   graph    the whole step (gather, forward, loss, backward, SGD) captured in one CUDA graph, one
#            graph for the full batch and one for the last partial batch; the gradients are
#            allocated in each graph's pool.
#   compile  the whole step through torch.compile (default mode, static shapes; the optimizer step
#            compiled too, its foreach update fused by Inductor), then captured in CUDA graphs as in
#            graph mode. Dynamo breaks its graphs at zero_grad and backward (it runs those itself,
#            the backward through the compiled backward graph); the CUDA graph holds all of it.
#            Compiling is part of the warm-up and is not timed; the number of graphs Dynamo made
#            and its graph breaks are printed, and a compile error is raised, never run eagerly.
#            --compile-mode max-autotune-no-cudagraphs also times Triton GEMMs against cuBLAS for
#            every product of every shape: minutes of compiling (over 150 s for the CNN at batch
#            512 on an H100 without finishing).
#   best     runs the three one after the other, each in a fresh model from the same seed (for the
#            CNN on a GPU, compile a second time with channels-last weights), and prints a last
#            line, "pytorch best", with the fastest of them and which one it was
#            (a mode that fails is reported as failed, with its traceback, and left out).
#   all      the same as best.
# --precision, as apps/bench's flag (apps/common/precision.h):
#   fp32     strict float32: torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 both False
#   tf32     both True
#   bf16     both True, and torch.autocast(device, torch.bfloat16) around the forward and the loss
#   fp16     both True, float16 autocast there, and torch.amp.GradScaler around backward and the SGD
#            step. The scaler's step reads found_inf on the host (a sync a graph cannot capture)
#            unless the optimizer takes it on the device: SGD(fused=True) does (grad_scale and
#            found_inf go into its kernel, and update() runs on the device), so fp16 keeps the fused
#            SGD in every mode, compile included, and the whole scaled step is captured.
# --memory-format channels_last puts the model's weights in torch.channels_last (the input follows
# them in each convolution), PyTorch's recipe for tensor-core convolutions; contiguous (NCHW) by default.
# Every timed line names the precision.
# Each timed line ends with the training loss on the first 10,000 training images before and after
# (eval mode, not timed), so that every mode can be seen to learn. With --epochs N, N epochs are
# timed one by one (each reshuffled) and the line gives the median epoch, then all N.
#
#   python3 scripts/bench_pytorch.py --model cnn --batch-size 64 --data DIR/mnist [--mode eager|graph|compile|best]
#       [--precision fp32|tf32|bf16|fp16]
import argparse, contextlib, statistics, sys, time, traceback
import torch
import torch.nn.functional as F

from mnist_torch import make_model, training_set

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--device", default="cuda")
p.add_argument("--data", required=True, help="folder with the MNIST IDX files (raw or .gz)")
p.add_argument("--mode", choices=["eager", "graph", "compile", "best", "all"], default="eager")
p.add_argument("--graph", action="store_true", help="same as --mode graph")
p.add_argument("--compile-mode", choices=["default", "max-autotune-no-cudagraphs"], default="default",
               help="torch.compile's mode for --mode compile (its own CUDA graphs stay off: the step is captured whole)")
p.add_argument("--epochs", type=int, default=1, help="timed epochs; the figure is their median")
p.add_argument("--warmup", type=int, default=50, help="uncounted full-batch steps before the timing")
p.add_argument("--tail-warmup", type=int, default=3, help="uncounted steps at the last partial batch's shape")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--profile", action="store_true", help="after the timed epochs, list each kernel's time per step")
p.add_argument("--memory-format", choices=["contiguous", "channels_last"], default="contiguous",
               help="channels_last: the model's weights in torch.channels_last, as PyTorch's tensor-core recipe has it "
                    "(its convolutions then run NHWC without transposes)")
p.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"], default="fp32",
               help="fp32: strict float32; tf32: TF32 matmuls and convolutions; bf16/fp16: that autocast plus TF32 "
                    "(fp16 with a GradScaler)")
a = p.parse_args()
if a.epochs < 1:
    p.error("--epochs must be at least 1")
tf32 = a.precision != "fp32"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.backends.cudnn.benchmark = True
autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
dev = torch.device(a.device)
cuda = dev.type == "cuda"


def autocast():
    """torch.autocast on the device in --precision's dtype for bf16 and fp16; nothing otherwise."""
    if autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(dev.type, dtype=autocast_dtype)


images, targets = training_set(a.data, dev)
n, bs = images.shape[0], a.batch_size
tail = n % bs  # the last partial batch of every epoch; 0 when bs divides n


def run(mode, channels_last=a.memory_format == "channels_last"):
    torch.manual_seed(a.seed)
    model = make_model(a.model).to(dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    # fp16 keeps the fused SGD when compiled too: without it the scaler's step syncs (see the top).
    fused = cuda and (mode != "compile" or a.precision == "fp16")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, **({"fused": True} if fused else {}))
    scaler = torch.amp.GradScaler(dev.type) if a.precision == "fp16" else None
    loss_before = train_loss(model)

    def step(ix):
        opt.zero_grad(set_to_none=True)
        with autocast():  # the forward and the loss only, as PyTorch's AMP recipe has it
            loss = F.cross_entropy(model(images.index_select(0, ix)), targets.index_select(0, ix))
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)  # fused SGD: unscales and skips on the device, no host sync
            scaler.update()
        return loss

    fn = step
    if mode == "compile":
        from torch._dynamo.utils import counters
        import torch._dynamo.config as dynamo_config
        dynamo_config.suppress_errors = False  # a step that fails to compile stops here, never runs eagerly
        for name in ("recompile_limit", "cache_size_limit"):  # full batch, tail batch, first steps
            if hasattr(dynamo_config, name):
                setattr(dynamo_config, name, max(getattr(dynamo_config, name), 32))
        counters.clear()
        fn = torch.compile(step, dynamic=False, mode=None if a.compile_mode == "default" else a.compile_mode)

    # Warm-up: the full batch, then the tail's shape; for graphs on a side stream, as capture requires.
    warm_order = shuffled(a.seed + 1000)
    shapes = [bs] + ([tail] if tail else [])
    index = {size: torch.empty(size, dtype=torch.int64, device=dev) for size in shapes}
    t0 = time.perf_counter()
    side = torch.cuda.Stream() if cuda and mode != "eager" else None
    if side is not None:
        side.wait_stream(torch.cuda.current_stream())
    least = 0 if mode == "eager" else 3  # a graph is captured only after a few steps have run
    with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
        for size, steps in ((bs, max(a.warmup, least)), (tail, max(a.tail_warmup, least) if tail else 0)):
            for i in range(steps):
                index[size].copy_(warm_order[(i * size) % (n - size):][:size])
                fn(index[size])
    if side is not None:
        torch.cuda.current_stream().wait_stream(side)
    graphs = {}
    if mode in ("graph", "compile"):
        if not cuda:
            raise SystemExit(f"--mode {mode} needs a CUDA device")
        for size in shapes:  # each graph in its own pool: the gradients it allocates stay its own
            if mode == "graph":  # as PyTorch's notes do; a compiled step's guards expect gradients here
                opt.zero_grad(set_to_none=True)
            graphs[size] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graphs[size]):
                fn(index[size])
        for size in shapes:  # the first replays, untimed too
            for _ in range(2):
                graphs[size].replay()
    sync()
    warm_seconds = time.perf_counter() - t0
    if mode == "compile":
        breaks = sum(counters["graph_break"].values())
        reasons = "; ".join(sorted({r.strip().splitlines()[0][:100] for r in counters["graph_break"]}))
        print(f"  compile ({a.compile_mode}): {counters['stats']['unique_graphs']} graphs, {breaks} graph breaks"
              f"{' (' + reasons + ')' if breaks else ''}, {warm_seconds:.1f} s to compile, warm up and capture",
              flush=True)
        if counters["stats"]["unique_graphs"] == 0:
            raise SystemExit("torch.compile made no graph: the step ran eagerly")

    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    seconds = []
    for epoch in range(a.epochs):
        order = shuffled(a.seed + epoch)
        sync()
        t0 = time.perf_counter()
        for begin in range(0, n, bs):
            ix = order[begin:begin + bs]
            if graphs:
                index[ix.numel()].copy_(ix)
                graphs[ix.numel()].replay()
            else:
                step(ix)
        sync()
        seconds.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated(dev) / 2**20 if cuda else 0
    sec = statistics.median(seconds)
    result = {"mode": mode, "ips": n / sec, "sec": sec, "peak": peak, "loss": (loss_before, train_loss(model)),
              "epochs": [n / s for s in seconds], "channels_last": channels_last}
    print(line(result), flush=True)
    if a.profile and graphs:
        profile(graphs[bs], index[bs], order[:bs])
    return result


def line(r, mode=None, extra=""):
    layout = "  channels_last" if r["channels_last"] else ""
    out = (f"pytorch {mode or r['mode']}  model {a.model}  batch {bs}  precision {a.precision}{layout}  {r['ips']:.0f} img/s  epoch {r['sec']:.3f} s  "
           f"peak device {r['peak']:.0f} MB  loss {r['loss'][0]:.3f} -> {r['loss'][1]:.3f}")
    if len(r["epochs"]) > 1:
        out += f"  median of {len(r['epochs'])} epochs: " + " / ".join(f"{x:.0f}" for x in r["epochs"])
    return out + extra


def shuffled(seed):
    """A permutation of the training set from a seeded generator of its own, on the device."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(dev)


def train_loss(model, count=10000, chunk=1000):
    """Mean cross-entropy on the first `count` training images, eval mode, no gradients."""
    model.eval()
    with torch.no_grad():
        total = sum(F.cross_entropy(model(images[i:i + chunk]), targets[i:i + chunk], reduction="sum")
                    for i in range(0, count, chunk))
    model.train()
    return total.item() / count


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
    if cuda:
        torch.cuda.synchronize()


mode = "graph" if a.graph else a.mode
if mode in ("best", "all"):
    results = []
    runs = [(m, a.memory_format == "channels_last") for m in (["eager", "graph", "compile"] if cuda else ["eager"])]
    # The CNN compiled again with channels-last weights: on an H200 in bfloat16 it ran 7% (batch 64)
    # and 10% (batch 512) faster than NCHW, its convolutions then without cuDNN's transposes, so
    # PyTorch's best tries both.
    if cuda and a.model == "cnn" and a.memory_format == "contiguous":
        runs.append(("compile", True))
    for m, channels_last in runs:
        try:
            results.append(run(m, channels_last))
        except Exception:  # said loudly, and the best is then taken over the modes that ran
            traceback.print_exc()
            print(f"pytorch {m}  model {a.model}  batch {bs}  precision {a.precision}  failed", flush=True)
    if not results:
        sys.exit(1)
    won = max(results, key=lambda r: r["ips"])
    winner = won["mode"] + ("_channels_last" if won["channels_last"] else "")
    print(line(won, "best", f"  winner {winner}"), flush=True)
else:
    run(mode)
