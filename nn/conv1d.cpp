#include "nn/conv1d.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "ops/conv1d.h"

namespace minidl::nn {

Conv1dImpl::Conv1dImpl(const Conv1dOptions& options) : options(options) {
  MINIDL_CHECK(options.in_channels() > 0 && options.out_channels() > 0 && options.kernel_size() > 0,
               "Conv1d: expected positive channels and kernel size, got in=", options.in_channels(),
               ", out=", options.out_channels(), ", kernel=", options.kernel_size());
  MINIDL_CHECK(options.groups() > 0 && options.in_channels() % options.groups() == 0 &&
                   options.out_channels() % options.groups() == 0,
               "Conv1d: groups = ", options.groups(), " must divide in_channels (", options.in_channels(),
               ") and out_channels (", options.out_channels(), ")");
  weight = register_parameter("weight", Tensor::empty({options.out_channels(), options.in_channels() / options.groups(),
                                                        options.kernel_size()}));
  if (options.bias()) bias = register_parameter("bias", Tensor::empty({options.out_channels()}));
  reset_parameters();
}

void Conv1dImpl::reset_parameters() {
  // PyTorch's: kaiming_uniform_ with a = sqrt(5), and the bias uniform in +-1/sqrt(fan_in).
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

std::string Conv1dImpl::extra_repr() const {
  std::ostringstream os;
  os << options.in_channels() << ", " << options.out_channels() << ", kernel_size=[" << options.kernel_size()
     << "], stride=[" << options.stride() << "]";
  if (options.padding() != 0) os << ", padding=[" << options.padding() << "]";
  if (options.dilation() != 1) os << ", dilation=[" << options.dilation() << "]";
  if (options.groups() != 1) os << ", groups=" << options.groups();
  if (!options.bias()) os << ", bias=false";
  return os.str();
}

Tensor Conv1dImpl::forward(const Tensor& input) {
  return conv1d(input, weight, bias, options.stride(), options.padding(), options.dilation(), options.groups());
}

}  // namespace minidl::nn
