// Trains a multilayer perceptron on MNIST, as in ../shared/BENCHMARK.md:
// Flatten -> Linear(784, 512) -> ReLU -> Linear(512, 256) -> ReLU -> Linear(256, 10).
#include "apps/common/mnist_app.h"

using namespace minidl;

struct Net : nn::Module {
  Net()
      : layers(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 256), nn::ReLU(),
               nn::Linear(256, 10)) {
    register_module("layers", layers);
  }
  Tensor forward(const Tensor& x) override { return layers(x); }
  nn::Sequential layers;
};

int main(int argc, char** argv) {
  auto flags = mnist_app::parse_flags(argc, argv, "minidl MNIST MLP", /*default_epochs=*/10);
  return mnist_app::guarded_main([&] {
    manual_seed(flags.seed);
    return mnist_app::run(std::make_shared<Net>(), flags);
  });
}
