#!/usr/bin/env python3
# minidl tensors exchanged with PyTorch, CuPy and NumPy through DLPack, both ways, on the CPU and on
# CUDA, without copying. Loads the build's libminidl_dlpack_demo.so (tests/support/dlpack_demo.cpp)
# with ctypes; needs no compiled Python module.
#
#   python3 scripts/dlpack_interop.py [--build build] [--libs torch,cupy,numpy] [--devices cpu,cuda] [--strict]
#
# For each library, device, dtype (float32, float64, bfloat16, float16, int64, int32, int8, uint8, bool;
# bfloat16 with torch only: NumPy and CuPy have none) and layout
# (contiguous, the strided view [:, 1::2], the transpose):
#   minidl -> lib   the library's from_dlpack takes a minidl tensor (through __dlpack__, as a
#                   "dltensor" or "dltensor_versioned" capsule, whichever it asks for; PyTorch also
#                   from a raw "dltensor" capsule): same values, shape and strides, the same data
#                   pointer, and minidl's deleter runs exactly once, when the library lets go (and
#                   minidl's allocator gets the memory back then, not before).
#   lib -> minidl   minidl's from_dlpack takes the library's capsule: same data pointer, strides and
#                   sum; a write by minidl is seen by the library; the library's deleter runs exactly
#                   once, when minidl lets go, not before; an int16 tensor is refused with a clear
#                   error and the capsule stays the library's.
# On CUDA, streams are exchanged as the Python protocol says (__dlpack__(stream=...)).
# Prints a table; exits 1 on any mismatch, 77 when nothing could be checked (no library, or
# --strict unmet: then 1). --strict requires every library in --libs, a CUDA device, and CUDA in
# each library but NumPy.
import argparse
import ctypes
import gc
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--build", default=str(root / "build"), help="minidl build folder holding libminidl_dlpack_demo.so")
p.add_argument("--libs", default="torch,cupy,numpy", help="libraries to exchange with (missing ones are skipped)")
p.add_argument("--devices", default="cpu,cuda", help="cpu, cuda or both (cuda is skipped where unusable)")
p.add_argument("--strict", action="store_true", help="fail when a library in --libs or CUDA is missing")
args = p.parse_args()

# The libraries are imported before the bridge is loaded: PyTorch imported after it aborted in its own
# import ("free(): invalid pointer", PyTorch 2.11 on Ubuntu 24.04), the two bringing their own copies
# of shared libraries (CUDA runtime, cuBLAS, OpenMP) in an order PyTorch does not expect.
for _name in args.libs.split(","):
    try:
        __import__({"torch": "torch.utils.dlpack"}.get(_name, _name))
    except ImportError:
        pass

lib_path = Path(args.build) / "libminidl_dlpack_demo.so"
if not lib_path.exists():
    sys.exit(f"dlpack_interop: {lib_path} not found; build it: cmake --build {args.build} --target minidl_dlpack_demo")
bridge = ctypes.CDLL(str(lib_path))
vp, i64, cstr = ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p
for name, res, argt in [
    ("error", cstr, []), ("counter", i64, [cstr]),
    ("arange", vp, [cstr, cstr, i64, i64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(vp)]),
    ("import", vp, [vp, ctypes.c_int]), ("free", None, [vp]), ("data", vp, [vp]),
    ("layout", ctypes.c_int, [vp, ctypes.POINTER(i64), ctypes.POINTER(i64), ctypes.c_int]),
    ("describe", cstr, [vp]), ("sum", ctypes.c_double, [vp]), ("add_", ctypes.c_int, [vp, ctypes.c_double, i64]),
    ("stream", i64, [cstr]), ("make_stream_wait", ctypes.c_int, [cstr, i64]), ("bytes_in_use", i64, [cstr]),
    ("capsule_name", vp, [ctypes.c_int]), ("capsule_destructor", None, [vp]),
]:
    fn = getattr(bridge, "minidl_dlpack_demo_" + name)
    fn.restype, fn.argtypes = res, argt

api = ctypes.pythonapi
api.PyCapsule_New.restype, api.PyCapsule_New.argtypes = ctypes.py_object, [vp, vp, vp]
api.PyCapsule_IsValid.restype, api.PyCapsule_IsValid.argtypes = ctypes.c_int, [ctypes.py_object, cstr]
api.PyCapsule_GetPointer.restype, api.PyCapsule_GetPointer.argtypes = vp, [ctypes.py_object, cstr]
api.PyCapsule_SetName.restype, api.PyCapsule_SetName.argtypes = ctypes.c_int, [ctypes.py_object, vp]
# Capsule names must outlive their capsules: the bridge's static strings.
CAPSULE = {False: bridge.minidl_dlpack_demo_capsule_name(0), True: bridge.minidl_dlpack_demo_capsule_name(1)}
USED = {False: bridge.minidl_dlpack_demo_capsule_name(2), True: bridge.minidl_dlpack_demo_capsule_name(3)}
DESTRUCTOR = ctypes.cast(bridge.minidl_dlpack_demo_capsule_destructor, vp).value


class BridgeError(Exception):
    pass


def counter(name):
    return bridge.minidl_dlpack_demo_counter(name.encode())


def dlpack_device_of(device):
    return (1, 0) if device == "cpu" else (2, int(device.split(":")[1]))


def make_capsule(device, dtype, rows, cols, view, versioned, consumer_stream):
    """A new minidl tensor as an unused capsule, and its first element's address."""
    data = vp()
    managed = bridge.minidl_dlpack_demo_arange(device.encode(), dtype.encode(), rows, cols, view, int(versioned),
                                               ctypes.byref(data))
    if not managed:
        raise BridgeError(bridge.minidl_dlpack_demo_error().decode())
    if device != "cpu" and consumer_stream != -1:  # dlpack: None means the legacy default stream
        if bridge.minidl_dlpack_demo_make_stream_wait(device.encode(), consumer_stream or 1) != 0:
            raise BridgeError(bridge.minidl_dlpack_demo_error().decode())
    return api.PyCapsule_New(managed, CAPSULE[versioned], DESTRUCTOR), data.value or 0


class MinidlTensor:
    """What a consumer's from_dlpack takes: a minidl tensor behind __dlpack__ / __dlpack_device__."""

    def __init__(self, device, dtype, rows, cols, view):
        self.device, self.spec = device, (dtype, rows, cols, view)
        self.data_ptr, self.capsule_kind = None, None

    def __dlpack_device__(self):
        return dlpack_device_of(self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("minidl_dlpack_demo lends memory; it makes no copies")
        if dl_device is not None and tuple(dl_device) != dlpack_device_of(self.device):
            raise BufferError(f"the tensor is on {self.device}, not on DLPack device {dl_device}")
        versioned = max_version is not None and max_version[0] >= 1
        self.capsule_kind = "dltensor_versioned" if versioned else "dltensor"
        capsule, self.data_ptr = make_capsule(self.device, *self.spec, versioned, stream)
        return capsule


class Imported:
    """A minidl tensor made by from_dlpack from another library's capsule."""

    def __init__(self, capsule):
        for versioned, name in ((True, b"dltensor_versioned"), (False, b"dltensor")):
            if api.PyCapsule_IsValid(capsule, name):
                h = bridge.minidl_dlpack_demo_import(api.PyCapsule_GetPointer(capsule, name), int(versioned))
                if not h:
                    raise BridgeError(bridge.minidl_dlpack_demo_error().decode())
                api.PyCapsule_SetName(capsule, USED[versioned])  # minidl owns it now
                self.h, self.kind = h, name.decode()
                return
        raise BridgeError("not an unused DLPack capsule")

    def data(self):
        return bridge.minidl_dlpack_demo_data(self.h) or 0

    def layout(self):
        shape, strides = (i64 * 8)(), (i64 * 8)()
        n = bridge.minidl_dlpack_demo_layout(self.h, shape, strides, 8)
        return tuple(shape[:n]), tuple(strides[:n])

    def describe(self):
        return bridge.minidl_dlpack_demo_describe(self.h).decode()

    def sum(self):
        return bridge.minidl_dlpack_demo_sum(self.h)

    def add_(self, value, consumer_stream):
        if bridge.minidl_dlpack_demo_add_(self.h, value, consumer_stream) != 0:
            raise BridgeError(bridge.minidl_dlpack_demo_error().decode())

    def free(self):
        bridge.minidl_dlpack_demo_free(self.h)
        self.h = None


# ---- what each layout holds, in plain Python ----
ROWS, COLS = 4, 6
LAYOUTS = {0: "contiguous", 1: "[:, 1::2]", 2: "transpose"}
DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "int8", "uint8", "bool"]


def expected(dtype, view, rows=ROWS, cols=COLS):
    """(shape, strides in elements, values row-major) of arange(rows*cols).view(rows, cols) under `view`."""
    n = rows * cols
    conv = (lambda v: v > (n - 1) / 2) if dtype == "bool" else (float if dtype.startswith("float") else int)
    base = [[conv(i * cols + j) for j in range(cols)] for i in range(rows)]
    if view == 1:
        picked = list(range(1, cols, 2))
        return (rows, len(picked)), (cols, 2), [base[i][j] for i in range(rows) for j in picked]
    if view == 2:
        return (cols, rows), (1, cols), [base[j][i] for i in range(cols) for j in range(rows)]
    return (rows, cols), (cols, 1), [v for row in base for v in row]


# ---- the libraries ----
class Torch:
    name = "torch"

    def __init__(self):
        import torch
        self.m = torch

    def devices(self):
        return ["cpu"] + (["cuda:0"] if self.m.cuda.is_available() else [])

    def make(self, dtype, view, device, rows=ROWS, cols=COLS):
        t = self.m.arange(rows * cols, dtype=self.m.float64, device=device).reshape(rows, cols)
        t = t > (rows * cols - 1) / 2 if dtype == "bool" else t.to(getattr(self.m, dtype))
        return t[:, 1::2] if view == 1 else t.t() if view == 2 else t

    def stream(self, device):
        if device == "cpu":
            return None
        s = self.m.cuda.current_stream(device).cuda_stream
        return s if s else 1

    def from_dlpack(self, obj):
        return self.m.from_dlpack(obj)

    def values(self, x):
        return x.flatten().tolist()

    def data_ptr(self, x):
        return x.data_ptr()

    def strides(self, x):
        return tuple(x.stride())

    def memory(self, device):
        return self.m.cuda.memory_allocated(device) if device != "cpu" else None

    def int16(self, device):
        return self.m.arange(4, dtype=self.m.int16, device=device)


class CuPy:
    name = "cupy"

    def __init__(self):
        import cupy
        self.m = cupy

    def devices(self):
        try:
            return ["cuda:0"] if self.m.cuda.runtime.getDeviceCount() > 0 else []
        except self.m.cuda.runtime.CUDARuntimeError:
            return []

    def make(self, dtype, view, device, rows=ROWS, cols=COLS):
        t = self.m.arange(rows * cols, dtype=self.m.float64).reshape(rows, cols)
        t = t > (rows * cols - 1) / 2 if dtype == "bool" else t.astype(dtype)
        return t[:, 1::2] if view == 1 else t.T if view == 2 else t

    def stream(self, device):
        s = self.m.cuda.get_current_stream().ptr
        return s if s else 1

    def from_dlpack(self, obj):
        return self.m.from_dlpack(obj)

    def values(self, x):
        return self.m.asnumpy(x).ravel().tolist()

    def data_ptr(self, x):
        return x.data.ptr

    def strides(self, x):
        return tuple(s // x.itemsize for s in x.strides)

    def memory(self, device):
        return self.m.get_default_memory_pool().used_bytes()

    def int16(self, device):
        return self.m.arange(4, dtype=self.m.int16)


class NumPy(CuPy):
    name = "numpy"

    def __init__(self):
        import numpy
        self.m = numpy
        if not hasattr(numpy, "from_dlpack"):
            raise ImportError(f"numpy {numpy.__version__} has no from_dlpack (1.22 added it)")

    def devices(self):
        return ["cpu"]

    def stream(self, device):
        return None

    def values(self, x):
        return x.ravel().tolist()

    def data_ptr(self, x):
        return x.ctypes.data

    def memory(self, device):
        return None


# ---- the checks ----
rows_out, failures = [], []


def record(lib, device, direction, dtype, layout, capsule, problems, note=""):
    status = "FAIL" if problems else ("skip" if note.startswith("skipped") else "ok")
    rows_out.append((lib, device, direction, dtype, layout, capsule, status, "; ".join(problems) or note))
    if problems:
        failures.append(f"{lib} {device} {direction} {dtype} {layout}: " + "; ".join(problems))


def check(problems, ok, what):
    if not ok:
        problems.append(what)


def minidl_to_lib(L, device, dtype, view, raw_capsule=False):
    shape, strides, values = expected(dtype, view)
    problems = []
    made, deleted = counter("exports_made"), counter("exports_deleted")
    held = bridge.minidl_dlpack_demo_bytes_in_use(device.encode())
    src = MinidlTensor(device, dtype, ROWS, COLS, view)
    if raw_capsule:  # torch.utils.dlpack.from_dlpack(capsule): no stream exchange, so order the current one
        capsule, src.data_ptr = make_capsule(device, dtype, ROWS, COLS, view, False, L.stream(device) or -1)
        src.capsule_kind = "raw dltensor"
        import torch.utils.dlpack
        x = torch.utils.dlpack.from_dlpack(capsule)
        del capsule
    else:
        x = L.from_dlpack(src)
    check(problems, counter("exports_made") == made + 1, "no export was made")
    check(problems, tuple(x.shape) == shape, f"shape {tuple(x.shape)} != {shape}")
    check(problems, L.strides(x) == strides, f"strides {L.strides(x)} != {strides}")
    check(problems, L.data_ptr(x) == src.data_ptr, f"data pointer {L.data_ptr(x):#x} != minidl's {src.data_ptr:#x}")
    got = L.values(x)
    check(problems, got == values, f"values {got[:6]}... != {values[:6]}...")
    gc.collect()
    check(problems, counter("exports_deleted") == deleted, "minidl's deleter ran while the consumer held the tensor")
    del x
    gc.collect()
    n = counter("exports_deleted") - deleted
    check(problems, n == 1, f"minidl's deleter ran {n} times after the consumer let go (expected 1)")
    check(problems, bridge.minidl_dlpack_demo_bytes_in_use(device.encode()) == held,
          "minidl's allocator did not get the memory back after the deleter")
    record(L.name, device, "minidl -> " + L.name, dtype, LAYOUTS[view], src.capsule_kind, problems)


def lib_to_minidl(L, device, dtype, view, versioned):
    shape, strides, values = expected(dtype, view)
    problems = []
    memory_before = L.memory(device)
    x = L.make(dtype, view, device)
    stream = bridge.minidl_dlpack_demo_stream(device.encode()) if device != "cpu" else None
    try:
        capsule = x.__dlpack__(stream=stream, max_version=(1, 0)) if versioned else x.__dlpack__(stream=stream)
    except TypeError:
        record(L.name, device, L.name + " -> minidl", dtype, LAYOUTS[view], "dltensor_versioned", [],
               f"skipped: {L.name}'s __dlpack__ has no max_version")
        return
    released = counter("imports_released")
    t = Imported(capsule)
    want = f"{dtype} {device}"
    check(problems, t.describe() == want, f"minidl made {t.describe()}, expected {want}")
    check(problems, t.data() == L.data_ptr(x), f"data pointer {t.data():#x} != {L.name}'s {L.data_ptr(x):#x}")
    check(problems, t.layout() == (shape, strides), f"layout {t.layout()} != {(shape, strides)}")
    total = float(sum(values))
    check(problems, t.sum() == total, f"minidl's sum {t.sum()} != {total}")
    wrote = dtype != "bool" and view == 0  # minidl's in-place ops write contiguous tensors
    if wrote:  # a write through minidl is seen by the owner: one buffer
        t.add_(1.0, L.stream(device) or -1)
        got = L.values(x)
        check(problems, got == [v + 1 for v in values], f"after minidl's add_(1): {got[:6]}... != {values[:6]} + 1")
    del x, capsule
    gc.collect()
    check(problems, counter("imports_released") == released, f"{L.name}'s deleter ran while minidl held the tensor")
    check(problems, t.sum() == total + (len(values) if wrote else 0), "the memory changed once the owner's handles "
          "were gone")
    t.free()
    gc.collect()
    n = counter("imports_released") - released
    check(problems, n == 1, f"{L.name}'s deleter ran {n} times after minidl let go (expected 1)")
    if memory_before is not None:
        check(problems, L.memory(device) == memory_before, f"{L.name}'s allocator did not get the memory back")
    record(L.name, device, L.name + " -> minidl", dtype, LAYOUTS[view], t.kind, problems)


def refused(L, device):
    problems = []
    x = L.int16(device)
    stream = bridge.minidl_dlpack_demo_stream(device.encode()) if device != "cpu" else None
    capsule = x.__dlpack__(stream=stream)
    released = counter("imports_released")
    try:
        Imported(capsule)
        problems.append("an int16 tensor was accepted")
    except BridgeError as e:
        msg = str(e)
        check(problems, "expected float32, float64, bfloat16, float16, int64, int32, int8, uint8 or bool" in msg and "int16" in msg, f"unclear error: {msg}")
    check(problems, api.PyCapsule_IsValid(capsule, b"dltensor") == 1, "the refused capsule was consumed")
    del capsule, x
    gc.collect()
    check(problems, counter("imports_released") == released, "minidl called the deleter of a tensor it refused")
    record(L.name, device, L.name + " -> minidl", "int16", "contiguous", "dltensor, int16", problems,
           "refused with a clear error, capsule left to its owner")


def unconsumed_capsule(device):
    problems = []
    deleted = counter("exports_deleted")
    capsule, _ = make_capsule(device, "float32", ROWS, COLS, 0, False, -1)
    del capsule
    gc.collect()
    check(problems, counter("exports_deleted") == deleted + 1, "an unused capsule did not run minidl's deleter")
    record("-", device, "capsule dropped", "float32", "contiguous", "dltensor", problems)


def attempt(check_fn, L, device, direction, dtype, view, *more, **kw):
    """Runs one check; an exception is a failure, but for the bool that NumPy before 1.25 cannot exchange."""
    try:
        check_fn(L, device, *([] if check_fn is refused else [dtype, view]), *more, **kw)
    except Exception as e:
        skipped = isinstance(L, NumPy) and dtype == "bool" and "dtype" in str(e).lower()
        record(L.name, device, direction, dtype, LAYOUTS[view], "-", [] if skipped else [f"{type(e).__name__}: {e}"],
               f"skipped: {L.name} {L.m.__version__} refuses it ({e})" if skipped else "")


def main():
    libs = []
    for name in [n.strip() for n in args.libs.split(",") if n.strip()]:
        cls = {"torch": Torch, "cupy": CuPy, "numpy": NumPy}.get(name)
        if cls is None:
            sys.exit(f"dlpack_interop: --libs: expected torch, cupy or numpy, got '{name}'")
        try:
            libs.append(cls())
        except Exception as e:  # ImportError, or a broken install
            note = f"{name}: not usable ({e})"
            failures.append(note) if args.strict else print(note + "; skipped")
    want_cuda = "cuda" in args.devices
    minidl_cuda = bool(bridge.minidl_dlpack_demo_stream(b"cuda:0"))
    if want_cuda and not minidl_cuda:
        why = bridge.minidl_dlpack_demo_error().decode()
        note = f"cuda: minidl cannot use cuda:0 ({why})"
        failures.append(note) if args.strict else print(note + "; skipped")
    for device in ["cpu"] + (["cuda:0"] if want_cuda and minidl_cuda else []):
        if device == "cpu" and "cpu" not in args.devices:
            continue
        unconsumed_capsule(device)
        for L in libs:
            if device not in L.devices():
                if device != "cpu" and args.strict and not isinstance(L, NumPy):  # NumPy has no GPU
                    failures.append(f"{L.name}: no CUDA device")
                continue
            for dtype in DTYPES:
                if dtype == "bfloat16" and not isinstance(L, Torch):  # NumPy and CuPy have no bfloat16
                    continue
                for view in LAYOUTS:
                    attempt(minidl_to_lib, L, device, "minidl -> " + L.name, dtype, view)
                    for versioned in (False, True):
                        attempt(lib_to_minidl, L, device, L.name + " -> minidl", dtype, view, versioned)
            if isinstance(L, Torch):
                attempt(minidl_to_lib, L, device, "minidl -> torch", "float32", 1, raw_capsule=True)
            attempt(refused, L, device, L.name + " -> minidl", "int16", 0)

    # One line per library, device, direction and capsule kind: how many dtype x layout cases passed.
    groups = {}
    for lib, device, direction, dtype, layout, capsule, status, detail in rows_out:
        g = groups.setdefault((lib, device, direction, capsule if status != "skip" else "-"), [0, 0, 0, set()])
        g[{"ok": 0, "skip": 1, "FAIL": 2}[status]] += 1
        if status != "ok" or detail:
            g[3].add(f"{dtype} {layout}: {detail}" if status == "FAIL" else detail)
    table = [HEADER] + [(*k, str(g[0]), str(g[1]), str(g[2]), " | ".join(sorted(g[3]))[:160])
                        for k, g in groups.items()]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    print("ok: same values, shape and strides, same data pointer, each deleter once and only after the last user")
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    checked = sum(1 for r in rows_out if r[6] != "skip")
    print(f"dlpack_interop: {checked} exchanges checked, {len(failures)} problem(s)")
    for f in failures:
        print("  FAIL " + f)
    if failures:
        return 1
    return 0 if any(r[0] != "-" and r[6] == "ok" for r in rows_out) else 77


HEADER = ("library", "device", "direction", "capsule", "ok", "skipped", "failed", "notes")

if __name__ == "__main__":
    sys.exit(main())
