#!/usr/bin/env python3
# Compares the kernels of two sets of CUDA files by their PTX: each side's .cu files compiled with
# the build's flags, every .entry matched by its demangled name (namespaces dropped), the labels
# and mangled names renumbered. Prints how many kernels each side has, which differ, and the first
# lines where the first differing one does. Behind docs/benchmarks.md's thirty-ninth section:
#   git show 6349fa3:ops/cuda/normalization.cu > /tmp/old_normalization.cu
#   python3 benchmarks/ptx_compare/ptx_compare.py --old /tmp/old_normalization.cu \
#       --new ops/cuda/normalization.cu ops/cuda/dropout_add_layer_norm.cu
import argparse, difflib, os, re, subprocess, tempfile

FLAGS = ["-DEIGEN_DONT_PARALLELIZE", "-DMINIDL_WITH_CUDA", "-DMINIDL_WITH_CUDNN", "-I.", "-isystem=/usr/include/eigen3",
         "-O3", "-DNDEBUG", "-arch=sm_90", "--expt-relaxed-constexpr", "-std=c++20", "-ptx"]


def kernels(files, nvcc):
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, f in enumerate(files):
            ptx = os.path.join(tmp, f"{i}.ptx")
            subprocess.run([nvcc, *FLAGS, f, "-o", ptx], check=True)
            text = open(ptx).read()
            for m in re.finditer(r"^(?:\.\w+ )*\.entry (\S+)\(.*?\n\}\n", text, re.S | re.M):
                name = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
                for prefix in ("(anonymous namespace)::", "minidl::cuda::norm::", "minidl::"):
                    name = name.replace(prefix, "")
                body = m.group(0).split(".entry", 1)[1]
                body = re.sub(r"_Z\w+", "M", body)
                body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
                out[name] = re.sub(r"__local_depot\d+", "DEPOT", body)
    return out


p = argparse.ArgumentParser(description="Compares two sets of CUDA files kernel by kernel by their PTX")
p.add_argument("--old", nargs="+", required=True)
p.add_argument("--new", nargs="+", required=True)
p.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
a = p.parse_args()
old, new = kernels(a.old, a.nvcc), kernels(a.new, a.nvcc)
differ = [k for k in old if k in new and old[k] != new[k]]
print(f"kernels: old {len(old)}, new {len(new)}; only old {len([k for k in old if k not in new])}, "
      f"only new {len([k for k in new if k not in old])}; same PTX {len(old) - len(differ)}, different {len(differ)}")
for k in differ:
    print("differs:", k)
if differ:
    print("\n".join(list(difflib.unified_diff(old[differ[0]].split("\n"), new[differ[0]].split("\n"), lineterm="", n=1))[:20]))
