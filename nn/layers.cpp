#include "nn/layers.h"

#include <sstream>

#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/max_pool2d.h"
#include "ops/view.h"

namespace minidl::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return relu(input); }

std::string FlattenImpl::extra_repr() const {
  return "start_dim=" + std::to_string(options.start_dim()) + ", end_dim=" + std::to_string(options.end_dim());
}

std::string DropoutImpl::extra_repr() const {
  std::ostringstream os;
  os << "p=" << options.p();
  return os.str();
}

std::string MaxPool2dImpl::extra_repr() const {
  std::string s = "kernel_size=" + repr(options.kernel_size()) +
                  ", stride=" + repr(options.stride().value_or(options.kernel_size())) +
                  ", padding=" + repr(options.padding());
  if (!(options.dilation() == Size2(1))) s += ", dilation=" + repr(options.dilation());
  if (options.ceil_mode()) s += ", ceil_mode=true";
  return s;
}

Tensor FlattenImpl::forward(const Tensor& input) { return flatten(input, options.start_dim(), options.end_dim()); }

DropoutImpl::DropoutImpl(const DropoutOptions& options) : options(options) {
  MINIDL_CHECK(options.p() >= 0 && options.p() <= 1, "Dropout: expected a probability in [0, 1], got ", options.p());
}

Tensor DropoutImpl::forward(const Tensor& input) { return dropout(input, options.p(), is_training()); }

Dropout2dImpl::Dropout2dImpl(const Dropout2dOptions& options) : options(options) {
  MINIDL_CHECK(options.p() >= 0 && options.p() <= 1, "Dropout2d: expected a probability in [0, 1], got ",
               options.p());
}

Tensor Dropout2dImpl::forward(const Tensor& input) { return dropout2d(input, options.p(), is_training()); }

std::string Dropout2dImpl::extra_repr() const {
  std::ostringstream os;
  os << "p=" << options.p();
  return os.str();
}

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return max_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.dilation(),
                    options.ceil_mode());
}

}  // namespace minidl::nn
