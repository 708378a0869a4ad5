#include "nn/linear.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "ops/creation.h"
#include "ops/matmul.h"

namespace minidl::nn {

LinearImpl::LinearImpl(const LinearOptions& options) : options(options) {
  MINIDL_CHECK(options.in_features() > 0 && options.out_features() > 0, "Linear: expected positive sizes, got in=",
               options.in_features(), ", out=", options.out_features());
  weight = register_parameter("weight", Tensor::empty({options.out_features(), options.in_features()}));
  if (options.bias()) bias = register_parameter("bias", Tensor::empty({options.out_features()}));
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

std::string LinearImpl::extra_repr() const {
  std::ostringstream os;
  os << "in_features=" << options.in_features() << ", out_features=" << options.out_features()
     << ", bias=" << (options.bias() ? "true" : "false");
  return os.str();
}

Tensor LinearImpl::forward(const Tensor& input) {
  MINIDL_CHECK(input.dim() >= 1 && input.size(-1) == options.in_features(), "Linear: expected input with last dimension ",
               options.in_features(), ", got shape ", input.shape());
  if (input.dim() == 2) return linear(input, weight, bias);
  // Any leading dims: fold them into the batch and unfold after.
  Shape out_shape = input.shape();
  out_shape.back() = options.out_features();
  return linear(input.reshape({-1, options.in_features()}), weight, bias).reshape(out_shape);
}

}  // namespace minidl::nn
