#include "nn/layers_more.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "ops/bilinear.h"
#include "ops/pixel_shuffle.h"
#include "ops/softmax.h"
#include "ops/threshold.h"
#include "ops/view.h"

namespace minidl::nn {

Tensor UnflattenImpl::forward(const Tensor& input) { return unflatten(input, options.dim(), options.sizes()); }

std::string UnflattenImpl::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << options.dim() << ", unflattened_size=";
  minidl::operator<<(os, options.sizes());
  return os.str();
}

PixelShuffleImpl::PixelShuffleImpl(const PixelShuffleOptions& options) : options(options) {
  MINIDL_CHECK(options.upscale_factor() > 0, "PixelShuffle: expected a positive upscale_factor, got ",
               options.upscale_factor());
}
Tensor PixelShuffleImpl::forward(const Tensor& input) { return pixel_shuffle(input, options.upscale_factor()); }

PixelUnshuffleImpl::PixelUnshuffleImpl(const PixelUnshuffleOptions& options) : options(options) {
  MINIDL_CHECK(options.downscale_factor() > 0, "PixelUnshuffle: expected a positive downscale_factor, got ",
               options.downscale_factor());
}
Tensor PixelUnshuffleImpl::forward(const Tensor& input) { return pixel_unshuffle(input, options.downscale_factor()); }

Tensor ThresholdImpl::forward(const Tensor& input) { return threshold(input, options.threshold(), options.value()); }

std::string ThresholdImpl::extra_repr() const {
  std::ostringstream os;
  os << "threshold=" << options.threshold() << ", value=" << options.value();
  return os.str();
}

Tensor Softmax2dImpl::forward(const Tensor& input) {
  MINIDL_CHECK(input.defined(), "Softmax2d: the input is undefined");
  MINIDL_CHECK(input.dim() == 3 || input.dim() == 4, "Softmax2d: expected a 3D or 4D input ([C, H, W] or [N, C, H, W]), got ",
               input.dim(), "D input of shape ", input.shape());
  return softmax(input, -3);
}

BilinearImpl::BilinearImpl(const BilinearOptions& options) : options(options) {
  const int64_t in1 = options.in1_features(), in2 = options.in2_features(), out = options.out_features();
  MINIDL_CHECK(in1 > 0 && in2 > 0 && out > 0, "Bilinear: expected positive in1_features, in2_features and out_features, got ",
               in1, ", ", in2, " and ", out);
  weight = register_parameter("weight", Tensor::empty({out, in1, in2}));
  if (options.bias()) bias = register_parameter("bias", Tensor::empty({out}));
  reset_parameters();
}

void BilinearImpl::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(options.in1_features()));
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor BilinearImpl::forward(const Tensor& input1, const Tensor& input2) { return bilinear(input1, input2, weight, bias); }

std::string BilinearImpl::extra_repr() const {
  std::ostringstream os;
  os << "in1_features=" << options.in1_features() << ", in2_features=" << options.in2_features()
     << ", out_features=" << options.out_features() << ", bias=" << (options.bias() ? "true" : "false");
  return os.str();
}

}  // namespace minidl::nn
