#pragma once
// A module defined outside minidl: y = x + fc2(relu(fc1(x))). MINIDL_MODULE makes ResidualBlock a
// shared handle to ResidualBlockImpl, as nn::Linear is to nn::LinearImpl, so it can be a member by
// value, go into nn::Sequential, and print as PyTorch prints modules.
#include <cstdint>

#include "minidl.h"
#include "nn/nn.h"

class ResidualBlockImpl : public minidl::nn::Module {
 public:
  ResidualBlockImpl(int64_t features, int64_t hidden)
      : fc1(register_module("fc1", minidl::nn::Linear(features, hidden))),
        fc2(register_module("fc2", minidl::nn::Linear(hidden, features))) {}

  minidl::Tensor forward(const minidl::Tensor& x) override { return x + fc2(minidl::relu(fc1(x))); }

  minidl::nn::Linear fc1, fc2;
};
MINIDL_MODULE(ResidualBlock);
