// Built from elementwise ops and reductions, so it runs wherever those do, and queues no host sync
// (unless error_if_nonfinite asks for the norm's value):
// min(x, 1) is x - relu(x - 1), and clamping to [-c, c] is two such steps. The 2-norm on CUDA takes
// the device's fused multi-tensor pass instead (ops/optim.h): a few launches for all the gradients
// rather than four per gradient, which counts inside a captured step.
#include "nn/clip_grad.h"

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/optim.h"
#include "ops/reduce.h"
#include "ops/slice.h"

#include <cmath>

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

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  MINIDL_CHECK(norm_type > 0, "clip_grad_norm_: expected norm_type > 0 (or infinity), got ", norm_type);
  MINIDL_CHECK(max_norm >= 0, "clip_grad_norm_: expected max_norm >= 0, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads = gradients(parameters);
  MINIDL_CHECK(!grads.empty(), "clip_grad_norm_: no parameter has a gradient; call backward() first");
  auto check_finite = [&](const Tensor& total) {
    if (!error_if_nonfinite) return;
    const double value = total.to(Device::cpu()).to(kFloat64).item<double>();  // a host sync, only when asked for
    MINIDL_CHECK(std::isfinite(value), "clip_grad_norm_: the total norm of order ", norm_type,
                 " of the gradients is non-finite (", value, "), so it cannot be clipped; pass "
                 "error_if_nonfinite=false to clip anyway");
  };
  if (norm_type == 2 && !error_if_nonfinite) {
    Tensor total = clip_grad_norm_fused_(grads, max_norm);
    if (total.defined()) return total;
  }
  const bool inf_norm = std::isinf(norm_type);
  Tensor acc;  // the sum of |g|^p, or for the inf-norm the largest |g|
  for (const Tensor& g : grads) {
    MINIDL_CHECK(g.device() == grads[0].device() && g.dtype() == grads[0].dtype(),
                 "clip_grad_norm_: gradients on one device and of one dtype expected, got ", grads[0].dtype(), " on ",
                 grads[0].device(), " and ", g.dtype(), " on ", g.device());
    Tensor part;
    if (inf_norm) {
      part = max(abs(g).reshape({-1}), 0).values;
      acc = acc.defined() ? acc + relu(part - acc) : part;  // max(acc, part)
    } else {
      part = norm_type == 2 ? sum(g * g) : sum(pow(abs(g), norm_type));
      acc = acc.defined() ? acc + part : part;
    }
  }
  Tensor total = inf_norm ? acc : norm_type == 2 ? sqrt(acc) : pow(acc, 1.0 / norm_type);
  check_finite(total);
  // coef = min(max_norm / (total + 1e-6), 1), as PyTorch.
  Tensor coef = scalar_like(max_norm, total) / (total + 1e-6);
  coef = coef - relu(coef - 1.0);
  for (Tensor& g : grads) mul_(g, coef);
  return total;
}

Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  MINIDL_CHECK(!parameters.empty(), "parameters_to_vector: got no parameters");
  std::vector<Tensor> flat;
  for (const Tensor& p : parameters) {
    MINIDL_CHECK(p.device() == parameters[0].device(), "parameters_to_vector: parameters on one device expected, got ",
                 parameters[0].device(), " and ", p.device());
    flat.push_back(p.reshape({-1}));
  }
  return cat(flat, 0);
}

void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  MINIDL_CHECK(vec.dim() == 1, "vector_to_parameters: expected a 1-D vector, got shape ", vec.shape());
  int64_t total = 0;
  for (const Tensor& p : parameters) total += p.numel();
  MINIDL_CHECK(vec.numel() == total, "vector_to_parameters: the vector has ", vec.numel(),
               " elements, the parameters ", total);
  NoGradGuard no_grad;
  int64_t offset = 0;
  for (const Tensor& p : parameters) {
    Tensor dst = p;
    copy_(dst, narrow(vec, 0, offset, p.numel()).reshape(p.shape()));
    offset += p.numel();
  }
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
