# PyTorch reference for apps/fashion_resnet: the same residual network, initialization, data
# normalization and training protocol (SGD lr 0.05, momentum 0.9, weight decay 5e-4, cosine schedule
# over the epochs, batch 128, shuffled each epoch), test accuracy after every epoch. --precision as
# the app's flag: fp32 strict float32 (TF32 off), tf32 TF32 on, bf16 and fp16 TF32 on and
# torch.autocast in that dtype around the forward and the loss (the evaluation's forward too, as the
# app does), fp16 with torch.amp.GradScaler around backward and the step.
#   python3 scripts/fashion_resnet_pytorch.py --data DIR/fashion-mnist [--epochs 10] [--seed 1] [--precision bf16]
import argparse, contextlib, gzip, time
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--data", required=True, help="folder with the four Fashion-MNIST IDX files (.gz)")
p.add_argument("--epochs", type=int, default=10)
p.add_argument("--batch-size", type=int, default=128)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--device", default="cuda")
p.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"], default="fp32")
a = p.parse_args()
torch.manual_seed(a.seed)
torch.backends.cuda.matmul.allow_tf32 = a.precision != "fp32"
torch.backends.cudnn.allow_tf32 = a.precision != "fp32"
autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
device_type = torch.device(a.device).type


def autocast():
    """torch.autocast in --precision's dtype for bf16 and fp16; nothing for fp32 and tf32."""
    return contextlib.nullcontext() if autocast_dtype is None else torch.autocast(device_type, dtype=autocast_dtype)


def idx(name, offset):
    return np.frombuffer(gzip.open(f"{a.data}/{name}.gz").read(), dtype=np.uint8, offset=offset)

def images(name):
    x = torch.tensor(idx(name, 16).reshape(-1, 1, 28, 28), dtype=torch.float32)
    return ((x / 255 - 0.2860) / 0.3530).to(a.device)

X, Y = images("train-images-idx3-ubyte"), torch.tensor(idx("train-labels-idx1-ubyte", 8), dtype=torch.int64).to(a.device)
Xt, Yt = images("t10k-images-idx3-ubyte"), torch.tensor(idx("t10k-labels-idx1-ubyte", 8), dtype=torch.int64).to(a.device)

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))

class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.stages = nn.Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 32, 1), BasicBlock(32, 64, 2),
                                    BasicBlock(64, 64, 1), BasicBlock(64, 128, 2), BasicBlock(128, 128, 1))
        self.fc = nn.Linear(128, 10)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.stages(self.stem(x)), 1), 1))

model = ResNet().to(a.device)
print(f"{sum(p.numel() for p in model.parameters())} parameters, precision {a.precision}")
opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
scaler = torch.amp.GradScaler(device_type, enabled=a.precision == "fp16")  # a pass-through when disabled
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs)
for epoch in range(1, a.epochs + 1):
    model.train()
    t0 = time.time()
    perm = torch.randperm(len(X), device=a.device)
    for i in range(0, len(X), a.batch_size):
        b = perm[i:i + a.batch_size]
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(X[b]), Y[b])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.time() - t0
    sched.step()
    model.eval()
    with torch.no_grad(), autocast():
        correct = sum((model(Xt[i:i + 1000]).float().argmax(1) == Yt[i:i + 1000]).sum().item() for i in range(0, len(Xt), 1000))
    print(f"pytorch epoch {epoch}: test accuracy {100 * correct / len(Xt):.2f}%, epoch time {seconds:.1f} s", flush=True)
