#include <random>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/random.h"

namespace minidl {

void CpuKernels::dropout_mask(Tensor& dst, double keep_prob) {
  const double scale = 1.0 / keep_prob;
  cpu::fill_random(dst, "dropout", [&] {
    return [keep = std::bernoulli_distribution(keep_prob), scale](std::mt19937_64& engine) mutable {
      return keep(engine) ? scale : 0.0;
    };
  });
}

}  // namespace minidl
