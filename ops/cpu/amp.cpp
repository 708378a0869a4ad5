// GradScaler's passes on the CPU: the inf/NaN check fused with the unscale, and the scale update
// (PyTorch's _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_).
#include <cmath>

#include "core/half.h"
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

void CpuKernels::amp_non_finite_check_and_unscale(std::vector<Tensor>& grads, Tensor& found_inf,
                                                  const Tensor& inv_scale) {
  const float inv = *inv_scale.data<float>();
  bool any_nonfinite = false;
  for (Tensor& grad : grads) {
    // A strided gradient is unscaled through a contiguous copy, written back.
    Tensor g = grad.is_contiguous() ? grad : grad.contiguous();
    dispatch_floating_and_half(g.dtype(), "amp_non_finite_check_and_unscale", [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      T* p = g.data<T>();
      const int64_t n = g.numel();
      bool bad = false;
#pragma omp parallel for reduction(|| : bad) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        const C v = static_cast<C>(p[i]);
        bad = bad || !std::isfinite(v);
        p[i] = static_cast<T>(v * static_cast<C>(inv));
      }
      any_nonfinite = any_nonfinite || bad;
    });
    if (!g.is_same(grad)) grad.copy_(g);
  }
  if (any_nonfinite) *found_inf.data<float>() = 1.0f;
}

void CpuKernels::amp_update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                                  double backoff_factor, int64_t growth_interval) {
  float* s = scale.data<float>();
  int32_t* tracker = growth_tracker.data<int32_t>();
  if (*found_inf.data<float>() != 0) {
    *s = static_cast<float>(*s * backoff_factor);
    *tracker = 0;
    return;
  }
  const int32_t successful = *tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(*s * growth_factor);
    // As PyTorch: the scale grows only while it stays finite.
    if (std::isfinite(grown)) *s = grown;
    *tracker = 0;
  } else {
    *tracker = successful;
  }
}

}  // namespace minidl
