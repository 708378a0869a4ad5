#pragma once
// torch::special's names (torch.special in Python): each is the op of that name elsewhere in ops/,
// so that code written against libtorch's special namespace compiles as it is. i0e, i1 and i1e are
// declared in ops/math.h, which holds their kernels.
#include <cmath>
#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/elementwise.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/softmax.h"

namespace minidl::special {

inline Tensor erf(const Tensor& x) { return minidl::erf(x); }
inline Tensor erfc(const Tensor& x) { return minidl::erfc(x); }
inline Tensor erfinv(const Tensor& x) { return minidl::erfinv(x); }
inline Tensor expm1(const Tensor& x) { return minidl::expm1(x); }
inline Tensor exp2(const Tensor& x) { return minidl::exp2(x); }
inline Tensor log1p(const Tensor& x) { return minidl::log1p(x); }
inline Tensor gammaln(const Tensor& x) { return minidl::lgamma(x); }
inline Tensor digamma(const Tensor& x) { return minidl::digamma(x); }
inline Tensor psi(const Tensor& x) { return minidl::digamma(x); }
inline Tensor polygamma(int64_t n, const Tensor& x) { return minidl::polygamma(n, x); }
inline Tensor multigammaln(const Tensor& x, int64_t p) { return minidl::mvlgamma(x, p); }
inline Tensor i0(const Tensor& x) { return minidl::i0(x); }
/// The standard normal's CDF, 1/2 erfc(-x / sqrt(2)) (its lower tail keeps its relative precision).
inline Tensor ndtr(const Tensor& x) { return minidl::erfc(x * -M_SQRT1_2) * 0.5; }
inline Tensor ndtri(const Tensor& x) { return minidl::ndtri(x); }
inline Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt) { return minidl::logit(x, eps); }
inline Tensor expit(const Tensor& x) { return minidl::sigmoid(x); }
inline Tensor xlogy(const Tensor& x, const Tensor& y) { return minidl::xlogy(x, y); }
inline Tensor xlog1py(const Tensor& x, const Tensor& y) { return minidl::xlog1py(x, y); }
inline Tensor entr(const Tensor& x) { return minidl::entr(x); }
inline Tensor sinc(const Tensor& x) { return minidl::sinc(x); }
inline Tensor round(const Tensor& x) { return minidl::round(x); }
inline Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false) {
  return minidl::logsumexp(x, dims, keepdim);
}
inline Tensor softmax(const Tensor& x, int64_t dim) { return minidl::softmax(x, dim); }
inline Tensor log_softmax(const Tensor& x, int64_t dim) { return minidl::log_softmax(x, dim); }

}  // namespace minidl::special
