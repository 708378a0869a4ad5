#!/usr/bin/env python3
# minidl's safetensors files and PyTorch's, exchanged both ways. Needs torch, safetensors and a
# minidl build with its tests (build/ by default); exits non-zero on any mismatch.
#
#   python3 scripts/safetensors_interop.py [--build build] [--workdir DIR]
#
# 1. PyTorch -> minidl: saves the MNIST MLP's state_dict with safetensors.torch.save_file (names
#    "layers.1.weight", ... as minidl's Mlp in apps/common/models.h), and an input batch with
#    PyTorch's output; minidl_tests --gtest_filter=SafetensorsInterop.* loads them with nn::load
#    and compares the outputs.
# 2. minidl -> PyTorch: that test also writes minidl_mlp.safetensors and minidl_io.safetensors;
#    they are opened with safetensors (names, shapes, sums printed), loaded into the PyTorch MLP
#    with strict=True, and its output compared with minidl's.
# 3. When MNIST is present (datasets/mnist or $MINIDL_DATA): one epoch of build/mnist_mlp --save
#    on the GPU, the checkpoint opened with safetensors, then a --resume for epoch 2 beside an
#    uninterrupted two-epoch run (their last test lines are printed for comparison).
import argparse, os, subprocess, sys, tempfile
from pathlib import Path

try:
    import torch, torch.nn as nn
    from safetensors import safe_open
    from safetensors.torch import save_file
except ImportError as e:
    sys.exit(f"safetensors_interop: needs torch and safetensors ({e}); pip install torch safetensors")

root = Path(__file__).resolve().parent.parent
p = argparse.ArgumentParser()
p.add_argument("--build", default=str(root / "build"), help="minidl build folder (with minidl_tests and mnist_mlp)")
p.add_argument("--workdir", default=None, help="where the exchanged files go (default: a temporary folder)")
a = p.parse_args()
build = Path(a.build)
work = Path(a.workdir or tempfile.mkdtemp(prefix="minidl_interop_"))
work.mkdir(parents=True, exist_ok=True)


class Mlp(nn.Module):  # apps/common/models.h: the same layers under the same names
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                    nn.Linear(256, 10))

    def forward(self, x):
        return self.layers(x)


def show(path):
    """Prints a safetensors file's metadata and every tensor's name, dtype, shape and sum; returns the tensors."""
    tensors = {}
    with safe_open(str(path), framework="pt", device="cpu") as f:
        print(f"{path.name}: metadata {f.metadata()}")
        for name in f.keys():
            t = tensors[name] = f.get_tensor(name)
            print(f"  {name:32s} {str(t.dtype):14s} {str(list(t.shape)):14s} sum {t.double().sum().item():.6f}")
    return tensors


failures = []
torch.manual_seed(0)
expected_names = ["layers.1.weight", "layers.1.bias", "layers.3.weight", "layers.3.bias", "layers.5.weight",
                  "layers.5.bias"]
model = Mlp().eval()
assert [n for n, _ in model.named_parameters()] == expected_names, list(model.named_parameters())

# 1. PyTorch -> minidl
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(work / "torch_mlp.safetensors"),
          metadata={"format": "pt"})
x = torch.randn(8, 1, 28, 28)
with torch.no_grad():
    save_file({"input": x, "output": model(x)}, str(work / "torch_io.safetensors"))
env = dict(os.environ, MINIDL_INTEROP_DIR=str(work))
r = subprocess.run([str(build / "minidl_tests"), "--gtest_filter=SafetensorsInterop.*"], env=env, text=True,
                   capture_output=True)
print(r.stdout[-2000:], r.stderr[-2000:], sep="")
if r.returncode != 0 or "[  PASSED  ] 1 test" not in r.stdout:
    failures.append("minidl did not load PyTorch's MLP with the same outputs (SafetensorsInterop failed or skipped)")

# 2. minidl -> PyTorch
if (work / "minidl_mlp.safetensors").exists():
    weights = show(work / "minidl_mlp.safetensors")
    io = show(work / "minidl_io.safetensors")
    mine = Mlp().eval()
    mine.load_state_dict(weights, strict=True)  # raises on any missing, unexpected or mis-shaped name
    with torch.no_grad():
        diff = (mine(io["input"]) - io["output"]).abs().max().item()
    print(f"minidl's MLP in PyTorch: max |output difference| {diff:.3g}")
    if diff > 1e-4:
        failures.append(f"PyTorch's output of minidl's MLP differs by {diff}")
else:
    failures.append("minidl wrote no minidl_mlp.safetensors")

# 3. An app checkpoint written on the GPU, and a resume.
data = Path(os.environ.get("MINIDL_DATA", root / "datasets"))
app = build / "mnist_mlp"
if app.exists() and (data / "mnist").is_dir():
    ckpt = work / "mnist_mlp.safetensors"
    common = [str(app), "--limit", "6000", "--log-interval", "1000"]
    run = lambda *args: subprocess.run(common + list(args), text=True, capture_output=True, env=dict(os.environ, MINIDL_GEMM_TUNE="0"))
    first = run("--epochs", "1", "--save", str(ckpt))
    print(first.stdout[-600:], first.stderr[-600:], sep="")
    if first.returncode != 0:
        failures.append("mnist_mlp --save failed")
    else:
        tensors = show(ckpt)
        model_part = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
        Mlp().load_state_dict(model_part, strict=True)
        resumed = run("--epochs", "2", "--resume", str(ckpt))
        whole = run("--epochs", "2")
        last = lambda r: [l for l in r.stdout.splitlines() if l.startswith("Test set")][-1:]  # noqa: E741
        print("resumed at epoch 2:      ", last(resumed), resumed.stderr[-300:])
        print("uninterrupted, epoch 2:  ", last(whole))
        if resumed.returncode != 0:
            failures.append("mnist_mlp --resume failed")
else:
    print(f"step 3 skipped: no {app} or no MNIST under {data}")

print(f"files in {work}")
if failures:
    sys.exit("safetensors_interop: FAILED:\n  " + "\n  ".join(failures))
print("safetensors_interop: OK")
