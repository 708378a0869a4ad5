#!/usr/bin/env python3
# apps/char_gpt in PyTorch, at its best, for side-by-side figures: nanoGPT's model.py and train.py
# (config/train_shakespeare_char.py) on the same text, vocabulary, 90/10 split, batch drawing,
# initialization, parameter groups, learning-rate schedule, gradient clipping and evaluation
# protocol, with the same flags and the same output lines (and --metrics' JSON lines).
#
#   python3 scripts/char_gpt_pytorch.py --data datasets/text/fortunes.txt --mode compile --precision bf16
#
# At its best: fused AdamW on CUDA, F.scaled_dot_product_attention (flash attention where the GPU,
# dtype and head size allow it), and with --mode compile the model through torch.compile as nanoGPT
# compiles it (--compile-mode picks Inductor's mode; reduce-overhead adds its CUDA graphs;
# max-autotune adds them too and times Triton's products against cuBLAS's: on an H200 in bf16 it ran
# 3% faster than reduce-overhead, after about 5 minutes of compiling, docs/benchmarks.md).
#
# --precision, as char_gpt's flag (apps/common/precision.h):
#   fp32  strict float32: torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 both False
#   tf32  both True
#   bf16  both True, and torch.autocast(device, torch.bfloat16) around the forward and the loss
#   fp16  both True, float16 autocast there, and torch.amp.GradScaler around backward and the step
#
# --profile lists the GPU kernels of five steps instead of training (with --mode compile
# --compile-mode default: Inductor's fused kernels by name, outside CUDA graphs).
#
# Tokens/s counts the training steps only (not the evaluations) from the 10th step on, the clock
# read after a device synchronization at each end, as char_gpt does.
import argparse, contextlib, json, math, os, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser(description="nanoGPT's character-level GPT, as apps/char_gpt trains it")
p.add_argument("--data", default=None,
               help="UTF-8 text (default: $MINIDL_DATA or <repo>/datasets, then text/fortunes.txt)")
p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
p.add_argument("--mode", choices=["eager", "compile"], default="eager")
p.add_argument("--compile-mode", choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
               default="default")
p.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"], default="fp32")
p.add_argument("--max-iters", type=int, default=5000)
p.add_argument("--eval-interval", type=int, default=250)
p.add_argument("--eval-iters", type=int, default=200)
p.add_argument("--log-interval", type=int, default=10)
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--block-size", type=int, default=256)
p.add_argument("--n-layer", type=int, default=6)
p.add_argument("--n-head", type=int, default=6)
p.add_argument("--n-embd", type=int, default=384)
p.add_argument("--dropout", type=float, default=0.2)
p.add_argument("--bias", action="store_true",
               help="biases in the Linear and LayerNorm layers (nanoGPT's default: none)")
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--min-lr", type=float, default=1e-4)
p.add_argument("--warmup-iters", type=int, default=100)
p.add_argument("--weight-decay", type=float, default=0.1)
p.add_argument("--beta2", type=float, default=0.99)
p.add_argument("--grad-clip", type=float, default=1.0)
p.add_argument("--seed", type=int, default=1337)
p.add_argument("--profile", action="store_true",
               help="list the GPU kernels of five training steps (torch.profiler, after 20 warm-up steps) and "
                    "exit; use --compile-mode default, whose kernels the profiler sees one by one")
p.add_argument("--metrics", default=None, help="append one JSON line per evaluation to DIR/metrics.jsonl")
a = p.parse_args()

torch.manual_seed(a.seed)
dev = torch.device(a.device)
cuda = dev.type == "cuda"
torch.backends.cuda.matmul.allow_tf32 = a.precision != "fp32"
torch.backends.cudnn.allow_tf32 = a.precision != "fp32"
autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)


def autocast():
    """torch.autocast on the device in --precision's dtype for bf16 and fp16; nothing otherwise."""
    return torch.autocast(dev.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()


# ---- data: nanoGPT's data/shakespeare_char/prepare.py and get_batch ----
path = a.data or os.path.join(os.environ.get("MINIDL_DATA") or
                              os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "datasets"),
                              "text", "fortunes.txt")
with open(path, encoding="utf-8") as f:
    text = f.read()
if not text:
    sys.exit(f"{path}: the text corpus is empty")
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)
n_train = int(len(ids) * 0.9)
splits = {"train": ids[:n_train].to(dev), "val": ids[n_train:].to(dev)}


def get_batch(split):
    """Random windows x = d[i:i+T], y = d[i+1:i+T+1], i = randint(len(d) - T), gathered on the device."""
    d = splits[split]
    i = torch.randint(len(d) - a.block_size, (a.batch_size,), device=dev)
    pos = i[:, None] + torch.arange(a.block_size, device=dev)
    return d[pos], d[pos + 1]


# ---- the model: nanoGPT's model.py ----
class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(a.n_embd, 3 * a.n_embd, bias=a.bias)
        self.c_proj = nn.Linear(a.n_embd, a.n_embd, bias=a.bias)
        self.resid_dropout = nn.Dropout(a.dropout)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(a.n_embd, dim=2)
        q, k, v = (t.view(B, T, a.n_head, C // a.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=a.dropout if self.training else 0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(a.n_embd, 4 * a.n_embd, bias=a.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * a.n_embd, a.n_embd, bias=a.bias)
        self.dropout = nn.Dropout(a.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(a.n_embd, bias=a.bias)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(a.n_embd, bias=a.bias)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, a.n_embd), wpe=nn.Embedding(a.block_size, a.n_embd),
            drop=nn.Dropout(a.dropout),
            h=nn.ModuleList([Block() for _ in range(a.n_layer)]), ln_f=nn.LayerNorm(a.n_embd, bias=a.bias)))
        self.lm_head = nn.Linear(a.n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * a.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))  # float32 under autocast


model = GPT(len(chars)).to(dev)
params = [p_ for p_ in model.parameters() if p_.requires_grad]
groups = [{"params": [p_ for p_ in params if p_.dim() >= 2], "weight_decay": a.weight_decay},
          {"params": [p_ for p_ in params if p_.dim() < 2], "weight_decay": 0.0}]
optimizer = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, a.beta2), fused=cuda)
scaler = torch.amp.GradScaler(dev.type) if a.precision == "fp16" else None
trained = torch.compile(model, mode=None if a.compile_mode == "default" else a.compile_mode) \
    if a.mode == "compile" else model


def lr_at(it):
    """nanoGPT's get_lr: linear warm-up, then half a cosine down to min_lr at max_iters."""
    if it < a.warmup_iters:
        return a.lr * (it + 1) / (a.warmup_iters + 1)
    if it >= a.max_iters:
        return a.min_lr
    ratio = (it - a.warmup_iters) / (a.max_iters - a.warmup_iters)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr - a.min_lr)


@torch.no_grad()
def estimate_loss():
    trained.eval()
    out = {}
    for split in ("train", "val"):
        total = torch.zeros((), device=dev)
        for _ in range(a.eval_iters):
            x, y = get_batch(split)
            with autocast():
                total += trained(x, y)
        out[split] = total.item() / a.eval_iters
    trained.train()
    return out


def sync():
    if cuda:
        torch.cuda.synchronize()


metrics = None
if a.metrics:
    os.makedirs(a.metrics, exist_ok=True)
    metrics = open(os.path.join(a.metrics, "metrics.jsonl"), "w")


def write_metrics(record):
    if metrics:
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()


tokens_per_iter = a.batch_size * a.block_size
print(f"char_gpt_pytorch: {path}, {len(ids)} characters ({n_train} train, {len(ids) - n_train} val), vocabulary "
      f"{len(chars)}; {a.n_layer} layers, {a.n_head} heads, width {a.n_embd}, context {a.block_size}, "
      f"{sum(p_.numel() for p_ in params) / 1e6:.2f}M parameters; batch {a.batch_size} ({tokens_per_iter} "
      f"tokens/iteration); device {dev}, mode {a.mode}, precision {a.precision}, torch {torch.__version__}", flush=True)

def train_step(it):
    """One training step at iteration it's learning rate; returns the loss (not synchronized)."""
    for g in optimizer.param_groups:
        g["lr"] = lr_at(it)
    x, y = get_batch("train")
    with autocast():
        loss = trained(x, y)
    if scaler:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    if a.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


if a.profile:
    # Where PyTorch's step spends the GPU: each kernel's total over five steps, largest first.
    from torch.profiler import ProfilerActivity, profile
    for it in range(20):
        train_step(it)
    sync()
    with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
        for it in range(20, 25):
            train_step(it)
        sync()
    print(prof.key_averages().table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total",
                                    row_limit=60, max_name_column_width=110))
    sys.exit(0)

timing_start = min(10, max(0, a.max_iters - 1))
timed_seconds, timed_iters, segment_first, segment_start = 0.0, 0, None, 0.0
run_start = time.perf_counter()
losses = {"train": float("nan"), "val": float("nan")}
for it in range(a.max_iters + 1):
    last = it == a.max_iters
    if it % a.eval_interval == 0 or last:
        if segment_first is not None:
            sync()
            timed_seconds += time.perf_counter() - segment_start
            timed_iters += it - segment_first
            segment_first = None
        losses = estimate_loss()
        rate = timed_iters * tokens_per_iter / timed_seconds if timed_seconds > 0 else float("nan")
        lr = lr_at(it)  # of the step about to run
        print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}, lr {lr:.3g}"
              + (f", {rate:.0f} tokens/s" if rate == rate else ""), flush=True)
        write_metrics({"iter": it, "train_loss": losses["train"], "val_loss": losses["val"], "lr": lr,
                       "tokens_per_s": rate if rate == rate else None,
                       "elapsed_s": time.perf_counter() - run_start})
    if last:
        break
    if it >= timing_start and segment_first is None:
        sync()
        segment_start, segment_first = time.perf_counter(), it
    loss = train_step(it)
    if (it + 1) % a.log_interval == 0:
        value = loss.item()
        print(f"iter {it + 1}: loss {value:.4f}")
        if not math.isfinite(value):
            sys.exit(f"training diverged: the loss is {value} at iteration {it + 1}")

rate = timed_iters * tokens_per_iter / timed_seconds if timed_seconds > 0 else float("nan")
peak = torch.cuda.max_memory_allocated(dev) / 1e6 if cuda else float("nan")
print(f"done: val loss {losses['val']:.4f} after {a.max_iters} iterations; {rate:.0f} tokens/s over {timed_iters} "
      f"timed iterations ({timed_seconds:.1f} s); mode {a.mode}; peak device memory {peak:.1f} MB", flush=True)
write_metrics({"final": True, "iter": a.max_iters, "val_loss": losses["val"], "train_loss": losses["train"],
               "tokens_per_s": rate if rate == rate else None, "timed_iters": timed_iters, "mode": a.mode})
