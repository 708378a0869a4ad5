# PyTorch reference for tests/test_mnist_training.cpp: the benchmark MLP, SGD(0.01, momentum 0.9),
# one epoch on the first 10,000 training images, accuracy on the first 1,000 test images and on all.
#   python3 scripts/pytorch_e2e_reference.py DIR    # DIR holds the four MNIST IDX files as .gz
import gzip, sys, numpy as np, torch, torch.nn as nn
d = sys.argv[1]
def idx(name, off):
    return np.frombuffer(gzip.open(f"{d}/{name}.gz").read(), dtype=np.uint8, offset=off)
X = torch.tensor(idx("train-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28), dtype=torch.float32)
Y = torch.tensor(idx("train-labels-idx1-ubyte", 8), dtype=torch.int64)
Xt = torch.tensor(idx("t10k-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28), dtype=torch.float32)
Yt = torch.tensor(idx("t10k-labels-idx1-ubyte", 8), dtype=torch.int64)
norm = lambda x: (x / 255 - 0.1307) / 0.3081
X, Xt = norm(X), norm(Xt)
for bs in (64, 32):
    for seed in (1, 2, 3, 4):
        torch.manual_seed(seed)
        m = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        perm = torch.randperm(10000)
        for i in range(0, 10000, bs):
            b = perm[i:i + bs]
            opt.zero_grad(); nn.functional.cross_entropy(m(X[b]), Y[b]).backward(); opt.step()
        with torch.no_grad():
            p = m(Xt).argmax(1)
        print(f"torch e2e bs={bs} seed={seed}: first1000 {(p[:1000] == Yt[:1000]).float().mean()*100:.1f}%  all {(p == Yt).float().mean()*100:.2f}%")
