#include <random>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/random.h"

namespace minidl {

void CpuKernels::uniform(Tensor& dst, double low, double high) {
  cpu::fill_random(dst, "uniform", [&] { return std::uniform_real_distribution<double>(low, high); });
}

void CpuKernels::normal(Tensor& dst, double mean, double stddev) {
  cpu::fill_random(dst, "normal", [&] { return std::normal_distribution<double>(mean, stddev); });
}

}  // namespace minidl
