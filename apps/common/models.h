#pragma once
// The two models of ../shared/BENCHMARK.md, shared by the apps and the benchmark.
#include "minidl.h"
#include "nn/nn.h"

namespace mnist_app {

using namespace minidl;

/// Flatten -> Linear(784, 512) -> ReLU -> Linear(512, 256) -> ReLU -> Linear(256, 10).
struct Mlp : nn::Module {
  Mlp()
      : layers(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 256), nn::ReLU(),
               nn::Linear(256, 10)) {
    register_module("layers", layers);
  }
  Tensor forward(const Tensor& x) override { return layers(x); }
  nn::Sequential layers;
};

/// The convolutional network of PyTorch's MNIST example.
struct Cnn : nn::Module {
  Cnn()
      : conv1(nn::Conv2dOptions(1, 32, 3)),
        conv2(nn::Conv2dOptions(32, 64, 3)),
        dropout1(0.25),
        dropout2(0.5),
        fc1(9216, 128),
        fc2(128, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("dropout1", dropout1);
    register_module("dropout2", dropout2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  // relu(conv1(input)), max_pool2d(relu(conv2(x)), 2) and relu(fc1(x)), each as one fused op
  // (ops/conv2d_relu.h, ops/matmul.h): the same values and gradients with fewer passes over memory.
  Tensor forward(const Tensor& input) override {
    Tensor x = conv1->forward_relu(input);
    x = conv2->forward_relu_max_pool2d(x, 2);
    x = dropout1(x);
    x = fc1->forward_relu(flatten(x, 1));
    return fc2(dropout2(x));
  }

  nn::Conv2d conv1, conv2;
  nn::Dropout dropout1, dropout2;
  nn::Linear fc1, fc2;
};

}  // namespace mnist_app
