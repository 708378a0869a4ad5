#include "nn/activation.h"

#include <sstream>

#include "nn/init.h"
#include "ops/activation.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/softmax.h"

namespace minidl::nn {

Tensor SigmoidImpl::forward(const Tensor& input) { return sigmoid(input); }
Tensor TanhImpl::forward(const Tensor& input) { return tanh(input); }
Tensor SoftmaxImpl::forward(const Tensor& input) { return softmax(input, dim); }
Tensor LogSoftmaxImpl::forward(const Tensor& input) { return log_softmax(input, dim); }

Tensor LeakyReLUImpl::forward(const Tensor& input) { return leaky_relu(input, options.negative_slope()); }

std::string LeakyReLUImpl::extra_repr() const {
  std::ostringstream os;
  os << "negative_slope=" << options.negative_slope();
  return os.str();
}

GELUImpl::GELUImpl(const GELUOptions& options) : options(options) {
  MINIDL_CHECK(options.approximate() == "none" || options.approximate() == "tanh",
               "GELU: expected approximate to be \"none\" or \"tanh\", got \"", options.approximate(), "\"");
}

Tensor GELUImpl::forward(const Tensor& input) { return gelu(input, options.approximate()); }

Tensor SiLUImpl::forward(const Tensor& input) { return silu(input); }

namespace {

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

Tensor SoftplusImpl::forward(const Tensor& input) { return softplus(input, options.beta(), options.threshold()); }
std::string SoftplusImpl::extra_repr() const {
  return "beta=" + number(options.beta()) + ", threshold=" + number(options.threshold());
}

Tensor ELUImpl::forward(const Tensor& input) { return elu(input, options.alpha()); }
std::string ELUImpl::extra_repr() const { return "alpha=" + number(options.alpha()); }

Tensor SELUImpl::forward(const Tensor& input) { return selu(input); }
Tensor MishImpl::forward(const Tensor& input) { return mish(input); }
Tensor GLUImpl::forward(const Tensor& input) { return glu(input, dim); }
Tensor SoftsignImpl::forward(const Tensor& input) { return softsign(input); }
Tensor TanhshrinkImpl::forward(const Tensor& input) { return tanhshrink(input); }
Tensor HardshrinkImpl::forward(const Tensor& input) { return hardshrink(input, options.lambda()); }
std::string HardshrinkImpl::extra_repr() const { return number(options.lambda()); }
Tensor SoftshrinkImpl::forward(const Tensor& input) { return softshrink(input, options.lambda()); }
std::string SoftshrinkImpl::extra_repr() const { return number(options.lambda()); }
Tensor CELUImpl::forward(const Tensor& input) { return celu(input, options.alpha()); }
std::string CELUImpl::extra_repr() const { return "alpha=" + number(options.alpha()); }
Tensor SoftminImpl::forward(const Tensor& input) { return softmin(input, dim); }
Tensor ReLU6Impl::forward(const Tensor& input) { return relu6(input); }
Tensor LogSigmoidImpl::forward(const Tensor& input) { return log_sigmoid(input); }

HardtanhImpl::HardtanhImpl(const HardtanhOptions& options) : options(options) {
  MINIDL_CHECK(options.max_val() > options.min_val(), "Hardtanh: expected max_val > min_val, got min_val ",
               options.min_val(), " and max_val ", options.max_val());
}
Tensor HardtanhImpl::forward(const Tensor& input) { return hardtanh(input, options.min_val(), options.max_val()); }
std::string HardtanhImpl::extra_repr() const {
  return "min_val=" + number(options.min_val()) + ", max_val=" + number(options.max_val());
}

PReLUImpl::PReLUImpl(const PReLUOptions& options) : options(options) {
  MINIDL_CHECK(options.num_parameters() >= 1, "PReLU: expected num_parameters >= 1, got ", options.num_parameters());
  weight = register_parameter("weight", Tensor::empty({options.num_parameters()}));
  reset_parameters();
}
void PReLUImpl::reset_parameters() { init::constant_(weight, options.init()); }
Tensor PReLUImpl::forward(const Tensor& input) { return prelu(input, weight); }
std::string PReLUImpl::extra_repr() const { return "num_parameters=" + std::to_string(options.num_parameters()); }

}  // namespace minidl::nn

namespace minidl::nn::functional {

Tensor softplus(const Tensor& input, const SoftplusFuncOptions& options) {
  return minidl::softplus(input, options.beta(), options.threshold());
}
Tensor elu(const Tensor& input, const ELUFuncOptions& options) { return minidl::elu(input, options.alpha()); }
Tensor hardtanh(const Tensor& input, const HardtanhFuncOptions& options) {
  return minidl::hardtanh(input, options.min_val(), options.max_val());
}

}  // namespace minidl::nn::functional
