// instance_norm and local_response_norm. Shapes: x [N, C, *] -> the same shape; weight, bias and
// the running statistics [C].
// instance_norm with the input's statistics is group_norm with one group per channel (the same
// mean and biased variance over each (n, c)'s spatial elements); the running statistics are
// updated as PyTorch's batch_norm over [1, N * C, *] does it, then averaged over the batch. With the
// running statistics it is batch_norm in evaluation.
// local_response_norm is PyTorch's composition: the squares, zero-padded along the channels, a
// sliding mean over `size` channels (avg_pool2d with a [size, 1] window), then the power.
#include "ops/normalization_more.h"

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/avg_pool2d.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/normalization.h"
#include "ops/pad.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

void check_channel_tensor(const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  check_same_device("instance_norm", {x, t});
  MINIDL_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "instance_norm: expected ", name, " of shape [", x.size(1),
               "] for input of shape ", x.shape(), ", got shape ", t.shape());
}

// running = (1 - momentum) * running + momentum * batch, in place.
void update(const Tensor& running, const Tensor& batch, double momentum) {
  Tensor target = running;
  copy_(target, add(mul(running, Scalar(1 - momentum)), mul(batch.to(running.dtype()), Scalar(momentum))));
}

}  // namespace

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  MINIDL_CHECK(x.defined(), "instance_norm: the input is undefined");
  MINIDL_CHECK(x.dim() >= 3, "instance_norm: expected an input [N, C, *] of at least 3 dims, got shape ", x.shape());
  MINIDL_CHECK(is_floating(x.dtype()), "instance_norm: expected a floating input, got ", x.dtype());
  MINIDL_CHECK(running_mean.defined() == running_var.defined(),
               "instance_norm: expected running_mean and running_var both given or both not");
  check_channel_tensor("weight", weight, x);
  check_channel_tensor("bias", bias, x);
  check_channel_tensor("running_mean", running_mean, x);
  check_channel_tensor("running_var", running_var, x);
  if (!use_input_stats) {
    MINIDL_CHECK(running_mean.defined(),
                 "instance_norm: expected running_mean and running_var when use_input_stats is false");
    return batch_norm(x, running_mean, running_var, weight, bias, /*training=*/false, 0.0, eps);
  }
  const int64_t spatial = x.numel() / (x.size(0) * x.size(1));
  MINIDL_CHECK(spatial > 1 || x.numel() == 0, "instance_norm: expected more than 1 spatial element when using the ",
               "input's statistics, got input of shape ", x.shape());
  Tensor out = group_norm(x, x.size(1), weight, bias, eps);
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    std::vector<int64_t> dims;
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    Tensor detached = x.detach();
    update(running_mean, mean(mean(detached, dims), {0}), momentum);
    update(running_var, mean(var(detached, dims, /*unbiased=*/true), {0}), momentum);
  }
  return out;
}

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  MINIDL_CHECK(x.defined(), "local_response_norm: the input is undefined");
  MINIDL_CHECK(x.dim() >= 3, "local_response_norm: expected an input [N, C, *] of 3 or more dims, got shape ",
               x.shape());
  MINIDL_CHECK(size > 0, "local_response_norm: expected size > 0, got ", size);
  if (x.numel() == 0) return x;
  const int64_t n = x.size(0), c = x.size(1);
  Tensor squares = reshape(mul(x, x), {n, 1, c, x.numel() / (n * c)});
  squares = pad(squares, {0, 0, size / 2, (size - 1) / 2});
  Tensor window_mean = reshape(avg_pool2d(squares, Size2(size, 1), Size2(1)), x.shape());
  return div(x, pow(add(mul(window_mean, Scalar(alpha)), scalar_like(k, x)), Scalar(beta)));
}

}  // namespace minidl
