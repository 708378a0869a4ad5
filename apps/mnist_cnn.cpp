// Trains the convolutional network of PyTorch's MNIST example on MNIST (the model is in
// apps/common/models.h: two 3x3 convolutions, max-pooling, dropout, two linear layers).
#include "apps/common/mnist_app.h"
#include "apps/common/models.h"

int main(int argc, char** argv) {
  auto flags = mnist_app::parse_flags(argc, argv, "minidl MNIST CNN", /*default_epochs=*/10);
  return mnist_app::guarded_main([&] {
    minidl::manual_seed(flags.seed);
    return mnist_app::run(std::make_shared<mnist_app::Cnn>(), flags);
  });
}
