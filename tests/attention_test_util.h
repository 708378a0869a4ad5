#pragma once
// Inputs, the float64 reference and the comparison of the attention tests, CPU and CUDA alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "minidl.h"

namespace minidl::testing {

/// q, k, v as a GPT block makes them (apps/common/gpt.h): one [B, T, 3C] projection split in three,
/// each viewed as [B, T, H, hs] and transposed to [B, H, T, hs] (strides T 3C, hs, 3C, 1).
inline std::vector<Tensor> packed_heads(const Tensor& qkv, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  std::vector<Tensor> heads;
  for (const Tensor& t : qkv.split(C, 2)) heads.push_back(t.view({B, T, H, C / H}).transpose(1, 2));
  return heads;
}

/// An attention forward's output and logsumexp and its three gradients.
struct AttentionResult {
  Tensor out, lse, grad_q, grad_k, grad_v;
};

/// softmax(scale q k^T, causal: query i sees keys j <= i) v and its gradients for grad_out, composed
/// on the CPU in float64, for q [..., L, E], k, v [..., S, E]; with `keep` (1 / 0, [..., L, S]) the
/// probabilities are multiplied by keep / (1 - dropout_p) before v, as dropout does. lse is the
/// undropped softmax's, [..., L].
inline AttentionResult attention_reference(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                           const Tensor& grad_out, double scale, bool causal,
                                           const Tensor& keep = {}, double dropout_p = 0) {
  auto leaf = [](const Tensor& t) { return t.to(Device::cpu()).to(kFloat64).requires_grad_(); };
  Tensor q = leaf(q_in), k = leaf(k_in), v = leaf(v_in);
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(q, transpose(k, -2, -1)) * scale;
  if (causal) {
    Tensor above = gt(triu(ones({L, S}, kFloat64), 1), zeros({L, S}, kFloat64));  // key j > query i
    scores = masked_fill(scores, above, -std::numeric_limits<double>::infinity());
  }
  Tensor weights = softmax(scores, -1);
  if (keep.defined()) weights = weights * (keep.to(Device::cpu()).to(kFloat64) * (1.0 / (1.0 - dropout_p)));
  Tensor out = matmul(weights, v);
  AttentionResult r;
  r.lse = logsumexp(scores, {-1}).detach();
  out.backward(grad_out.to(Device::cpu()).to(kFloat64));
  r.out = out.detach();
  r.grad_q = q.grad(), r.grad_k = k.grad(), r.grad_v = v.grad();
  return r;
}

/// max |a - b| <= tol * max(1, max |b|): errors measured against the reference's scale, so that a
/// gradient that is nearly zero by cancellation does not demand an exact zero of a 16-bit kernel,
/// while any wrong element of a misindexed tile (an error of the order of the values) still fails.
inline ::testing::AssertionResult close_at_scale(const char* what, const Tensor& a, const Tensor& b, double tol) {
  if (a.shape() != b.shape()) {
    std::ostringstream shapes;  // minidl's operator<< for shapes, which gtest's stream does not find
    ::minidl::operator<<(shapes, a.shape()) << " vs ";
    ::minidl::operator<<(shapes, b.shape());
    return ::testing::AssertionFailure() << what << ": shapes differ: " << shapes.str();
  }
  std::vector<double> x = a.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> y = b.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
  double worst = 0, largest = 1;
  size_t worst_i = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    largest = std::max(largest, std::abs(y[i]));
    const double err = std::abs(x[i] - y[i]);
    if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err, worst_i = i;  // NaN counts as the worst
  }
  if (worst <= tol * largest) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max error " << worst << " at element " << worst_i << " (got "
                                       << x[worst_i] << ", expected " << y[worst_i] << "), above " << tol
                                       << " x the largest magnitude " << largest;
}

/// Tolerances of the fused kernels, relative to the largest value: float32 runs in float32
/// throughout; the 16-bit types round the probabilities and dS to 16 bits before the tensor cores
/// (as FlashAttention does).
inline double attention_tolerance(DType dtype) {
  if (dtype == kBFloat16) return 2e-2;
  if (dtype == kFloat16) return 4e-3;
  return 5e-5;
}

}  // namespace minidl::testing
