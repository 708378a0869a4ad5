#pragma once
// Activations beyond relu / gelu / silu / leaky_relu (ops/elementwise.h) and log_sigmoid
// (ops/loss.h), with libtorch's names and defaults. Each takes a floating tensor.
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (for stability).
///   softplus(x), softplus(x, 2.0, 10.0)
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// x where x > 0, else alpha * (exp(x) - 1).   elu(x), elu(x, 0.5)
Tensor elu(const Tensor& x, double alpha = 1.0);
/// scale * elu(x, alpha) with alpha = 1.6732632423543772 and scale = 1.0507009873554805.
Tensor selu(const Tensor& x);
/// x * tanh(softplus(x)).
Tensor mish(const Tensor& x);
/// clamp(x, min_val, max_val); the gradient is 1 strictly inside (min_val, max_val) and 0 elsewhere,
/// as PyTorch's. min_val <= max_val.   hardtanh(x), hardtanh(x, 0.0, 6.0)
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
/// hardtanh(x, 0, 6).
Tensor relu6(const Tensor& x);
/// relu6(x + 3) / 6.
Tensor hardsigmoid(const Tensor& x);
/// x * relu6(x + 3) / 6.
Tensor hardswish(const Tensor& x);
/// x / (1 + |x|).
Tensor softsign(const Tensor& x);
/// x - tanh(x).
Tensor tanhshrink(const Tensor& x);
/// x where |x| > lambd, else 0.   hardshrink(x), hardshrink(x, 0.1)
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
/// x - lambd where x > lambd, x + lambd where x < -lambd, else 0 (lambd >= 0).
Tensor softshrink(const Tensor& x, double lambd = 0.5);
/// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), that is alpha * elu(x / alpha); alpha > 0.
Tensor celu(const Tensor& x, double alpha = 1.0);
/// log(z / (1 - z)) with z = x, or x clamped to [eps, 1 - eps] when eps is given (the gradient is
/// then 0 outside that range).   logit(p), logit(p, 1e-6)
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
/// The gated linear unit: x split in halves a, b along dim (of even size), a * sigmoid(b).
///   glu(x), glu(x, 1)
Tensor glu(const Tensor& x, int64_t dim = -1);
/// x where x > 0, else weight * x, weight [1] (shared) or [C] (one per channel along dim 1 of x).
/// Gradients reach x and weight.   prelu(x, full({1}, 0.25))
Tensor prelu(const Tensor& x, const Tensor& weight);

}  // namespace minidl
