# The MNIST training set and the two models of apps/common/models.h in PyTorch, shared by the
# comparison scripts (bench_pytorch.py, bench_pytorch_ddp.py).
import gzip, os
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(folder, name, offset):
    """An IDX file's bytes after its header, raw or .gz."""
    for path in (f"{folder}/{name}", f"{folder}/{name}.gz"):
        if os.path.exists(path):
            raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
            return np.frombuffer(raw, dtype=np.uint8, offset=offset)
    raise SystemExit(f"missing {name} under {folder}")


def training_set(folder, device):
    """The 60,000 training images, normalized as minidl does, and their labels, on `device`."""
    images = torch.tensor(read_idx(folder, "train-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28), dtype=torch.float32)
    images = ((images / 255 - 0.1307) / 0.3081).to(device)
    targets = torch.tensor(read_idx(folder, "train-labels-idx1-ubyte", 8), dtype=torch.int64).to(device)
    return images, targets


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.relu(self.fc1(torch.flatten(F.dropout(x, 0.25, self.training), 1)))
        return self.fc2(F.dropout(x, 0.5, self.training))


def make_model(name):
    """"cnn" or "mlp" (784-512-256-10 with ReLUs), freshly initialized."""
    if name == "cnn":
        return Cnn()
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))
