// Trains the multilayer perceptron of ../shared/BENCHMARK.md on MNIST (the model is in
// apps/common/models.h: Flatten -> Linear(784, 512) -> ReLU -> Linear(512, 256) -> ReLU -> Linear(256, 10)).
#include "apps/common/mnist_app.h"
#include "apps/common/models.h"

int main(int argc, char** argv) {
  auto flags = mnist_app::parse_flags(argc, argv, "minidl MNIST MLP", /*default_epochs=*/10);
  return mnist_app::guarded_main([&] {
    minidl::manual_seed(flags.seed);
    return mnist_app::run(std::make_shared<mnist_app::Mlp>(), flags);
  });
}
