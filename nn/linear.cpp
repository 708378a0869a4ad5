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

namespace {

Tensor run_linear(const LinearImpl& layer, const Tensor& input, Tensor (*op)(const Tensor&, const Tensor&, const Tensor&)) {
  const int64_t in = layer.options.in_features();
  MINIDL_CHECK(input.dim() >= 1 && input.size(-1) == in, "Linear: expected input with last dimension ", in,
               ", got shape ", input.shape());
  if (input.dim() == 2) return op(input, layer.weight, layer.bias);
  // Any leading dims: fold them into the batch and unfold after.
  Shape out_shape = input.shape();
  out_shape.back() = layer.options.out_features();
  return op(input.reshape({-1, in}), layer.weight, layer.bias).reshape(out_shape);
}

}  // namespace

Tensor LinearImpl::forward(const Tensor& input) { return run_linear(*this, input, linear); }

Tensor LinearImpl::forward_relu(const Tensor& input) { return run_linear(*this, input, linear_relu); }

namespace {

// The checks of a layer and the next one it feeds, in the modules' words.
void check_pair(const LinearImpl& layer, const Tensor& input, const LinearImpl& next) {
  const int64_t in = layer.options.in_features();
  MINIDL_CHECK(input.dim() >= 1 && input.size(-1) == in, "Linear: expected input with last dimension ", in,
               ", got shape ", input.shape());
  MINIDL_CHECK(next.options.in_features() == layer.options.out_features(), "Linear: a layer of ",
               next.options.in_features(), " inputs cannot follow one of ", layer.options.out_features(), " outputs");
}

}  // namespace

Tensor LinearImpl::forward_relu_linear(const Tensor& input, const LinearImpl& next) {
  check_pair(*this, input, next);
  return linear_relu_linear(input, weight, bias, next.weight, next.bias);
}

Tensor LinearImpl::forward_gelu_linear(const Tensor& input, const LinearImpl& next, const std::string& approximate,
                                       bool keep_gelu_output) {
  check_pair(*this, input, next);
  return linear_gelu_linear(input, weight, bias, next.weight, next.bias, approximate, keep_gelu_output);
}

}  // namespace minidl::nn
