#include "nn/activation.h"

#include <sstream>

#include "ops/elementwise.h"
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

}  // namespace minidl::nn
