#pragma once
// `bench_ops crossover`: when does the GPU start to win? Elementwise ops, a reduction and softmax on
// the CPU and on the GPU, by array size, with the data already on the device and with the transfers
// a NumPy user pays (host to device, the op, the result back). Written with minidl's public API
// only, so it builds (CPU column only) without CUDA.
//
// Timing: each measurement is the median of wall-clock repeats after one warm-up call; a GPU call is
// timed up to its synchronize, so its time is what a caller waits for an answer, launch latency
// included, which is exactly what decides the small sizes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "minidl.h"
#include "ops/elementwise_kernel.h"

namespace crossover {

using namespace minidl;

/// The smallest size from which the GPU is faster at that size and every larger one measured; none
/// when it is not faster at the largest. `sizes` ascending; times in any unit, NaN where not measured.
inline std::optional<int64_t> crossover_size(const std::vector<int64_t>& sizes, const std::vector<double>& cpu,
                                             const std::vector<double>& gpu) {
  std::optional<int64_t> from;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (!(gpu[i] < cpu[i])) break;
    from = sizes[i];
  }
  return from;
}

const std::vector<std::string> kOps = {"add", "axpb", "sum", "softmax"};

struct Row {
  std::string op;
  int64_t size = 0;
  double cpu_ms = NAN, gpu_ms = NAN, gpu_transfer_ms = NAN, max_rel_error = NAN;
};

template <class F>
double median_ms(F&& call, double budget_ms, int max_repeats) {
  call();  // warm-up: allocations, kernel compilation, caches
  std::vector<double> ms;
  double spent = 0;
  while (static_cast<int>(ms.size()) < max_repeats && (ms.size() < 3 || spent < budget_ms)) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    spent += ms.back();
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// One op on inputs of `size` elements (softmax: rows of 1000). On the CPU, a*x+b is minidl's two
/// elementwise ops (as NumPy runs it); on the GPU one run-time kernel (as CuPy's ElementwiseKernel).
class Op {
 public:
  Op(const std::string& name, int64_t size) : name_(name) {
    MINIDL_CHECK(name == "add" || name == "axpb" || name == "sum" || name == "softmax", "crossover: unknown op '",
                 name, "' (add, axpb, sum or softmax)");
    MINIDL_CHECK(size > 0 && (name != "softmax" || size % 1000 == 0), "crossover: softmax needs a multiple of 1000 "
                 "elements (rows of 1000), got ", size);
    x_ = randn({size});
    if (name == "add") y_ = randn({size});
    if (name == "softmax") x_ = x_.view({size / 1000, 1000});
  }

  Tensor run(const Tensor& x, const Tensor& y) const {
    if (name_ == "add") return x + y;
    if (name_ == "sum") return x.sum();
    if (name_ == "softmax") return softmax(x, 1);
    if (x.device().is_cuda()) return axpb_kernel()({x, scalar(2.0f, x.device()), scalar(0.5f, x.device())});
    return x * 2.0 + 0.5;
  }
  const Tensor& x() const { return x_; }
  const Tensor& y() const { return y_; }

 private:
  static Tensor scalar(float v, Device d) { return Tensor::from_vector<float>({v}).to(d); }
  static const cuda::ElementwiseKernel& axpb_kernel() {
    static const cuda::ElementwiseKernel k("float x, float a, float b", "float z", "z = a * x + b", "axpb");
    return k;
  }
  std::string name_;
  Tensor x_, y_;
};

/// Measures one op at one size: the CPU always, the GPU where `gpu` (and checks it against the CPU).
inline Row measure(const std::string& op_name, int64_t size, bool gpu, double budget_ms, int max_repeats) {
  Op op(op_name, size);
  Row row{op_name, size};
  Tensor cpu_out;
  row.cpu_ms = median_ms([&] { cpu_out = op.run(op.x(), op.y()); }, budget_ms, max_repeats);
  if (!gpu) return row;
  const Device d = Device::cuda();
  Tensor x = op.x().to(d), y = op.y().defined() ? op.y().to(d) : Tensor(), out;
  row.gpu_ms = median_ms(
      [&] {
        out = op.run(x, y);
        cuda::synchronize();
      },
      budget_ms, max_repeats);
  row.gpu_transfer_ms = median_ms(
      [&] {
        Tensor xd = op.x().to(d), yd = op.y().defined() ? op.y().to(d) : Tensor();
        out = op.run(xd, yd).to(Device::cpu());
      },
      budget_ms, max_repeats);
  const std::vector<float> g = out.to(Device::cpu()).contiguous().to_vector<float>();
  const std::vector<float> c = cpu_out.contiguous().to_vector<float>();
  double err = 0;
  for (size_t i = 0; i < c.size(); ++i)
    err = std::max(err, std::fabs(double(g[i]) - c[i]) / std::max(1e-6, std::fabs(double(c[i]))));
  row.max_rel_error = err;
  MINIDL_CHECK(err < (op_name == "sum" ? 1e-3 : 1e-5), "crossover: ", op_name, " at ", size,
               " elements: the GPU's result differs from the CPU's by ", err, " (relative)");
  return row;
}

}  // namespace crossover
