#include "nn/normalization_more.h"

#include <sstream>

#include "nn/init.h"
#include "ops/creation.h"
#include "ops/normalization_more.h"
#include "ops/view.h"

namespace minidl::nn {

Tensor InstanceNormImplBase::forward(const Tensor& input) {
  const int64_t batched = batched_dims();
  MINIDL_CHECK(input.defined(), name(), ": the input is undefined");
  MINIDL_CHECK(input.dim() == batched || input.dim() == batched - 1, name(), ": expected ", batched - 1, "D or ",
               batched, "D input (", batched == 3 ? "[C, L] or [N, C, L]" : "[C, H, W] or [N, C, H, W]", "), got ",
               input.dim(), "D input of shape ", input.shape());
  const bool unbatched = input.dim() == batched - 1;
  Tensor x = unbatched ? unsqueeze(input, 0) : input;
  // As PyTorch: a channel count other than num_features is an error only where there are tensors
  // of that size (PyTorch warns otherwise).
  MINIDL_CHECK(x.size(1) == options.num_features() || !(options.affine() || options.track_running_stats()), name(),
               ": expected input's size at dim ", unbatched ? 0 : 1, " to match num_features (",
               options.num_features(), "), got input of shape ", input.shape());
  const bool use_input_stats = is_training() || !options.track_running_stats();
  Tensor out = instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, options.momentum(),
                             options.eps());
  return unbatched ? squeeze(out, 0) : out;
}

std::string InstanceNormImplBase::extra_repr() const {
  std::ostringstream os;
  os << options.num_features() << ", eps=" << options.eps() << ", momentum=" << options.momentum()
     << ", affine=" << (options.affine() ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false");
  return os.str();
}

LocalResponseNormImpl::LocalResponseNormImpl(const LocalResponseNormOptions& options) : options(options) {
  MINIDL_CHECK(options.size() > 0, "LocalResponseNorm: expected size > 0, got ", options.size());
}

Tensor LocalResponseNormImpl::forward(const Tensor& input) {
  return local_response_norm(input, options.size(), options.alpha(), options.beta(), options.k());
}

std::string LocalResponseNormImpl::extra_repr() const {
  std::ostringstream os;
  os << options.size() << ", alpha=" << options.alpha() << ", beta=" << options.beta() << ", k=" << options.k();
  return os.str();
}

}  // namespace minidl::nn
