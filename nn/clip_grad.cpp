// Built from elementwise ops and reductions, so it runs wherever those do, and queues no host sync:
// min(x, 1) is x - relu(x - 1), and clamping to [-c, c] is two such steps.
#include "nn/clip_grad.h"

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace minidl::nn::utils {

namespace {
std::vector<Tensor> gradients(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> out;
  for (const Tensor& p : parameters) {
    Tensor g = p.grad();
    if (g.defined()) out.push_back(g);
  }
  return out;
}
}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  MINIDL_CHECK(norm_type == 2, "clip_grad_norm_: only the 2-norm is supported, got norm_type ", norm_type);
  MINIDL_CHECK(max_norm >= 0, "clip_grad_norm_: expected max_norm >= 0, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads = gradients(parameters);
  MINIDL_CHECK(!grads.empty(), "clip_grad_norm_: no parameter has a gradient; call backward() first");
  Tensor squares;
  for (const Tensor& g : grads) {
    MINIDL_CHECK(g.device() == grads[0].device() && g.dtype() == grads[0].dtype(),
                 "clip_grad_norm_: gradients on one device and of one dtype expected, got ", grads[0].dtype(), " on ",
                 grads[0].device(), " and ", g.dtype(), " on ", g.device());
    Tensor s = sum(g * g);
    squares = squares.defined() ? squares + s : s;
  }
  Tensor total = sqrt(squares);
  // coef = min(max_norm / (total + 1e-6), 1), as PyTorch.
  Tensor coef = scalar_like(max_norm, total) / (total + 1e-6);
  coef = coef - relu(coef - 1.0);
  for (Tensor& g : grads) mul_(g, coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  MINIDL_CHECK(clip_value >= 0, "clip_grad_value_: expected clip_value >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (Tensor& g : gradients(parameters)) {
    Tensor low = relu(g + clip_value) - clip_value;          // max(g, -c)
    Tensor clamped = clip_value - relu(clip_value - low);    // min(., c)
    copy_(g, clamped);
  }
}

}  // namespace minidl::nn::utils
