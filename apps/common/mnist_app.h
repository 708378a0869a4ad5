#pragma once
// What the MNIST and Fashion-MNIST apps share: the command line, the data, and the train/test loops
// of PyTorch's MNIST example. Each app adds only its model (and its defaults).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/interrupt.h"
#include "apps/common/metrics.h"
#include "apps/common/precision.h"
#include "apps/common/progress_bar.h"
#include "core/cuda.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "data/paths.h"
#include "data/sampler.h"
#include "distributed/distributed.h"
#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace mnist_app {

using namespace minidl;

struct Flags {
  int epochs = 10;
  int64_t batch_size = 64, test_batch_size = 1000, limit = 0;
  double lr = 0.01, momentum = 0.9, weight_decay = 0;
  std::string schedule = "constant";  // or "cosine": CosineAnnealingLR over the epochs, stepped per epoch
  uint64_t seed = 1;
  std::string device = "auto", data, dataset = "mnist";
  std::string precision = "fp32";  // fp32, tf32, bf16 or fp16 (apps/common/precision.h)
  int threads = 0, log_interval = 100;
  bool cuda_graph = true;
  bool detect_anomaly = false, deterministic = false;  // set_detect_anomaly, set_deterministic
  bool memory_report = false;  // one line of memory readings after every epoch
  bool distributed = false;    // one process of a data-parallel job (scripts/launch.sh)
  std::string save, resume;  // checkpoint paths (optim/checkpoint.h)
  std::string metrics, title;  // --metrics folder for the curves (apps/common/metrics.h); the app's description
};

/// Parses pytorch/examples-style flags over an app's defaults; prints usage and exits 0 on --help, or
/// exits 2 on a bad flag or a --save, --resume or --metrics path the run could not use (cli.h).
inline Flags parse_flags(int argc, char** argv, const std::string& description, Flags defaults) {
  Flags f = std::move(defaults);
  f.title = description;
  CLI::App app(description);
  app.add_option("--epochs", f.epochs, "number of epochs to train")->check(at_least(1))->capture_default_str();
  app.add_option("--batch-size", f.batch_size, "training batch size")->check(at_least(1))->capture_default_str();
  app.add_option("--test-batch-size", f.test_batch_size, "evaluation batch size")->check(at_least(1))->capture_default_str();
  app.add_option("--lr", f.lr, "learning rate")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  app.add_option("--momentum", f.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "SGD weight decay")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--schedule", f.schedule, "learning rate schedule: constant, or cosine over the epochs")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  app.add_option("--seed", f.seed, "random seed")->capture_default_str();
  app.add_option("--device", f.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--data", f.data, "data folder (default: $MINIDL_DATA, else <repo>/datasets)");
  add_precision_option(app, f.precision);
  app.add_option("--dataset", f.dataset, "mnist or fashion-mnist")->check(CLI::IsMember({"mnist", "fashion-mnist"}))->capture_default_str();
  app.add_option("--limit", f.limit, "train on the first N images only (0: all)")->check(at_least(0));
  app.add_option("--threads", f.threads, "CPU threads (0: all cores)")->check(at_least(0));
  app.add_option("--log-interval", f.log_interval, "batches between progress updates")->check(at_least(1))->capture_default_str();
  app.add_option("--save", f.save, "write a checkpoint (model, optimizer, position) here after every epoch")
      ->check(writable_file());
  app.add_option("--resume", f.resume, "continue the run of this checkpoint (of --save) at its next epoch")
      ->check(readable_file());
  app.add_option("--metrics", f.metrics, "write epochs.csv, steps.csv and curves.svg to this folder after every epoch")
      ->check(writable_folder());
  app.add_flag("--cuda-graph,!--no-cuda-graph", f.cuda_graph,
               "on cuda, capture the training step once as a CUDA graph and replay it (default on)");
  app.add_flag("--detect-anomaly", f.detect_anomaly,
               "stop at the first op whose forward or backward makes a NaN or infinity, naming it (slow; no CUDA graph)");
  app.add_flag("--deterministic", f.deterministic, "on cuda, bit-identical results run to run (slower paths)");
  app.add_flag("--memory-report", f.memory_report,
               "after every epoch, print the host's resident memory and the device allocator's bytes in use and held");
  app.add_flag("--distributed", f.distributed,
               "one process of a data-parallel job on several GPUs, started by scripts/launch.sh (RANK, WORLD_SIZE, "
               "LOCAL_RANK, MASTER_ADDR, MASTER_PORT); --batch-size is per process, rank 0 prints");
  parse_or_exit(app, argc, argv);
  return f;
}

inline Flags parse_flags(int argc, char** argv, const std::string& description, int default_epochs) {
  Flags defaults;
  defaults.epochs = default_epochs;
  return parse_flags(argc, argv, description, std::move(defaults));
}

/// "auto" is cuda when a GPU is usable; an explicit cuda request fails with the reason when not.
inline Device resolve_device(const std::string& spec) {
  if (spec == "auto") return cuda::is_available() ? Device::cuda() : Device::cpu();
  Device device(spec);
  if (device.is_cuda()) {
    MINIDL_CHECK(cuda::is_available(), "--device ", spec, " requested but no GPU is usable: ", cuda::unavailable_reason());
    MINIDL_CHECK(device.index < cuda::device_count(), "--device ", spec, ": only ", cuda::device_count(), " CUDA device(s)");
  }
  return device;
}

/// With --distributed: joins the job scripts/launch.sh started and returns this process's GPU,
/// cuda:LOCAL_RANK (a --device other than auto or cuda is an error); otherwise resolve_device.
inline Device training_device(const std::string& spec, bool distributed) {
  if (!distributed) return resolve_device(spec);
  MINIDL_CHECK(spec == "auto" || spec == "cuda", "--distributed trains each process on its GPU cuda:LOCAL_RANK "
               "(NCCL); leave out --device ", spec);
  distributed::init();
  return distributed::group().device();
}

inline std::shared_ptr<data::MNIST> load(const Flags& f, bool train) {
  auto root = data::data_root(f.data);
  if (f.dataset == "fashion-mnist") return std::make_shared<data::FashionMNIST>(root, train);
  return std::make_shared<data::MNIST>(root, train);
}

/// The first `limit` examples of `dataset`.
inline std::shared_ptr<const data::Dataset> first(const std::shared_ptr<data::MNIST>& dataset, int64_t limit) {
  Tensor index = arange(static_cast<double>(limit), kInt64);
  return std::make_shared<data::TensorDataset>(index_select(dataset->images(), index),
                                               index_select(dataset->targets(), index));
}

/// Batches of an epoch trained so far (set before the epoch when a resumed run skips them), and
/// whether Ctrl-C or SIGTERM stopped the epoch (apps/common/interrupt.h).
struct EpochState {
  int64_t batches_done = 0;
  bool interrupted = false;
  // A resumed epoch: the generator as the checkpoint left it. The loader draws its workers' base
  // seed when the epoch begins, a draw the interrupted run made before saving; putting the state
  // back after it keeps the training thread's stream where the uninterrupted run has it.
  std::optional<Generator::State> generator;
};

/// Starts the loader's next epoch. For a resumed epoch (`state` holding the checkpoint's generator),
/// puts that generator back once the epoch has drawn its workers' base seed.
inline data::DataLoader::Iterator begin_epoch(data::DataLoader& loader, EpochState* state) {
  data::DataLoader::Iterator it = loader.begin();
  if (state && state->generator) {
    default_generator().set_state(*state->generator);
    state->generator.reset();
  }
  return it;
}

/// One epoch of `train_step` (zero_grad, forward, loss, backward, SGD step; graphed on cuda). With
/// `metrics`, logs the loss at each log point and returns the epoch's mean training loss (NaN without).
/// With `state`, skips the batches it says are done and stops after the step in flight on Ctrl-C or
/// SIGTERM.
template <class Model>
double train_epoch(Model& model, data::DataLoader& loader, cuda::GraphedStep& train_step, int epoch, const Flags& f,
                   int64_t num_images, MetricsLog* metrics = nullptr, EpochState* state = nullptr) {
  model.train();
  ProgressBar bar(epoch, num_images);
  int64_t seen = 0, step = 0, trained = 0;
  const int64_t skip = state ? state->batches_done : 0;
  Tensor loss_sum;  // summed on the device: one small kernel per step, no synchronization
  for (data::DataLoader::Iterator it = begin_epoch(loader, state); it != loader.end(); ++it) {
    data::Batch& batch = *it;
    if (step < skip) {  // trained before the run was interrupted: same order, so the same batches
      ++step, seen += batch.data.size(0);
      continue;
    }
    Tensor loss = train_step(batch.data, batch.target);
    seen += batch.data.size(0), trained += batch.data.size(0);
    if (metrics) {
      // In units of full batches; a graphed step's loss is overwritten by the next replay, hence the clone.
      Tensor l = loss.detach();
      if (batch.data.size(0) != f.batch_size) l = l * (static_cast<double>(batch.data.size(0)) / f.batch_size);
      if (loss_sum.defined()) loss_sum += l;
      else loss_sum = l.clone();
    }
    // Reading the loss waits for the device: only at log points.
    if (++step % f.log_interval == 0 || seen == num_images) {
      const float value = loss.item<float>();
      bar.update(seen, value);
      if (metrics) metrics->add_step(epoch, step, seen, value);
      // Training on after the loss has left the numbers (--lr 10 does it) only wastes the run and
      // ends in chance accuracy with exit status 0.
      MINIDL_CHECK(std::isfinite(value), "training diverged: the loss is ", value, " at epoch ", epoch, ", step ", step,
                   " (checked every --log-interval ", f.log_interval, " steps); try a lower --lr than ", f.lr);
    }
    if (state && interrupted() && step < loader.size()) {  // after the last step, the epoch ends as usual
      state->batches_done = step;
      state->interrupted = true;
      break;
    }
  }
  bar.finish();
  return loss_sum.defined() ? loss_sum.item<double>() * static_cast<double>(f.batch_size) / trained : NAN;
}

struct TestResult {
  double loss, accuracy;  // mean cross-entropy; percent correct
};

/// Test loss and accuracy, the forward in the training's precision (autocast for bf16 and fp16, as
/// a PyTorch user evaluates), the loss and the argmax on its float32 logits.
template <class Model>
TestResult test(Model& model, data::DataLoader& loader, int64_t num_images, double train_seconds,
                Precision precision = Precision::Fp32) {
  NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0;
  for (data::Batch& batch : loader) {
    Tensor output;
    {
      ForwardPrecision autocast(precision, batch.data.device());
      output = model.forward(batch.data);
    }
    output = output.to(kFloat32);
    loss_sum += nn::functional::cross_entropy(output, batch.target).item<float>() * batch.data.size(0);
    correct += eq(argmax(output, 1), batch.target).sum().template item<int64_t>();
  }
  std::printf("Test set: average loss %.4f, accuracy %lld/%lld (%.2f%%), epoch time %.1f s\n", loss_sum / num_images,
              static_cast<long long>(correct), static_cast<long long>(num_images), 100.0 * correct / num_images,
              train_seconds);
  std::fflush(stdout);
  return {loss_sum / num_images, 100.0 * correct / num_images};
}

/// One line of readings after `epoch`, to show memory staying flat over a long run: the process's
/// resident set, the training device's allocator (bytes handed out and bytes taken from the system,
/// its cache included) and the autograd tape, which must be empty between steps.
inline void report_memory(int epoch, Device device) {
  double resident_mb = 0;
  std::ifstream status("/proc/self/status");
  std::string key;
  for (double kb; status >> key;)
    if (key == "VmRSS:" && status >> kb) resident_mb = kb / 1024;
  const MemoryStats m = memory_stats(device);
  std::printf("memory after epoch %d: host resident %.1f MB, %s in use %zu bytes, held %zu bytes, tape %zu\n", epoch,
              resident_mb, device.str().c_str(), m.bytes_in_use, m.bytes_held, autograd::tape_size());
  std::fflush(stdout);
}

/// Loads the checkpoint `path` and puts the schedule and the data order where they stood after its
/// epoch, so that the run goes on as if it had never stopped. Returns the epoch to train next; a
/// checkpoint of an interrupted epoch also sets `batches_done`, the batches of it to skip.
inline int resume_from(const std::string& path, nn::Module& model, optim::Optimizer& optimizer,
                       optim::LRScheduler* schedule, data::DataLoader& loader, EpochState* state = nullptr) {
  const int64_t done = batches_done_in(path);
  MINIDL_CHECK(done < loader.size(), path, ": ", done, " batches of its interrupted epoch were trained, but an epoch "
               "has ", loader.size(), " here; resume with the --batch-size and --limit of the interrupted run");
  optim::TrainingPosition at = optim::load_checkpoint(path, model, optimizer);
  // The schedule counts the epochs done. Each step scales the rate a group has now, which the
  // checkpoint already holds: the saved rates are put back after, or the schedule would apply twice.
  std::vector<std::optional<double>> saved_lr;
  for (const optim::ParamGroup& g : optimizer.param_groups()) saved_lr.push_back(g.lr);
  for (int64_t e = 0; schedule && e < at.epoch; ++e) schedule->step();
  for (size_t g = 0; g < saved_lr.size(); ++g) optimizer.param_groups()[g].lr = saved_lr[g];
  loader.set_epoch(at.epoch);
  if (state) {
    state->batches_done = done;
    if (done > 0) state->generator = at.rng;
  }
  if (done > 0) {
    std::printf("resumed from %s in epoch %lld after %lld of its batches (step %lld)\n", path.c_str(),
                static_cast<long long>(at.epoch + 1), static_cast<long long>(done), static_cast<long long>(at.step));
  } else {
    std::printf("resumed from %s after epoch %lld (step %lld)\n", path.c_str(), static_cast<long long>(at.epoch),
                static_cast<long long>(at.step));
  }
  return static_cast<int>(at.epoch) + 1;
}

/// --detect-anomaly and --deterministic, for the lifetime of a run.
class RunModes {
 public:
  explicit RunModes(const Flags& f) : anomaly_(f.detect_anomaly || is_anomaly_enabled()), deterministic_(is_deterministic()) {
    if (f.deterministic) set_deterministic(true);
  }
  ~RunModes() { set_deterministic(deterministic_); }
  RunModes(const RunModes&) = delete;
  RunModes& operator=(const RunModes&) = delete;

 private:
  DetectAnomalyGuard anomaly_;
  bool deterministic_;  // as it was before
};

/// Trains `model` with SGD under the flags and reports test accuracy after every epoch.
template <class Model>
int run(std::shared_ptr<Model> model, const Flags& f) {
  InterruptGuard interrupt;
  RunModes modes(f);
  const Precision precision = parse_precision(f.precision);
  PrecisionScope tf32(precision);
  if (f.threads > 0) set_num_threads(f.threads);
  const Device device = training_device(f.device, f.distributed);
  // One report for the job: the other ranks train as rank 0 does and keep quiet (errors still reach stderr).
  if (distributed::rank() != 0 && !std::freopen("/dev/null", "w", stdout)) std::perror("/dev/null");
  auto train_set = load(f, true);
  auto test_set = load(f, false);
  std::shared_ptr<const data::Dataset> train_data = train_set;
  if (f.limit > 0 && f.limit < train_set->size()) train_data = first(train_set, f.limit);
  std::printf("%s: %lld training / %lld test images from %s, device %s, %d CPU threads, precision %s\n",
              f.dataset.c_str(), static_cast<long long>(train_data->size()), static_cast<long long>(test_set->size()),
              train_set->folder().c_str(), device.str().c_str(), get_num_threads(),
              precision_description(precision).c_str());
  std::fflush(stdout);

  auto train_options = data::DataLoaderOptions().batch_size(f.batch_size).seed(f.seed).device(device);
  if (f.distributed)  // this rank's share of each shuffled epoch
    train_options.sampler(std::make_shared<data::DistributedSampler>(train_data->size(), distributed::world_size(),
                                                                      distributed::rank(), true, f.seed));
  else
    train_options.shuffle(true);
  data::DataLoader train_loader(train_data, train_options);
  const int64_t images_per_epoch = f.distributed ? train_options.sampler()->size() : train_data->size();  // this rank's
  data::DataLoader test_loader(test_set, data::DataLoaderOptions().batch_size(f.test_batch_size).device(device));
  model->to(device);
  std::shared_ptr<nn::Module> trained = model;  // what the training step runs: the model, or DDP around it
  if (f.distributed) trained = std::make_shared<distributed::DistributedDataParallel>(model);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(f.lr).momentum(f.momentum).weight_decay(f.weight_decay));
  std::unique_ptr<optim::CosineAnnealingLR> schedule;
  if (f.schedule == "cosine") schedule = std::make_unique<optim::CosineAnnealingLR>(optimizer, f.epochs);
  // fp16's scaler multiplies the loss before backward, and unscales, skips and updates in the step;
  // a checkpoint keeps its scale.
  optim::GradScaler scaler(grad_scaler_options(precision));
  EpochState state;
  const int first_epoch =
      f.resume.empty() ? 1 : resume_from(f.resume, *model, optimizer, schedule.get(), train_loader, &state);
  if (!f.resume.empty()) restore_scaler(scaler, f.resume);
  // Autocast covers the forward and the loss only, as in PyTorch: backward runs each op in the type
  // its forward ran in, and the SGD step updates the float32 weights.
  auto loss_fn = [trained, precision, device](const std::vector<Tensor>& in) {
    ForwardPrecision autocast(precision, device);
    return nn::functional::cross_entropy(trained->forward(in.at(0)), in.at(1));
  };
  // Anomaly mode reads every result on the host, which a graph capture cannot.
  cuda::GraphedStep train_step(
      loss_fn, optimizer,
      cuda::GraphedStepOptions().enabled(f.cuda_graph && !f.detect_anomaly).grad_scaler(step_scaler(scaler)));
  std::unique_ptr<MetricsLog> metrics;
  if (!f.metrics.empty())
    metrics = std::make_unique<MetricsLog>(
        f.metrics, f.title + " (" + f.dataset + ", " + precision_name(precision) + ")", first_epoch);
  for (int epoch = first_epoch; epoch <= f.epochs; ++epoch) {
    // A signal during the evaluation or the save stops here; one before training began, after the first step.
    if (epoch > first_epoch && interrupted())
      return stop_after_interrupt(f.save, *model, optimizer, epoch, 0, train_loader.size(), scaler_metadata(scaler));
    ProgressBar timer(epoch, 0);
    const double lr = optimizer.lr();
    const double train_loss =
        train_epoch(*model, train_loader, train_step, epoch, f, images_per_epoch, metrics.get(), &state);
    if (state.interrupted)
      return stop_after_interrupt(f.save, *model, optimizer, epoch, state.batches_done, train_loader.size(),
                                  scaler_metadata(scaler));
    state.batches_done = 0;
    double seconds = timer.elapsed();
    if (schedule) schedule->step();
    const TestResult result = test(*model, test_loader, test_set->size(), seconds, precision);
    if (metrics) metrics->add_epoch({epoch, train_loss, result.loss, result.accuracy, seconds, lr});
    if (f.memory_report) report_memory(epoch, device);
    if (!f.save.empty() && distributed::rank() == 0)  // the replicas are identical: one writer
      optim::save_checkpoint(f.save, *model, optimizer, {epoch, epoch * train_loader.size()}, scaler_metadata(scaler));
  }
  return 0;
}

/// Runs `body`, turning a minidl::Error into a message and exit status 1.
template <class Body>
int guarded_main(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace mnist_app
