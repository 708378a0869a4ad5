// Trains the convolutional network of PyTorch's MNIST example, as in ../shared/BENCHMARK.md.
#include "apps/common/mnist_app.h"

using namespace minidl;

struct Net : nn::Module {
  Net()
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

  Tensor forward(const Tensor& input) override {
    Tensor x = relu(conv1(input));
    x = relu(conv2(x));
    x = dropout1(max_pool2d(x, 2));
    x = relu(fc1(flatten(x, 1)));
    return fc2(dropout2(x));
  }

  nn::Conv2d conv1, conv2;
  nn::Dropout dropout1, dropout2;
  nn::Linear fc1, fc2;
};

int main(int argc, char** argv) {
  auto flags = mnist_app::parse_flags(argc, argv, "minidl MNIST CNN", /*default_epochs=*/10);
  return mnist_app::guarded_main([&] {
    manual_seed(flags.seed);
    return mnist_app::run(std::make_shared<Net>(), flags);
  });
}
