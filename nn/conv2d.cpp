#include "nn/conv2d.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "ops/conv2d.h"
#include "ops/conv2d_relu.h"

namespace minidl::nn {

Conv2dImpl::Conv2dImpl(const Conv2dOptions& options) : options(options) {
  MINIDL_CHECK(options.in_channels() > 0 && options.out_channels() > 0 && options.kernel_size().h > 0 &&
                   options.kernel_size().w > 0,
               "Conv2d: expected positive channels and kernel size, got in=", options.in_channels(),
               ", out=", options.out_channels(), ", kernel=(", options.kernel_size().h, ", ", options.kernel_size().w, ")");
  weight = register_parameter("weight", Tensor::empty({options.out_channels(), options.in_channels(),
                                                        options.kernel_size().h, options.kernel_size().w}));
  if (options.bias()) bias = register_parameter("bias", Tensor::empty({options.out_channels()}));
  reset_parameters();
}

void Conv2dImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

std::string Conv2dImpl::extra_repr() const {
  std::ostringstream os;
  os << options.in_channels() << ", " << options.out_channels() << ", kernel_size=" << repr(options.kernel_size())
     << ", stride=" << repr(options.stride());
  if (!(options.padding() == Size2(0))) os << ", padding=" << repr(options.padding());
  if (!(options.dilation() == Size2(1))) os << ", dilation=" << repr(options.dilation());
  if (!options.bias()) os << ", bias=false";
  return os.str();
}

Tensor Conv2dImpl::forward(const Tensor& input) {
  return conv2d(input, weight, bias, options.stride(), options.padding(), options.dilation());
}

Tensor Conv2dImpl::forward_relu(const Tensor& input) {
  return conv2d_relu(input, weight, bias, options.stride(), options.padding(), options.dilation());
}

Tensor Conv2dImpl::forward_relu_max_pool2d(const Tensor& input, int64_t pool) {
  return conv2d_relu_max_pool2d(input, weight, bias, options.stride(), options.padding(), options.dilation(), pool);
}

}  // namespace minidl::nn
