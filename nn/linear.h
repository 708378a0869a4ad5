#pragma once
#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  MINIDL_ARG(int64_t, in_features);
  MINIDL_ARG(int64_t, out_features);
  MINIDL_ARG(bool, bias) = true;
};

/// y = x @ weight^T + bias, weight [out, in], with PyTorch's default initialization.
///   nn::Linear fc(784, 10);  Tensor y = fc(x);
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(LinearImpl)
  Tensor forward(const Tensor& input) override;
  /// relu(forward(input)) as one op (ops/matmul.h, linear_relu): what nn::Sequential runs for a
  /// Linear followed by a ReLU.
  Tensor forward_relu(const Tensor& input);
  /// next.forward(relu(forward(input))) as one op (ops/matmul.h, linear_relu_linear): what
  /// nn::Sequential runs for a Linear, a ReLU and a Linear that no ReLU follows.
  Tensor forward_relu_linear(const Tensor& input, const LinearImpl& next);
  /// next.forward(gelu(forward(input), approximate)) as one op (ops/matmul.h, linear_gelu_linear),
  /// whose backward makes the GELU's output again instead of saving it (unless keep_gelu_output): a
  /// transformer's MLP.   Tensor y = c_fc->forward_gelu_linear(x, *c_proj);
  Tensor forward_gelu_linear(const Tensor& input, const LinearImpl& next, const std::string& approximate = "none",
                             bool keep_gelu_output = false);
  std::string name() const override { return "Linear"; }
  std::string extra_repr() const override;
  void reset_parameters();

  LinearOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(Linear);

}  // namespace minidl::nn
