# PyTorch's fused attention, timed as `bench_ops attention` times minidl's: forward + backward of
# F.scaled_dot_product_attention on q, k, v [batch, heads, L, head size] that require grad, one
# backward of a fixed output gradient per iteration, for every fused backend that runs the dtype
# (cuDNN's and flash attention for bfloat16 and float16; the memory-efficient kernel for all, the
# only one for float32), a line each, the fastest marked "best" (PyTorch's own choice on an H100/H200
# in 16 bits is cuDNN's where it runs). Warm-up iterations first, then the median of --reps timings
# of --iters iterations each, by CUDA events.
#
#   python3 scripts/bench_attention_pytorch.py [--batch 64] [--heads 6] [--head-size 64]
#       [--lengths 256 1024] [--dtypes float32 bfloat16] [--no-causal]
import argparse, statistics
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--heads", type=int, default=6)
p.add_argument("--head-size", type=int, default=64)
p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16", "float16"])
p.add_argument("--no-causal", action="store_true")
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--iters", type=int, default=20)
p.add_argument("--reps", type=int, default=5)
args = p.parse_args()
causal = not args.no_causal
torch.backends.cuda.matmul.allow_tf32 = False  # float32 stays float32, as minidl's default

# The fused backends that run this call, in PyTorch's order of preference.
def runnable_backends(q, k, v):
    found = []
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
            found.append(backend)
        except RuntimeError:
            continue
    if not found:
        raise SystemExit("no fused SDPA backend runs here")
    return found

for dtype_name in args.dtypes:
    dtype = getattr(torch, dtype_name)
    for L in args.lengths:
        torch.manual_seed(0)
        shape = (args.batch, args.heads, L, args.head_size)
        q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        grad = torch.randn(shape, device="cuda", dtype=dtype)
        def step():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.backward(grad)

        results = []
        for backend in runnable_backends(q, k, v):
            with sdpa_kernel(backend):
                for _ in range(args.warmup):
                    step()
                times = []
                for _ in range(args.reps):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.iters):
                        step()
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end) / args.iters)
            results.append((statistics.median(times), backend))
        best = min(results, key=lambda r: r[0])[0]
        for ms, backend in results:
            # FlashAttention's count: the forward's two products are 4 L^2 d a head, forward and
            # backward together 3.5 times that; causal attention does half of them.
            flops = 4 * args.batch * args.heads * L * L * args.head_size * 3.5 * (0.5 if causal else 1)
            print(f"pytorch attention  {dtype_name}  L {L}  batch {args.batch}  heads {args.heads}  head size "
                  f"{args.head_size}  causal {int(causal)}  backend {backend.name.lower()}  fwd+bwd {ms:.4f} ms  "
                  f"{flops / ms / 1e9:.1f} TFLOP/s{'  best' if ms == best else ''}", flush=True)
