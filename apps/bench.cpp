// Training throughput, peak memory and test accuracy under ../shared/BENCHMARK.md: the data set
// sits in the memory of the training device, each step gathers its batch there with index_select,
// 50 warm-up steps (and three of the last partial batch's shape) are not counted, then one full
// epoch (last partial batch included) is timed
// with forward, loss, backward and the SGD step inside. Accuracy, when asked for, comes from
// --epochs full epochs after a fresh seeded initialization. On cuda each step is one CUDA graph
// replay (cuda::GraphedStep; --no-cuda-graph runs it op by op), and the report says where the time
// goes: kernels per step, GPU busy fraction (CUPTI) and host microseconds to issue one step.
//
// With --distributed (one process per GPU, started by scripts/launch.sh) every rank times its share
// of the epoch (DistributedSampler) under DistributedDataParallel, and rank 0 reports the whole
// job's images per second.
//
// --precision tf32|bf16|fp16 trains as PyTorch's TF32, autocast and GradScaler users do
// (apps/common/precision.h); the result line names the precision, so that each is compared with
// PyTorch in the same one.
//
//   build/bench --model cnn --device cuda --batch-size 64 [--epochs 3] [--no-cuda-graph] [--deterministic]
//   build/bench --model mlp --device cuda --batch-size 512 --precision bf16
//   scripts/launch.sh --nproc-per-node 2 build/bench --model cnn --batch-size 512 --distributed
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "apps/common/gpu_report.h"
#include "apps/common/mnist_app.h"
#include "apps/common/models.h"
#include "data/sampler.h"
#include "distributed/distributed.h"

using namespace minidl;

namespace {

// Peak resident set size of this process (CPU runs), from /proc.
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  for (double kb; status >> key;) {
    if (key == "VmHWM:" && status >> kb) return kb / 1024;
  }
  return 0;
}

struct Trainer {
  std::shared_ptr<nn::Module> model;
  optim::SGD optimizer;
  Tensor images, targets, order;  // all on the device; order: this epoch's shuffled indices
  int64_t batch;
  mnist_app::Precision precision;
  optim::GradScaler scaler;  // fp16's; a pass-through otherwise
  // The step gathers its batch itself, as PyTorch's script does inside its graph: only the index
  // is copied in before a replay.
  cuda::GraphedStep train_step;

  Trainer(std::shared_ptr<nn::Module> m, Tensor images_, Tensor targets_, int64_t batch_, bool graph,
          mnist_app::Precision precision_)
      : model(m),
        optimizer(m->parameters(), optim::SGDOptions(0.01).momentum(0.9)),
        images(std::move(images_)),
        targets(std::move(targets_)),
        batch(batch_),
        precision(precision_),
        scaler(mnist_app::grad_scaler_options(precision_)),
        train_step(
            [this](const std::vector<Tensor>& in) {
              // The labels' gather first: as the first work of a graph it runs while the launch of
              // the rest of the graph gets under way (measured faster at batch 512 than after
              // the forward, where it would wait in line before the loss).
              Tensor labels = index_select(targets, in[0]);
              // Autocast around the forward and the loss only, as PyTorch's script has it.
              mnist_app::ForwardPrecision autocast(precision, images.device());
              return cross_entropy(model->forward(index_select(images, in[0])), labels);
            },
            optimizer, cuda::GraphedStepOptions().enabled(graph).grad_scaler(mnist_app::step_scaler(scaler))) {}

  // This rank's share of one shuffled epoch; the whole epoch without --distributed (one rank).
  void shuffle(uint64_t seed, int64_t epoch) {
    data::DistributedSampler sampler(images.size(0), distributed::world_size(), distributed::rank(), true, seed);
    order = Tensor::from_vector(sampler.indices(epoch)).to(images.device());
  }

  int64_t steps() const { return (order.size(0) + batch - 1) / batch; }
  int64_t full_steps() const { return std::max<int64_t>(1, order.size(0) / batch); }

  Tensor step(int64_t s) {
    int64_t begin = s * batch, n = std::min(batch, order.size(0) - begin);
    return train_step({Tensor::make_view(order, {n}, {1}, order.offset() + begin)});
  }
};

// The forward in the training's precision (autocast for bf16 and fp16), the argmax on float32 logits.
double accuracy(nn::Module& model, const Tensor& images, const Tensor& targets, mnist_app::Precision precision) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  for (int64_t begin = 0; begin < images.size(0); begin += 1000) {
    int64_t n = std::min<int64_t>(1000, images.size(0) - begin);
    Tensor index = arange(static_cast<double>(begin), static_cast<double>(begin + n), 1, kInt64, images.device());
    Tensor logits;
    {
      mnist_app::ForwardPrecision autocast(precision, images.device());
      logits = model.forward(index_select(images, index));
    }
    correct += eq(argmax(logits.to(kFloat32), 1), index_select(targets, index)).sum().item<int64_t>();
  }
  model.train();
  return 100.0 * static_cast<double>(correct) / static_cast<double>(images.size(0));
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "mlp", device_spec = "auto", data_dir, precision_flag = "fp32";
  int64_t batch = 64;
  int epochs = 0, warmup = 50, threads = 0;
  uint64_t seed = 1;
  bool graph = true, profile = false, deterministic = false, distributed = false;
  double bucket_cap_mb = 0;
  CLI::App app("minidl training benchmark (../shared/BENCHMARK.md)");
  app.add_option("--model", model_name, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}))->capture_default_str();
  app.add_option("--batch-size", batch, "training batch size")->check(CLI::Range(int64_t{1}, int64_t{60000}))->capture_default_str();
  app.add_option("--device", device_spec, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--epochs", epochs, "also train this many epochs from scratch and report test accuracy")->check(CLI::Range(0, 1000));
  app.add_option("--warmup", warmup, "uncounted steps before the timed epoch")->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 4096));
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  mnist_app::add_precision_option(app, precision_flag);
  app.add_option("--data", data_dir, "data folder (default: $MINIDL_DATA, else <repo>/datasets)");
  app.add_flag("--cuda-graph,!--no-cuda-graph", graph, "on cuda, replay each step as one CUDA graph (default on)");
  app.add_flag("--profile", profile, "on cuda, also list each kernel's time and launches per step");
  app.add_flag("--deterministic", deterministic, "set_deterministic(true): what bit-identical results cost");
  app.add_flag("--distributed", distributed,
               "one process of a data-parallel job (scripts/launch.sh): --batch-size per GPU, the job's img/s from rank 0");
  app.add_option("--bucket-cap-mb", bucket_cap_mb, "with --distributed: DDP's bucket size (0: its default)")
      ->check(CLI::Range(0.0, 1024.0));
  mnist_app::parse_or_exit(app, argc, argv);

  return mnist_app::guarded_main([&] {
    if (threads > 0) set_num_threads(threads);
    if (deterministic) set_deterministic(true);
    const mnist_app::Precision precision = mnist_app::parse_precision(precision_flag);
    mnist_app::PrecisionScope tf32(precision);
    const Device device = mnist_app::training_device(device_spec, distributed);
    const bool rank0 = distributed::rank() == 0;
    data::MNIST train(data::data_root(data_dir), true), test(data::data_root(data_dir), false);
    auto make = [&]() -> std::shared_ptr<nn::Module> {
      manual_seed(seed);
      std::shared_ptr<nn::Module> m;
      if (model_name == "mlp") m = std::make_shared<mnist_app::Mlp>();
      else m = std::make_shared<mnist_app::Cnn>();
      m->to(device);
      distributed::DistributedDataParallelOptions ddp_options;
      if (bucket_cap_mb > 0) ddp_options.bucket_cap_mb(bucket_cap_mb);
      if (distributed) return std::make_shared<distributed::DistributedDataParallel>(m, distributed::group(), ddp_options);
      return m;
    };
    auto new_trainer = [&] {
      return std::make_unique<Trainer>(make(), train.images().to(device), train.targets().to(device), batch, graph,
                                       precision);
    };

    // Throughput: warm-up steps, then one timed epoch. item() at each end waits for the device.
    auto trainer = new_trainer();
    Trainer& t = *trainer;
    t.shuffle(seed, 0);
    for (int s = 0; s < warmup; ++s) t.step(s % t.steps());
    // The last, partial batch is a shape of its own (60,000 mod 512 = 96 images): its algorithm
    // choice and GEMM tuning (on a shape's second use) must not fall inside the timed epoch, as
    // BENCHMARK.md asks of both sides.
    if (warmup > 0 && t.steps() != t.full_steps())
      for (int s = 0; s < 3; ++s) t.step(t.steps() - 1);
    t.step(0).item<float>();
    if (device.is_cuda()) reset_peak_memory_stats(device);
    t.shuffle(seed, 1);
    if (distributed) distributed::group().barrier();  // every rank starts the clock together
    auto start = std::chrono::steady_clock::now();
    Tensor loss;
    for (int64_t s = 0; s < t.steps(); ++s) loss = t.step(s);
    loss.item<float>();
    if (distributed) distributed::group().barrier();  // and the epoch ends with the slowest rank
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double peak_mb = device.is_cuda() ? memory_stats(device).peak_bytes / 1048576.0 : peak_rss_mb();
    const std::string gpus = distributed ? "  gpus " + std::to_string(distributed::world_size()) : "";
    if (distributed && !t.train_step.graphed() && rank0)
      std::printf("(eager steps: %s)\n", t.train_step.eager_reason().c_str());
    if (rank0)
      std::printf("model %s  device %s  batch %lld  precision %s  threads %d%s%s  %.0f img/s  epoch %.2f s  peak %s %.0f MB\n",
                  model_name.c_str(), device.str().c_str(), static_cast<long long>(batch),
                  mnist_app::precision_name(precision), get_num_threads(),
                  deterministic ? "  deterministic" : "", gpus.c_str(), static_cast<double>(train.size()) / seconds,
                  seconds, device.is_cuda() ? "device" : "RSS", peak_mb);
    if (device.is_cuda() && (!distributed || profile)) {  // every rank runs the same profiled steps
      // Full batches only: the steps that replay the graph.
      mnist_app::report_gpu_time([&](int s) { t.step(s % t.full_steps()); },
                                 t.train_step.graphed() ? "one CUDA graph per step" : "eager (no CUDA graph)", profile);
    }

    if (epochs > 0) {
      auto fresh_trainer = new_trainer();
      Trainer& fresh = *fresh_trainer;
      Tensor test_images = test.images().to(device), test_targets = test.targets().to(device);
      for (int e = 1; e <= epochs; ++e) {
        fresh.shuffle(seed, e);
        for (int64_t s = 0; s < fresh.steps(); ++s) fresh.step(s);
        const double acc = accuracy(*fresh.model, test_images, test_targets, precision);
        if (rank0) std::printf("epoch %d  test accuracy %.2f%%\n", e, acc);
      }
    }
    std::fflush(stdout);
    return 0;
  });
}
