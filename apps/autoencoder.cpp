// A convolutional autoencoder on Fashion-MNIST (or MNIST): strided convolutions squeeze a 28x28 image
// to 32 channels at 7x7, a transposed convolution and a nearest-neighbour upsampling bring it back,
// and the reconstruction's mean squared error against the input is the loss. Prints that loss on
// the training batches and on the test set after every epoch; it falls as the model learns.
//
//   build/autoencoder --device cuda --epochs 5
//   build/autoencoder --device cpu --epochs 2 --limit 5000
#include "apps/common/mnist_app.h"

namespace autoencoder {

using namespace minidl;

class AutoencoderImpl : public nn::Module {
 public:
  AutoencoderImpl()
      : encoder(register_module(
            "encoder", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).stride(2).padding(1)), nn::ReLU(),
                                      nn::Conv2d(nn::Conv2dOptions(16, 32, 3).stride(2).padding(1)), nn::ReLU()))),
        decoder(register_module(
            "decoder",
            nn::Sequential(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(32, 16, 3).stride(2).padding(1).output_padding(1)),
                           nn::ReLU(), nn::Upsample(nn::UpsampleOptions().scale_factor(2.0)),
                           nn::Conv2d(nn::Conv2dOptions(16, 1, 3).padding(1))))) {}

  Tensor forward(const Tensor& x) override { return decoder(encoder(x)); }

  nn::Sequential encoder, decoder;
};
MINIDL_MODULE(Autoencoder);

// The forward and the loss in the training's precision (autocast for bf16 and fp16).
double test_loss(AutoencoderImpl& model, data::DataLoader& loader, mnist_app::Precision precision) {
  NoGradGuard no_grad;
  model.eval();
  double sum = 0;
  int64_t count = 0;
  for (data::Batch& batch : loader) {
    mnist_app::ForwardPrecision autocast(precision, batch.data.device());
    sum += mse_loss(model.forward(batch.data), batch.data).item<float>() * batch.data.size(0);
    count += batch.data.size(0);
  }
  return sum / count;
}

}  // namespace autoencoder

int main(int argc, char** argv) {
  mnist_app::Flags defaults;
  defaults.dataset = "fashion-mnist";
  defaults.epochs = 5;
  defaults.lr = 1e-3;
  auto f = mnist_app::parse_flags(argc, argv, "minidl convolutional autoencoder (Adam, MSE)", defaults);
  return mnist_app::guarded_main([&] {
    using namespace minidl;
    manual_seed(f.seed);
    mnist_app::InterruptGuard interrupt;  // Ctrl-C or SIGTERM stops after the step in flight
    mnist_app::RunModes modes(f);         // --detect-anomaly, --deterministic
    const mnist_app::Precision precision = mnist_app::parse_precision(f.precision);
    mnist_app::PrecisionScope tf32(precision);  // TF32 on for every --precision but fp32
    if (f.threads > 0) set_num_threads(f.threads);
    const Device device = mnist_app::resolve_device(f.device);
    auto full_train_set = mnist_app::load(f, true);
    std::shared_ptr<const data::Dataset> train_set = full_train_set;
    auto test_set = mnist_app::load(f, false);
    if (f.limit > 0 && f.limit < train_set->size()) train_set = mnist_app::first(full_train_set, f.limit);
    data::DataLoader train_loader(train_set,
                                  data::DataLoaderOptions().batch_size(f.batch_size).shuffle(true).seed(f.seed).device(device));
    data::DataLoader test_loader(test_set, data::DataLoaderOptions().batch_size(f.test_batch_size).device(device));
    auto model = autoencoder::Autoencoder().ptr();
    model->to(device);
    std::cout << *model << "\n";
    std::printf("device %s, precision %s\n", device.str().c_str(), mnist_app::precision_description(precision).c_str());
    optim::Adam optimizer(model->parameters(), optim::AdamOptions(f.lr));
    // fp16's loss scaling (a pass-through scaler otherwise): float16 gradients this small underflow.
    // A checkpoint keeps its scale.
    optim::GradScaler scaler(mnist_app::grad_scaler_options(precision));
    mnist_app::EpochState resumed;  // the batches of the first epoch trained before an interrupt
    const int first_epoch =
        f.resume.empty() ? 1 : mnist_app::resume_from(f.resume, *model, optimizer, nullptr, train_loader, &resumed);
    if (!f.resume.empty()) mnist_app::restore_scaler(scaler, f.resume);
    if (first_epoch == 1 && resumed.batches_done == 0)
      std::printf("test reconstruction MSE before training: %.4f\n", autoencoder::test_loss(*model, test_loader, precision));
    std::unique_ptr<mnist_app::MetricsLog> metrics;  // its accuracy columns stay empty: there is no class to get right
    if (!f.metrics.empty())
      metrics = std::make_unique<mnist_app::MetricsLog>(
          f.metrics, f.title + " (" + f.dataset + ", " + mnist_app::precision_name(precision) + ")", first_epoch);
    for (int epoch = first_epoch; epoch <= f.epochs; ++epoch) {
      // A signal during the evaluation or the save stops here, with the epoch not yet begun.
      if (epoch > first_epoch && mnist_app::interrupted())
        return mnist_app::stop_after_interrupt(f.save, *model, optimizer, epoch, 0, train_loader.size(),
                                               mnist_app::scaler_metadata(scaler));
      model->train();
      double sum = 0;
      int64_t count = 0, step = 0;
      ProgressBar timer(epoch, 0);
      for (auto it = mnist_app::begin_epoch(train_loader, &resumed); it != train_loader.end(); ++it) {
        data::Batch& batch = *it;
        if (step < resumed.batches_done) {  // trained before the interrupt: same order, same batches
          ++step;
          continue;
        }
        Tensor loss;
        {  // autocast around the forward and the loss only, as in PyTorch
          mnist_app::ForwardPrecision autocast(precision, device);
          loss = mse_loss(model->forward(batch.data), batch.data);
        }
        optimizer.zero_grad();
        scaler.scale(loss).backward();
        scaler.step(optimizer);  // skipped when fp16's gradients overflowed
        scaler.update();
        const float value = loss.item<float>();
        sum += value * batch.data.size(0);
        count += batch.data.size(0);
        ++step;
        if (metrics && (step % f.log_interval == 0 || count == train_set->size())) metrics->add_step(epoch, step, count, value);
        if (mnist_app::interrupted() && step < train_loader.size())  // after the last step, the epoch ends as usual
          return mnist_app::stop_after_interrupt(f.save, *model, optimizer, epoch, step, train_loader.size(),
                                                 mnist_app::scaler_metadata(scaler));
      }
      resumed.batches_done = 0;
      const double seconds = timer.elapsed(), test_mse = autoencoder::test_loss(*model, test_loader, precision);
      std::printf("epoch %d: train reconstruction MSE %.4f, test %.4f\n", epoch, sum / count, test_mse);
      if (metrics) metrics->add_epoch({epoch, sum / count, test_mse, NAN, seconds, f.lr});
      if (!f.save.empty())
        optim::save_checkpoint(f.save, *model, optimizer, {epoch, epoch * train_loader.size()},
                               mnist_app::scaler_metadata(scaler));
      std::fflush(stdout);
    }
    return 0;
  });
}
