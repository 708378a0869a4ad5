// Optimizer updates as single fused passes over each parameter: one read of param, grad and state,
// one write, instead of the five or six passes that composing elementwise ops would cost.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

void CpuKernels::sgd_step(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& c) {
  if (c.found_inf && *c.found_inf->data<float>() != 0) return;  // GradScaler saw an inf or NaN: skip
  dispatch_floating(param.dtype(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* buf = momentum_buf ? momentum_buf->data<T>() : nullptr;
    const int64_t n = param.numel();
    const T lr = T(c.lr), wd = T(c.weight_decay), mom = T(c.momentum), damp = T(1 - c.dampening);
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      T d = g[i] + wd * p[i];
      if (buf) {
        buf[i] = c.first_step ? d : mom * buf[i] + damp * d;
        d = c.nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  });
}

void CpuKernels::adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                           const AdamConfig& c) {
  dispatch_floating(param.dtype(), "adam_step", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    T* v_max = c.amsgrad ? c.max_exp_avg_sq->data<T>() : nullptr;
    const int64_t n = param.numel();
    const double bias1 = 1 - std::pow(c.beta1, static_cast<double>(c.step));
    const double bias2 = 1 - std::pow(c.beta2, static_cast<double>(c.step));
    const T step_size = T(c.lr / bias1), bias2_sqrt = T(std::sqrt(bias2));
    const T b1 = T(c.beta1), b2 = T(c.beta2), eps = T(c.eps), wd = T(c.weight_decay), lr = T(c.lr);
    const bool decoupled = c.decoupled_weight_decay, maximize = c.maximize;
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      T gi = maximize ? -g[i] : g[i];
      if (decoupled) p[i] *= T(1) - lr * wd;
      else gi += wd * p[i];
      m[i] = b1 * m[i] + (T(1) - b1) * gi;
      v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
      T denom_v = v[i];
      if (v_max) {
        v_max[i] = v_max[i] < v[i] ? v[i] : v_max[i];
        denom_v = v_max[i];
      }
      p[i] -= step_size * m[i] / (std::sqrt(denom_v) / bias2_sqrt + eps);
    }
  });
}

}  // namespace minidl
