#!/usr/bin/env python3
# torch.matmul and cupy.matmul under the timing rules of `bench_ops matmul` (kernel_lab/matmul_bench.h),
# printing its columns, so their rows can sit in the same table (docs/kernels.md):
#   - the same inputs: A and B drawn by bench_ops' generator (splitmix64 from --seed, uniform in
#     [-1, 1)), so the error columns compare entry for entry;
#   - a first run checked against a float64 product (every entry): err = max |C - ref| / (|A| |B|);
#   - --warmup runs, then up to --repeats runs (fewer past --budget-ms, at least 3), each between two
#     CUDA events, queued behind a short busy-wait kernel so the host's launch cost is not in them;
#     the median is reported;
#   - each library with TF32 off (strict float32) and, separately, on;
#   - with the transfers: upload A and B from pageable, then from pinned host memory, matmul,
#     download C, all between the events.
# %cuBLAS is against bench_ops' cuBLAS float32 row when --baseline-csv names its CSV, else against
# the first float32 row printed here (torch fp32, or cupy fp32 without PyTorch).
# A library that is not installed is skipped with a message.
#
#   python3 scripts/matmul_torch_cupy.py [--sizes 4096x4096x4096 777x1313x555] [--libs torch,cupy]
#                                         [--baseline-csv bench_ops.csv] [--csv out.csv]
import argparse
import csv
import statistics
import sys

DEFAULT_SIZES = ["4096x4096x4096:square", "1000x1000x1000:odd", "777x1313x555:odd", "64x784x512:mlp fc1 batch 64",
                 "512x784x512:mlp fc1 batch 512", "64x9216x128:cnn fc1 batch 64",
                 "64x288x36864:cnn conv2 im2col batch 64"]

p = argparse.ArgumentParser(description="torch.matmul and cupy.matmul in bench_ops matmul's columns")
p.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, help="MxKxN[:label]: A is MxK, B is KxN")
p.add_argument("--libs", default="torch,cupy")
p.add_argument("--repeats", type=int, default=20, help="timed runs per measurement, at most")
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--budget-ms", type=float, default=250, help="fewer repeats (at least 3) past this time")
p.add_argument("--no-transfers", action="store_true")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--baseline-csv", help="bench_ops --csv output: %%cuBLAS against its cublas fp32 rows")
p.add_argument("--csv", help="also write the rows as CSV (bench_ops' columns)")
args = p.parse_args()

try:
    import numpy as np
except ImportError:
    sys.exit("matmul_torch_cupy.py needs NumPy (pip install numpy)")

MASK = (1 << 64) - 1


def parse_shape(spec):
    dims, _, label = spec.partition(":")
    try:
        m, k, n = (int(x) for x in dims.split("x"))
    except ValueError:
        sys.exit(f"--sizes: expected MxKxN with positive integers (A is MxK, B is KxN), got '{spec}'")
    if min(m, k, n) < 1:
        sys.exit(f"--sizes: expected positive sizes, got '{spec}'")
    return m, k, n, label


def bench_ops_inputs(m, k, n, seed):
    """A and B exactly as kernel_lab/matmul_bench.cpp draws them (splitmix64, 24 bits per value)."""
    count = m * k + k * n
    state0 = (seed * 0x2545F4914F6CDD1D + 1) & MASK
    with np.errstate(over="ignore"):
        z = np.uint64(state0) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    values = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 / 16777216.0) - np.float32(1.0)
    return values[: m * k].reshape(m, k), values[m * k:].reshape(k, n)


def plan_repeats(estimate_ms):
    most = max(1, args.repeats)
    least = min(3, most)
    if not estimate_ms > 0:
        return most
    return int(min(max(args.budget_ms // estimate_ms, least), most))


class Torch:
    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
        self.t = torch
        self.name = "torch"

    def describe(self):
        t = self.t
        return f"PyTorch {t.__version__}, CUDA {t.version.cuda}, {t.cuda.get_device_name(0)}"

    def set_tf32(self, on):
        self.t.backends.cuda.matmul.allow_tf32 = on
        return True

    def setup(self, a, b):
        t = self.t
        self.ha, self.hb = t.from_numpy(a), t.from_numpy(b)  # pageable
        self.pa, self.pb = self.ha.pin_memory(), self.hb.pin_memory()
        self.da, self.db = self.ha.cuda(), self.hb.cuda()
        self.hc = t.empty((a.shape[0], b.shape[1]), dtype=t.float32)
        self.pc = self.hc.pin_memory()
        self.ref = self.da.double() @ self.db.double()
        self.ref_abs = self.da.abs().double() @ self.db.abs().double()

    def matmul(self):
        return self.t.matmul(self.da, self.db)

    def error(self, c):
        e = ((c.double() - self.ref).abs() / self.ref_abs.clamp_min(1e-300)).max().item()
        finite = bool(self.t.isfinite(c).all().item())
        return e if finite and e == e else float("inf")

    def with_transfers(self, pinned):
        t = self.t
        if pinned:
            da = self.pa.to("cuda", non_blocking=True)
            db = self.pb.to("cuda", non_blocking=True)
            self.pc.copy_(t.matmul(da, db), non_blocking=True)
        else:
            t.matmul(self.ha.to("cuda"), self.hb.to("cuda")).cpu()

    def event(self):
        return self.t.cuda.Event(enable_timing=True)

    def busy_wait(self, microseconds):
        self.t.cuda._sleep(int(microseconds * 2000))  # cycles at about 2 GHz

    def synchronize(self):
        self.t.cuda.synchronize()


class CuPy:
    def __init__(self):
        import cupy
        import cupyx
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("CuPy sees no CUDA device")
        self.cp, self.cupyx = cupy, cupyx
        self.name = "cupy"
        self.spin = cupy.RawKernel(r'''
            extern "C" __global__ void spin(long long cycles) {
              long long start = clock64();
              while (clock64() - start < cycles) {}
            }''', "spin")

    def describe(self):
        cp = self.cp
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        return f"CuPy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, {name}"

    def set_tf32(self, on):
        # CuPy reads CUPY_TF32 once per dtype; set_compute_type switches float32 at run time.
        try:
            from cupy._core import _routines_linalg as linalg
            tf32 = getattr(linalg, "COMPUTE_TYPE_TF32", 7)
            default = getattr(linalg, "COMPUTE_TYPE_DEFAULT", 1)
            linalg.set_compute_type(np.float32, tf32 if on else default)
            return True
        except (ImportError, AttributeError, ValueError) as e:
            print(f"cupy: cannot switch TF32 at run time ({e}); run twice, with CUPY_TF32=0 and =1")
            return False

    def setup(self, a, b):
        cp = self.cp
        self.ha, self.hb = a, b
        self.pa = self.cupyx.empty_pinned(a.shape, np.float32)
        self.pb = self.cupyx.empty_pinned(b.shape, np.float32)
        self.pa[...], self.pb[...] = a, b
        self.hc = np.empty((a.shape[0], b.shape[1]), np.float32)
        self.pc = self.cupyx.empty_pinned(self.hc.shape, np.float32)
        self.da, self.db = cp.asarray(a), cp.asarray(b)
        self.ref = self.da.astype(cp.float64) @ self.db.astype(cp.float64)
        self.ref_abs = cp.abs(self.da).astype(cp.float64) @ cp.abs(self.db).astype(cp.float64)

    def matmul(self):
        return self.cp.matmul(self.da, self.db)

    def error(self, c):
        cp = self.cp
        e = float((cp.abs(c.astype(cp.float64) - self.ref) / cp.maximum(self.ref_abs, 1e-300)).max())
        return e if bool(cp.isfinite(c).all()) and e == e else float("inf")

    def with_transfers(self, pinned):
        cp = self.cp
        da, db = cp.empty_like(self.da), cp.empty_like(self.db)
        da.set(self.pa if pinned else self.ha)
        db.set(self.pb if pinned else self.hb)
        cp.matmul(da, db).get(out=self.pc if pinned else self.hc)

    def event(self):
        return self.cp.cuda.Event()

    def busy_wait(self, microseconds):
        self.spin((1,), (1,), (np.int64(microseconds * 2000),))

    def synchronize(self):
        self.cp.cuda.Device().synchronize()


def elapsed_ms(lib, start, stop):
    return start.elapsed_time(stop) if lib.name == "torch" else lib.cp.cuda.get_elapsed_time(start, stop)


def time_kernel(lib):
    start, stop = lib.event(), lib.event()
    start.record()
    lib.matmul()
    stop.record()
    lib.synchronize()
    repeats = plan_repeats(elapsed_ms(lib, start, stop))
    pairs = [(lib.event(), lib.event()) for _ in range(repeats)]
    lib.busy_wait(200 + 50 * repeats)
    for start, stop in pairs:
        start.record()
        lib.matmul()
        stop.record()
    lib.synchronize()
    return statistics.median(elapsed_ms(lib, s, e) for s, e in pairs), repeats


def time_with_transfers(lib, pinned):
    def once():
        start, stop = lib.event(), lib.event()
        start.record()
        lib.with_transfers(pinned)
        stop.record()
        lib.synchronize()
        return elapsed_ms(lib, start, stop)
    repeats = plan_repeats(once())  # the first run is the warm-up
    return statistics.median(once() for _ in range(repeats))


def load_baseline(path):
    base = {}
    if path:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["method"] == "cublas fp32":
                    base[(int(row["m"]), int(row["k"]), int(row["n"]))] = float(row["ms"])
    return base


libs = []
for name in [s.strip() for s in args.libs.split(",") if s.strip()]:
    try:
        libs.append({"torch": Torch, "cupy": CuPy}[name]())
    except KeyError:
        sys.exit(f"--libs: unknown library '{name}' (torch, cupy)")
    except ImportError as e:
        print(f"skipping {name}: not installed ({e})")
    except Exception as e:  # no device, broken install
        print(f"skipping {name}: {e}")
if not libs:
    print("nothing to measure: neither PyTorch nor CuPy with a CUDA device")
    sys.exit(0)
for lib in libs:
    print(lib.describe())
print(f"median of up to {args.repeats} repeats after {args.warmup} warm-up runs (fewer past {args.budget_ms:.0f} ms, "
      "at least 3); CUDA events;\nerr: max |C - ref| / (|A||B|) over all entries, ref in float64 on the GPU")

baseline = load_baseline(args.baseline_csv)
out = None
if args.csv:
    out = open(args.csv, "w", newline="")
    out.write("label,m,k,n,method,ms,gflops,pct_cublas_fp32,max_rel_err,pageable_ms,pinned_ms,repeats,note\n")
print(f"\n{'M x K x N':<15} {'method':<16} {'ms':>10} {'GFLOP/s':>9} {'%cuBLAS':>8} {'err':>9} {'pageable ms':>11} "
      f"{'pinned ms':>10} {'reps':>5}  note")
for spec in args.sizes:
    m, k, n, label = parse_shape(spec)
    a, b = bench_ops_inputs(m, k, n, args.seed)
    flops = 2.0 * m * n * k
    base_ms = baseline.get((m, k, n))
    base_note = "vs bench_ops cublas fp32" if base_ms else None
    for lib in libs:
        lib.setup(a, b)
        for tf32 in (False, True):
            if not lib.set_tf32(tf32):
                continue
            err = lib.error(lib.matmul())
            for _ in range(args.warmup):
                lib.matmul()
            lib.synchronize()
            ms, repeats = time_kernel(lib)
            pageable = pinned = None
            if not args.no_transfers:
                pageable, pinned = time_with_transfers(lib, False), time_with_transfers(lib, True)
            if base_ms is None:  # the first float32 row of this shape is the baseline
                base_ms, base_note = ms, f"vs {lib.name} fp32"
            method = f"{lib.name} {'tf32' if tf32 else 'fp32'}"
            pct = 100.0 * base_ms / ms
            fmt = lambda v: f"{v:.6f}"[:8] if v else "-"
            note = "; ".join(x for x in (label, base_note) if x)
            print(f"{f'{m}x{k}x{n}':<15} {method:<16} {ms:10.4f} {flops / ms / 1e6:9.0f} {pct:7.1f}% {err:9.2e} "
                  f"{fmt(pageable):>11} {fmt(pinned):>10} {repeats:5d}  {note}", flush=True)
            if out:
                out.write(f'"{label}",{m},{k},{n},"{method}",{ms},{flops / ms / 1e6},{pct},{err},{pageable or 0},'
                          f'{pinned or 0},{repeats},"{base_note}"\n')
        lib.set_tf32(False)
    print()
if out:
    out.close()
