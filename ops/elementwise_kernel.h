#pragma once
// Elementwise CUDA kernels written at run time, as CuPy's ElementwiseKernel: a C++ body over named
// per-element values, compiled by NVRTC for the GPU it runs on the first time it is used, and kept
// compiled in memory and on disk. Includes no CUDA header; in a build without CUDA every call
// explains that run-time kernels need the CUDA build.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minidl::cuda {

/// An elementwise kernel compiled at run time. The parameter lists name C types (float, double,
/// int64_t or long long, int32_t, int8_t, uint8_t, bool) and names; the body assigns the outputs
/// from the inputs, one element at a time, and may also use `i` (the element's row-major index in
/// the output) and `n` (the number of elements). Inputs are CUDA tensors of one device whose dtypes
/// match the declared types exactly (float32, float64, int64, int32, int8, uint8, bool); they
/// broadcast together as in NumPy (a 0-d tensor is a scalar), may be strided views, and the outputs
/// are new contiguous tensors of the broadcast shape.
///   cuda::ElementwiseKernel fma1("float x, float y", "float z", "z = x * y + 1", "fma1");
///   Tensor z = fma1({x, y});
/// Given backward statements, one per floating input, the kernel is differentiable: `g<input>` is
/// assigned from the inputs, the outputs and `g<output>` (the gradient of each floating output),
/// and the gradient of a broadcast input is summed back to its shape. Without them, an input that
/// requires grad is an error (outside NoGradGuard), never a silently missing gradient.
///   cuda::ElementwiseKernel mul("double x, double y", "double z", "z = x * y", "mul",
///                               {"gx = gz * y", "gy = gz * x"});
/// Construction parses, checks and generates the source, on any machine; the first call on a
/// device compiles it with NVRTC (about a tenth of a second), or loads it from the disk cache
/// (kernel_cache_dir()). A compile error is an Error carrying NVRTC's log, whose "name(N)" is line
/// N of the body ("name.backward(N)": of the backward statements).
class ElementwiseKernel {
 public:
  ElementwiseKernel(const std::string& in_params, const std::string& out_params, const std::string& body,
                    const std::string& name = "kernel", const std::vector<std::string>& backward = {});

  /// Runs a kernel of one output and returns it.   Tensor z = fma1({x, y});
  Tensor operator()(const std::vector<Tensor>& inputs) const;
  /// Runs the kernel and returns every output, in declaration order.
  ///   cuda::ElementwiseKernel minmax("float a, float b", "float lo, float hi", "lo = fminf(a, b); hi = fmaxf(a, b)");
  ///   std::vector<Tensor> outs = minmax.call({a, b});   // outs[0]: lo, outs[1]: hi
  std::vector<Tensor> call(const std::vector<Tensor>& inputs) const;
  /// Compiles (or loads) the kernel, and its backward if it has one, for `device` now rather than at
  /// the first call: compile errors surface here.
  void compile(Device device = Device::cuda()) const;

  const std::string& name() const;
  int num_inputs() const;
  int num_outputs() const;
  bool differentiable() const;
  /// The CUDA C++ source NVRTC compiles for the forward kernel.
  std::string source() const;
  /// The same for the backward kernel computing every floating input's gradient ("" without one).
  std::string backward_source() const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

/// What the run-time kernel caches did in this process.
struct KernelCacheStats {
  int64_t compilations = 0;   // sources NVRTC compiled
  int64_t disk_loads = 0;     // compiled kernels read from the disk cache instead
  int64_t disk_rejected = 0;  // cache files ignored as damaged or foreign (then rewritten)
  int64_t disk_writes = 0;    // compiled kernels written to the disk cache
};
KernelCacheStats kernel_cache_stats();

/// Forgets every compiled and loaded run-time kernel of this process (the disk cache stays), so the
/// next call of any kernel compiles it again or reads it from the disk cache. Modules already loaded
/// stay loaded, since work queued on the GPU may still use them.
void clear_kernel_memory_cache();

/// The folder compiled run-time kernels are kept in: $MINIDL_KERNEL_CACHE, else
/// $XDG_CACHE_HOME/minidl/kernels, else ~/.cache/minidl/kernels; empty in a build without CUDA.
/// Read at every compilation, so it may change while the process runs. Its files may be deleted at
/// any time; a damaged one is ignored and rewritten.
std::string kernel_cache_dir();

}  // namespace minidl::cuda
