#include "nn/normalization.h"

#include <sstream>

#include "core/autograd.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/normalization.h"

namespace minidl::nn {

namespace {
const char* boolean(bool b) { return b ? "true" : "false"; }
}  // namespace

Tensor BatchNormImplBase::forward(const Tensor& input) {
  check_input_dim(input);
  // As PyTorch: without running statistics the batch's are used in eval() too.
  const bool use_batch_stats = is_training() || !options.track_running_stats();
  if (!is_training() || !options.track_running_stats()) {
    return batch_norm(input, running_mean, running_var, weight, bias, use_batch_stats, 0.0, options.eps());
  }
  // The count is read on the host only for the cumulative average (momentum = nullopt).
  const double factor = options.momentum() ? *options.momentum()
                                           : 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>() + 1);
  Tensor out = batch_norm(input, running_mean, running_var, weight, bias, true, factor, options.eps());
  NoGradGuard no_grad;
  add_(num_batches_tracked, scalar_like(1, num_batches_tracked));  // on the device: CUDA graphs replay it
  return out;
}

std::string BatchNormImplBase::extra_repr() const {
  std::ostringstream os;
  os << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum()) os << *options.momentum();
  else os << "None";
  os << ", affine=" << boolean(options.affine()) << ", track_running_stats=" << boolean(options.track_running_stats());
  return os.str();
}

void BatchNorm1dImpl::check_input_dim(const Tensor& input) const {
  MINIDL_CHECK(input.defined(), "BatchNorm1d: the input is undefined");
  MINIDL_CHECK(input.dim() == 2 || input.dim() == 3, "BatchNorm1d: expected 2D or 3D input ([N, C] or [N, C, L]) (got ",
               input.dim(), "D input of shape ", input.shape(), ")");
}

void BatchNorm2dImpl::check_input_dim(const Tensor& input) const {
  MINIDL_CHECK(input.defined(), "BatchNorm2d: the input is undefined");
  MINIDL_CHECK(input.dim() == 4, "BatchNorm2d: expected 4D input ([N, C, H, W]) (got ", input.dim(),
               "D input of shape ", input.shape(), ")");
}

LayerNormImpl::LayerNormImpl(const LayerNormOptions& options) : options(options) {
  const Shape& shape = options.normalized_shape();
  MINIDL_CHECK(!shape.empty(), "LayerNorm: expected a normalized_shape of at least one dim, got []");
  for (int64_t s : shape) MINIDL_CHECK(s > 0, "LayerNorm: expected positive sizes in normalized_shape, got ", shape);
  if (options.elementwise_affine()) {
    weight = register_parameter("weight", Tensor::empty(shape));
    if (options.bias()) bias = register_parameter("bias", Tensor::empty(shape));
  }
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  return layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
}

std::string LayerNormImpl::extra_repr() const {
  std::ostringstream os;
  minidl::operator<<(os, options.normalized_shape()) << ", eps=" << options.eps()
     << ", elementwise_affine=" << boolean(options.elementwise_affine());
  return os.str();
}

RMSNormImpl::RMSNormImpl(const RMSNormOptions& options) : options(options) {
  const Shape& shape = options.normalized_shape();
  MINIDL_CHECK(!shape.empty(), "RMSNorm: expected a normalized_shape of at least one dim, got []");
  for (int64_t s : shape) MINIDL_CHECK(s > 0, "RMSNorm: expected positive sizes in normalized_shape, got ", shape);
  if (options.elementwise_affine()) weight = register_parameter("weight", Tensor::empty(shape));
  reset_parameters();
}

void RMSNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}

Tensor RMSNormImpl::forward(const Tensor& input) {
  return rms_norm(input, options.normalized_shape(), weight, options.eps());
}

std::string RMSNormImpl::extra_repr() const {
  std::ostringstream os;
  minidl::operator<<(os, options.normalized_shape()) << ", eps=";
  if (options.eps()) os << *options.eps();
  else os << "None";
  os << ", elementwise_affine=" << boolean(options.elementwise_affine());
  return os.str();
}

GroupNormImpl::GroupNormImpl(const GroupNormOptions& options) : options(options) {
  const int64_t g = options.num_groups(), c = options.num_channels();
  MINIDL_CHECK(g > 0 && c > 0, "GroupNorm: expected num_groups > 0 and num_channels > 0, got num_groups=", g,
               " and num_channels=", c);
  MINIDL_CHECK(c % g == 0, "GroupNorm: num_channels must be divisible by num_groups, got num_channels=", c,
               " and num_groups=", g);
  if (options.affine()) {
    weight = register_parameter("weight", Tensor::empty({c}));
    bias = register_parameter("bias", Tensor::empty({c}));
  }
  reset_parameters();
}

void GroupNormImpl::reset_parameters() {
  if (!options.affine()) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor GroupNormImpl::forward(const Tensor& input) {
  return group_norm(input, options.num_groups(), weight, bias, options.eps());
}

std::string GroupNormImpl::extra_repr() const {
  std::ostringstream os;
  os << options.num_groups() << ", " << options.num_channels() << ", eps=" << options.eps()
     << ", affine=" << boolean(options.affine());
  return os.str();
}

}  // namespace minidl::nn
