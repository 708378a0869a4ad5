// Trains the small residual network of apps/common/resnet.h on Fashion-MNIST with SGD (momentum,
// weight decay) and a cosine learning-rate schedule, reporting test accuracy after every epoch.
//
//   build/fashion_resnet --device cuda --epochs 10
//   build/fashion_resnet --device cpu --epochs 1 --limit 5000
#include "apps/common/mnist_app.h"
#include "apps/common/resnet.h"

int main(int argc, char** argv) {
  mnist_app::Flags defaults;
  defaults.dataset = "fashion-mnist";
  defaults.epochs = 10;
  defaults.batch_size = 128;
  defaults.lr = 0.05;
  defaults.weight_decay = 5e-4;
  defaults.schedule = "cosine";
  auto flags = mnist_app::parse_flags(argc, argv, "minidl Fashion-MNIST ResNet", defaults);
  return mnist_app::guarded_main([&] {
    minidl::manual_seed(flags.seed);
    auto model = resnet::ResNet().ptr();
    std::printf("%lld parameters\n", static_cast<long long>(model->num_parameters()));
    return mnist_app::run(model, flags);
  });
}
