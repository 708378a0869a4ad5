# NumPy (CPU) against CuPy (GPU) on bench_ops crossover's ops and sizes, under its timing rules: the
# median of wall-clock calls after one warm-up, a GPU call timed to its synchronize, and with the
# transfers a NumPy user pays (cupy.asarray of the inputs, the op, .get() of the result). a*x+b runs
# as NumPy runs it (two passes) and, on the GPU, as one cupy.ElementwiseKernel; softmax over rows of
# 1000 (the row max subtracted, exp, divided by the row sum). Without CuPy (or a GPU) only the NumPy
# column is measured, and the script says so.
#
#   python3 scripts/crossover_numpy_cupy.py [--sizes 1e3 1e4 ...] [--csv numpy_cupy.csv] [--baseline-csv minidl.csv]
import argparse, csv, math, sys, time

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--sizes", nargs="+", default=["1e3", "3e3", "1e4", "3e4", "1e5", "3e5", "1e6", "3e6", "1e7", "3e7", "1e8"])
p.add_argument("--ops", nargs="+", default=["add", "axpb", "sum", "softmax"], choices=["add", "axpb", "sum", "softmax"])
p.add_argument("--repeats", type=int, default=20)
p.add_argument("--budget-ms", type=float, default=200)
p.add_argument("--csv", help="write the rows here (bench_ops crossover's columns)")
p.add_argument("--baseline-csv", help="bench_ops crossover --csv output: printed beside these figures")
a = p.parse_args()

try:
    import cupy as cp
    cp.cuda.runtime.getDeviceCount()
    gpu_name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
except Exception as e:  # no CuPy, no driver or no GPU: the CPU column only
    cp, gpu_name = None, f"none ({type(e).__name__}: {e})"
print(f"NumPy {np.__version__}; GPU: {gpu_name}; median of up to {a.repeats} calls after a warm-up")


def median_ms(call):
    call()
    times, spent = [], 0.0
    while len(times) < a.repeats and (len(times) < 3 or spent < a.budget_ms):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
        spent += times[-1]
    return sorted(times)[len(times) // 2]


def softmax(xp, x):
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


axpb_kernel = cp.ElementwiseKernel("float32 x, float32 a, float32 b", "float32 z", "z = a * x + b", "axpb") if cp else None


def run(op, xp, x, y):
    if op == "add":
        return x + y
    if op == "sum":
        return x.sum(dtype=xp.float64).astype(xp.float32)  # float64 accumulation, as minidl's
    if op == "softmax":
        return softmax(xp, x)
    if xp is not np:
        return axpb_kernel(x, xp.float32(2), xp.float32(0.5))
    return x * np.float32(2) + np.float32(0.5)


rows = []
rng = np.random.default_rng(1)
for op in a.ops:
    print(f"\n{op:8} {'elements':>11} {'NumPy ms':>11} {'CuPy ms':>11} {'CuPy+transfer ms':>17} {'err':>9}")
    sizes, cpu, dev, tr = [], [], [], []
    for text in a.sizes:
        n = int(float(text))
        if op == "softmax" and n % 1000:
            continue
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32) if op == "add" else None
        if op == "softmax":
            x = x.reshape(-1, 1000)
        out_cpu = run(op, np, x, y)
        c = median_ms(lambda: run(op, np, x, y))
        g = t = err = math.nan
        if cp is not None:
            xd, yd = cp.asarray(x), (cp.asarray(y) if y is not None else None)
            sync = cp.cuda.Device().synchronize

            def kernel_only():
                run(op, cp, xd, yd)
                sync()

            def with_transfers():
                out = run(op, cp, cp.asarray(x), cp.asarray(y) if y is not None else None)
                return cp.asnumpy(out)

            g, t = median_ms(kernel_only), median_ms(with_transfers)
            out_gpu = with_transfers()
            err = float(np.max(np.abs(out_gpu.astype(np.float64) - out_cpu) / np.maximum(1e-6, np.abs(out_cpu))))
        print(f"{op:8} {n:11d} {c:11.4f} {g:11.4f} {t:17.4f} {err:9.1e}", flush=True)
        rows.append({"framework": "numpy/cupy", "op": op, "size": n, "cpu_ms": c, "gpu_ms": g, "gpu_transfer_ms": t,
                     "max_rel_err": err})
        sizes.append(n), cpu.append(c), dev.append(g), tr.append(t)

    def crossover(gpu):
        start = None
        for i in reversed(range(len(sizes))):
            if not gpu[i] < cpu[i]:
                break
            start = sizes[i]
        return f"{start} elements" if start else "never"

    if cp is not None:
        print(f"{op}: CuPy wins from {crossover(dev)} with the data on the GPU, from {crossover(tr)} with the transfers")

if a.csv:
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
if a.baseline_csv:
    base = {(r["op"], int(r["size"])): r for r in csv.DictReader(open(a.baseline_csv))}
    print("\nside by side, ms (minidl CPU / NumPy, minidl GPU / CuPy, with transfers minidl / CuPy):")
    print(f"{'op':8} {'elements':>11} {'minidl CPU':>11} {'NumPy':>9} {'minidl GPU':>11} {'CuPy':>9} {'minidl+tr':>10} {'CuPy+tr':>9}")
    for r in rows:
        b = base.get((r["op"], r["size"]))
        if not b:
            continue
        f = lambda v: f"{float(v):.4f}"
        print(f"{r['op']:8} {r['size']:11d} {f(b['cpu_ms']):>11} {f(r['cpu_ms']):>9} {f(b['gpu_ms']):>11} "
              f"{f(r['gpu_ms']):>9} {f(b['gpu_transfer_ms']):>10} {f(r['gpu_transfer_ms']):>9}")
