#pragma once
// The fused convolution epilogues (ops/conv2d_relu.h) against their unfused compositions, shared by
// the CPU and CUDA tests: both values and all three gradients, on random inputs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "minidl.h"

namespace minidl::testing {

struct ConvReluCase {
  std::string name;
  Shape x, w;  // x [N, C, H, W], weight [O, C, kh, kw]
  int64_t stride, padding;
  bool bias;
  int64_t pool;  // 0: conv2d_relu; else conv2d_relu_max_pool2d with this pool
};

inline const std::vector<ConvReluCase>& conv_relu_cases() {
  static const std::vector<ConvReluCase> cases = {
      {"relu 1 channel", {3, 1, 8, 7}, {4, 1, 3, 3}, 1, 0, true, 0},
      {"relu strided padded, no bias", {2, 3, 7, 6}, {5, 3, 3, 2}, 2, 1, false, 0},
      {"pool 2", {2, 3, 9, 8}, {4, 3, 3, 3}, 1, 0, true, 2},    // 7x6 output: the last row is dropped
      {"pool 3 no bias", {2, 2, 8, 9}, {3, 2, 2, 2}, 1, 1, false, 3},
      {"pool 2 even", {4, 2, 6, 6}, {6, 2, 3, 3}, 1, 0, true, 2},
  };
  return cases;
}

/// The case's op (fused) or its composition of conv2d, relu and max_pool2d (unfused).
inline Tensor run_conv_relu(const ConvReluCase& c, const std::vector<Tensor>& in, bool fused) {
  const Tensor bias = c.bias ? in[2] : Tensor();
  if (fused) {
    return c.pool ? conv2d_relu_max_pool2d(in[0], in[1], bias, c.stride, c.padding, 1, c.pool)
                  : conv2d_relu(in[0], in[1], bias, c.stride, c.padding);
  }
  Tensor y = relu(conv2d(in[0], in[1], bias, c.stride, c.padding));
  return c.pool ? max_pool2d(y, c.pool) : y;
}

/// Random inputs of the case on `device`, leaves that require grad.
inline std::vector<Tensor> conv_relu_inputs(const ConvReluCase& c, DType dtype, Device device) {
  std::vector<Tensor> in = {randn(c.x, dtype).to(device), (randn(c.w, dtype) * 0.5).to(device)};
  if (c.bias) in.push_back((randn({c.w[0]}, dtype) * 0.5).to(device));
  for (Tensor& t : in) t.requires_grad_();
  return in;
}

}  // namespace minidl::testing
