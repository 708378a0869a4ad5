// char_gpt: nanoGPT's character-level GPT (train.py with config/train_shakespeare_char.py, and
// sample.py) on any UTF-8 text, by default the fortunes corpus of scripts/get_data.sh --text.
//
//   build/char_gpt --device cuda --checkpoint gpt.safetensors --metrics runs/gpt
//   build/char_gpt --device cpu --n-layer 2 --n-head 4 --n-embd 64 --block-size 64 --batch-size 16 --max-iters 500
//   build/char_gpt --checkpoint gpt.safetensors --sample "Q: " --max-new-tokens 300
//   build/char_gpt --device cuda --precision bf16 --profile      (the kernels of one step and their time)
//
// Every iteration draws a batch (random windows, data/text.h), sets the learning rate (linear
// warm-up, then cosine down to --min-lr) and runs one training step: forward, cross-entropy,
// backward, gradient clipping and AdamW, captured once as a CUDA graph and replayed on cuda (the
// fused AdamW keeps its step count and learning rate on the device, so the schedule needs no eager step).
// Every --eval-interval iterations, and after the last, the mean loss of --eval-iters batches of
// each split is printed (and written to --metrics, and the checkpoint saved).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "apps/common/gpt.h"
#include "apps/common/gpu_report.h"
#include "apps/common/mnist_app.h"
#include "core/cuda.h"
#include "core/safetensors.h"
#include "data/paths.h"
#include "data/text.h"
#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace char_gpt {

using mnist_app::at_least;
using mnist_app::ForwardPrecision;
using mnist_app::Precision;
using mnist_app::precision_description;

struct Flags {
  std::string device = "auto", precision = "fp32", data;
  int64_t max_iters = 5000, eval_interval = 250, eval_iters = 200, log_interval = 10;
  int64_t batch_size = 64, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384;
  double dropout = 0.2;
  bool bias = false;
  int64_t keep_gelu_outputs = -1;  // -1: every block under bf16 or fp16 autocast, none otherwise
  double lr = 1e-3, min_lr = 1e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.99, grad_clip = 1.0;
  int64_t warmup_iters = 100;
  uint64_t seed = 1337;
  int threads = 0;
  bool cuda_graph = true, profile = false;
  std::string checkpoint, resume, metrics;
  std::string sample;  // a prompt: generate from the checkpoint instead of training
  bool sampling = false;
  int64_t max_new_tokens = 500, top_k = 200;
  double temperature = 0.8;
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  CLI::App app("char_gpt: nanoGPT's character-level GPT (shakespeare-char defaults) on a UTF-8 text");
  app.add_option("--device", f.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  mnist_app::add_precision_option(app, f.precision);
  app.add_option("--data", f.data, "the UTF-8 text to train on (default: <data folder>/text/fortunes.txt, "
                 "from scripts/get_data.sh --text)");
  app.add_option("--max-iters", f.max_iters, "training iterations")->check(at_least(0))->capture_default_str();
  app.add_option("--eval-interval", f.eval_interval, "iterations between evaluations")
      ->check(at_least(1))->capture_default_str();
  app.add_option("--eval-iters", f.eval_iters, "batches of each split per evaluation")
      ->check(at_least(1))->capture_default_str();
  app.add_option("--log-interval", f.log_interval, "iterations between training-loss lines")
      ->check(at_least(1))->capture_default_str();
  app.add_option("--batch-size", f.batch_size, "sequences per batch")->check(at_least(1))->capture_default_str();
  app.add_option("--block-size", f.block_size, "context length")->check(at_least(1))->capture_default_str();
  app.add_option("--n-layer", f.n_layer, "transformer blocks")->check(at_least(1))->capture_default_str();
  app.add_option("--n-head", f.n_head, "attention heads")->check(at_least(1))->capture_default_str();
  app.add_option("--n-embd", f.n_embd, "embedding width (a multiple of --n-head)")
      ->check(at_least(1))->capture_default_str();
  app.add_option("--dropout", f.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99))->capture_default_str();
  app.add_flag("--bias,!--no-bias", f.bias, "biases in the Linear and LayerNorm layers (nanoGPT's default: none)");
  app.add_option("--keep-gelu-outputs", f.keep_gelu_outputs,
                 "the last blocks whose MLP saves its GELU's output for the backward instead of making it again "
                 "(memory for time; default: every block under --precision bf16 or fp16, else 0)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  app.add_option("--lr", f.lr, "peak learning rate")->check(CLI::Range(0.0, 10.0))->capture_default_str();
  app.add_option("--min-lr", f.min_lr, "learning rate at the end of the cosine decay")
      ->check(CLI::Range(0.0, 10.0))->capture_default_str();
  app.add_option("--warmup-iters", f.warmup_iters, "iterations of linear warm-up")
      ->check(at_least(0))->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "AdamW weight decay of the 2-D weights")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--beta2", f.beta2, "AdamW's beta2")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--grad-clip", f.grad_clip, "clip the gradients' global norm to this (0: no clipping)")
      ->check(CLI::Range(0.0, 1e9))->capture_default_str();
  app.add_option("--seed", f.seed, "random seed")->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads (0: all cores)")->check(at_least(0));
  app.add_flag("--cuda-graph,!--no-cuda-graph", f.cuda_graph,
               "on cuda, capture the training step as a CUDA graph (default on)");
  app.add_flag("--profile", f.profile, "on cuda, list each kernel of one training step and its time (CUPTI), "
               "then stop instead of training");
  app.add_option("--checkpoint", f.checkpoint, "write the model, optimizer, vocabulary and position here at every "
                 "evaluation (atomically); with --sample, the checkpoint to generate from")
      ->check(mnist_app::writable_file());
  app.add_option("--resume", f.resume, "continue the run of this checkpoint")->check(mnist_app::readable_file());
  app.add_option("--metrics", f.metrics, "append one JSON line per evaluation to DIR/metrics.jsonl")
      ->check(mnist_app::writable_folder());
  CLI::Option* sample = app.add_option("--sample", f.sample, "generate text after this prompt from the checkpoint "
                                       "(--checkpoint or --resume) instead of training");
  app.add_option("--max-new-tokens", f.max_new_tokens, "characters to generate")
      ->check(at_least(1))->capture_default_str();
  app.add_option("--temperature", f.temperature, "divides the logits before sampling")
      ->check(CLI::Range(1e-6, 100.0))->capture_default_str();
  app.add_option("--top-k", f.top_k, "sample among the k likeliest characters (0: all)")
      ->check(at_least(0))->capture_default_str();
  mnist_app::parse_or_exit(app, argc, argv);
  f.sampling = sample->count() > 0;
  return f;
}

/// nanoGPT's get_lr: linear warm-up to lr over warmup_iters, then half a cosine down to min_lr at
/// max_iters (its lr_decay_iters).
double lr_at(int64_t it, const Flags& f) {
  if (it < f.warmup_iters) return f.lr * static_cast<double>(it + 1) / static_cast<double>(f.warmup_iters + 1);
  if (it >= f.max_iters) return f.min_lr;
  const double ratio = static_cast<double>(it - f.warmup_iters) / static_cast<double>(f.max_iters - f.warmup_iters);
  return f.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (f.lr - f.min_lr);
}

// As nanoGPT writes it: under autocast the loss runs in float32 (its policy), its kernel reading the
// 16-bit logits itself, where a cast first took a pass of its own each way.
Tensor loss_of(Gpt& model, const Tensor& x, const Tensor& y) {
  Tensor logits = model.forward(x);
  return nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), y.view({-1}));
}

struct Losses {
  double train, val;
};

/// nanoGPT's estimate_loss: the mean loss of eval_iters batches of each split, in eval mode.
Losses estimate_loss(Gpt& model, const data::CharCorpus& corpus, const Flags& f, Device device, Precision precision) {
  NoGradGuard no_grad;
  model.eval();
  double mean[2];
  for (data::Split split : {data::Split::Train, data::Split::Val}) {
    Tensor sum = zeros({}, TensorOptions().device(device));
    for (int64_t k = 0; k < f.eval_iters; ++k) {
      auto [x, y] = corpus.get_batch(split, f.batch_size, model.config.block_size, device);
      ForwardPrecision autocast(precision, device);
      sum += loss_of(model, x, y);
    }
    mean[split == data::Split::Val] = sum.item<double>() / static_cast<double>(f.eval_iters);
  }
  model.train();
  return {mean[0], mean[1]};
}

// ---- checkpoints: the model's configuration and vocabulary in the metadata ----

constexpr const char* kVocabKey = "app.char_gpt.vocab";

safetensors::Metadata checkpoint_metadata(const GptConfig& c, const data::CharVocabulary& vocab) {
  return {{"app.char_gpt.vocab_size", std::to_string(c.vocab_size)},
          {"app.char_gpt.block_size", std::to_string(c.block_size)},
          {"app.char_gpt.n_layer", std::to_string(c.n_layer)},
          {"app.char_gpt.n_head", std::to_string(c.n_head)},
          {"app.char_gpt.n_embd", std::to_string(c.n_embd)},
          {"app.char_gpt.bias", c.bias ? "1" : "0"},
          {kVocabKey, vocab.characters()}};
}

int64_t metadata_int(const safetensors::Metadata& m, const std::string& path, const std::string& key) {
  auto it = m.find(key);
  MINIDL_CHECK(it != m.end(), path, ": not a char_gpt checkpoint (no metadata \"", key, "\")");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    MINIDL_FAIL(path, ": metadata \"", key, "\" is \"", it->second, "\", expected a whole number");
  }
}

/// The configuration and vocabulary a checkpoint was trained with (dropout is the caller's).
std::pair<GptConfig, data::CharVocabulary> read_checkpoint_model(const std::string& path) {
  const safetensors::Metadata m = safetensors::load(path).metadata;
  GptConfig c;
  c.vocab_size = metadata_int(m, path, "app.char_gpt.vocab_size");
  c.block_size = metadata_int(m, path, "app.char_gpt.block_size");
  c.n_layer = metadata_int(m, path, "app.char_gpt.n_layer");
  c.n_head = metadata_int(m, path, "app.char_gpt.n_head");
  c.n_embd = metadata_int(m, path, "app.char_gpt.n_embd");
  c.bias = metadata_int(m, path, "app.char_gpt.bias") != 0;
  auto vocab_it = m.find(kVocabKey);
  MINIDL_CHECK(vocab_it != m.end(), path, ": not a char_gpt checkpoint (no metadata \"", kVocabKey, "\")");
  data::CharVocabulary vocab = data::CharVocabulary::from_characters(vocab_it->second);
  MINIDL_CHECK(vocab.size() == c.vocab_size, path, ": the vocabulary has ", vocab.size(),
               " characters but vocab_size is ", c.vocab_size);
  return {c, std::move(vocab)};
}

/// nanoGPT's AdamW: weight decay on the 2-D weights only (Gpt::param_groups).
std::unique_ptr<optim::AdamW> make_optimizer(Gpt& model, const Flags& f) {
  auto options = optim::AdamOptions(f.lr).betas({f.beta1, f.beta2}).weight_decay(f.weight_decay);
  return std::make_unique<optim::AdamW>(model.param_groups(), options);
}

// ---- sampling ----

/// nanoGPT's generate: crop the context to block_size, take the last position's logits / temperature,
/// keep the top k, softmax, draw one id, append; max_new_tokens times.
std::vector<int64_t> generate(Gpt& model, std::vector<int64_t> ids, const Flags& f, Device device,
                              Precision precision) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t vocab = model.config.vocab_size;
  for (int64_t n = 0; n < f.max_new_tokens; ++n) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - model.config.block_size);
    std::vector<int64_t> context(ids.begin() + start, ids.end());
    Tensor x = Tensor::from_vector(context, {1, static_cast<int64_t>(context.size())}).to(device);
    Tensor logits;
    {
      ForwardPrecision autocast(precision, device);
      logits = model.forward(x);
    }
    logits = logits.select(1, logits.size(1) - 1).to(kFloat32) / f.temperature;  // [1, V]
    if (f.top_k > 0 && f.top_k < vocab) {
      auto [top, where] = topk(logits, f.top_k);
      logits = masked_fill(logits, lt(logits, top.narrow(1, f.top_k - 1, 1)), -INFINITY);
    }
    ids.push_back(multinomial(softmax(logits, -1), 1).item<int64_t>());
  }
  return ids;
}

int sample(const Flags& f, Device device, Precision precision) {
  const std::string path = f.resume.empty() ? f.checkpoint : f.resume;
  MINIDL_CHECK(!path.empty(), "--sample generates from a checkpoint: give it with --checkpoint FILE");
  MINIDL_CHECK(std::filesystem::is_regular_file(path), "--sample: cannot read the checkpoint ", path);
  MINIDL_CHECK(!f.sample.empty(), "--sample: the prompt is empty; give at least one character of the vocabulary");
  auto [config, vocab] = read_checkpoint_model(path);
  config.dropout = 0;
  std::vector<int64_t> prompt;
  try {
    prompt = vocab.encode(f.sample);
  } catch (const Error& e) {
    MINIDL_FAIL("--sample \"", f.sample, "\": ", e.what());
  }
  auto model = std::make_shared<Gpt>(config);
  model->to(device);
  auto optimizer = make_optimizer(*model, f);
  optim::load_checkpoint(path, *model, *optimizer);
  manual_seed(f.seed);  // the checkpoint put back its own generator
  set_gemm_autotune(false);  // each new token is a new sequence length: timing every shape would cost more
  const std::vector<int64_t> ids = generate(*model, prompt, f, device, precision);
  std::printf("%s\n", vocab.decode(ids).c_str());
  return 0;
}

// ---- training ----

/// Appends one JSON object per line to DIR/metrics.jsonl.
class JsonLines {
 public:
  JsonLines(const std::string& dir, bool keep) {
    if (dir.empty()) return;
    std::filesystem::create_directories(dir);
    const std::string path = (std::filesystem::path(dir) / "metrics.jsonl").string();
    file_ = std::fopen(path.c_str(), keep ? "a" : "w");
    MINIDL_CHECK(file_, "cannot write ", path);
  }
  ~JsonLines() {
    if (file_) std::fclose(file_);
  }
  JsonLines(const JsonLines&) = delete;
  JsonLines& operator=(const JsonLines&) = delete;
  void write(const std::string& line) {
    if (!file_) return;
    std::fprintf(file_, "%s\n", line.c_str());
    std::fflush(file_);
  }

 private:
  std::FILE* file_ = nullptr;
};

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

int train(const Flags& f, Device device, Precision precision) {
  mnist_app::InterruptGuard interrupt;  // Ctrl-C or SIGTERM: stop after the step in flight, saving the checkpoint
  const std::filesystem::path data_path =
      f.data.empty() ? data::data_root() / "text" / "fortunes.txt" : std::filesystem::path(f.data);
  const data::CharCorpus corpus = data::CharCorpus::from_file(data_path);

  GptConfig config{.vocab_size = corpus.vocab().size(), .block_size = f.block_size, .n_layer = f.n_layer,
                   .n_head = f.n_head, .n_embd = f.n_embd, .dropout = f.dropout, .bias = f.bias};
  if (!f.resume.empty()) {  // the checkpoint's model, on the same characters
    auto [saved, vocab] = read_checkpoint_model(f.resume);
    MINIDL_CHECK(vocab.characters() == corpus.vocab().characters(), f.resume, ": its vocabulary (", vocab.size(),
                 " characters) is not the one of ", data_path.string(), " (", corpus.vocab().size(), ")");
    saved.dropout = f.dropout;
    config = saved;
  }
  // Every block where it pays: in bfloat16 on an H100 the default config's step ran 1.5% faster with
  // six than with four, at a peak of 1,650 MB, under PyTorch's compiled step's 1,740, since the
  // backward frees each op's saved tensors as it goes; in float32 two bought nothing (0.07%) for 201
  // MB (docs/benchmarks.md, thirty-fifth and twenty-first sections).
  const bool low = precision == Precision::Bf16 || precision == Precision::Fp16;
  config.mlps_keeping_gelu_output = f.keep_gelu_outputs >= 0 ? f.keep_gelu_outputs : low ? config.n_layer : 0;
  manual_seed(f.seed);
  auto model = std::make_shared<Gpt>(config);
  model->to(device);
  auto optimizer = make_optimizer(*model, f);
  int64_t first_iter = 0;
  if (!f.resume.empty()) {
    first_iter = optim::load_checkpoint(f.resume, *model, *optimizer).step;
    std::printf("resumed from %s after iteration %lld\n", f.resume.c_str(), static_cast<long long>(first_iter));
  }
  const int64_t tokens_per_iter = f.batch_size * config.block_size;
  std::printf("char_gpt: %s, %lld characters (%lld train, %lld val), vocabulary %lld; %lld layers, %lld heads, "
              "width %lld, context %lld, %.2fM parameters; batch %lld (%lld tokens/iteration); device %s, %d CPU "
              "threads, precision %s\n",
              data_path.c_str(), static_cast<long long>(corpus.size()),
              static_cast<long long>(corpus.split_size(data::Split::Train)),
              static_cast<long long>(corpus.split_size(data::Split::Val)), static_cast<long long>(config.vocab_size),
              static_cast<long long>(config.n_layer), static_cast<long long>(config.n_head),
              static_cast<long long>(config.n_embd), static_cast<long long>(config.block_size),
              model->num_parameters() / 1e6, static_cast<long long>(f.batch_size),
              static_cast<long long>(tokens_per_iter), device.str().c_str(), get_num_threads(),
              precision_description(precision).c_str());
  std::fflush(stdout);

  optim::GradScaler scaler(mnist_app::grad_scaler_options(precision));
  if (!f.resume.empty()) mnist_app::restore_scaler(scaler, f.resume);
  // The step draws its batch itself, inside the CUDA graph on cuda (each replay draws afresh), so
  // that nothing but a changed learning rate runs eagerly between steps.
  const int64_t batch_size = f.batch_size, block_size = config.block_size;
  auto loss_fn = [&model, &corpus, precision, device, batch_size, block_size](const std::vector<Tensor>&) {
    auto [x, y] = corpus.get_batch(data::Split::Train, batch_size, block_size, device);
    ForwardPrecision autocast(precision, device);
    return loss_of(*model, x, y);
  };
  // nanoGPT clips between backward and the step (after unscaling, with a scaler): the step does it,
  // inside the graph on cuda.
  auto step_options = cuda::GraphedStepOptions().enabled(f.cuda_graph).grad_scaler(mnist_app::step_scaler(scaler));
  if (f.grad_clip > 0) step_options.clip_grad_norm(f.grad_clip);
  cuda::GraphedStep train_step(loss_fn, *optimizer, step_options);
  if (f.profile) {
    MINIDL_CHECK(device.is_cuda(), "--profile reports the kernels of a step on cuda; the device is ", device.str());
    // Each profiled iteration is the training loop's: the learning rate, a fresh batch, the step.
    auto iteration = [&](int64_t it) {
      for (optim::ParamGroup& g : optimizer->param_groups()) g.lr = lr_at(it, f);
      train_step();
    };
    // The first steps run eagerly, the next captures the graph: the profiled steps replay it.
    int64_t it = 0;
    while (it < 3 || (it < 8 && f.cuda_graph && !train_step.graphed())) iteration(it++);
    mnist_app::report_gpu_time([&](int) { iteration(it++); },
                               train_step.graphed() ? "one CUDA graph per step" : "eager (no CUDA graph)", true);
    return 0;
  }
  JsonLines metrics(f.metrics, !f.resume.empty());
  auto save = [&](int64_t iter) {
    if (f.checkpoint.empty()) return;
    safetensors::Metadata metadata = checkpoint_metadata(config, corpus.vocab());
    for (auto& [key, value] : mnist_app::scaler_metadata(scaler)) metadata[key] = value;
    optim::save_checkpoint(f.checkpoint, *model, *optimizer, {0, iter}, metadata);
  };

  // Tokens/s counts the training steps only (not the evaluations), from the 10th step of the run on:
  // the first steps warm the caches and capture the graph.
  using Clock = std::chrono::steady_clock;
  const int64_t timing_start = first_iter + std::min<int64_t>(10, std::max<int64_t>(0, f.max_iters - first_iter - 1));
  double timed_seconds = 0;
  int64_t timed_iters = 0;
  Clock::time_point segment_start;
  int64_t segment_first = -1;  // the first timed iteration of the segment in flight
  auto close_segment = [&](int64_t it) {  // the steps since segment_start are done: read the clock after a sync
    if (segment_first < 0) return;
    cuda::synchronize();
    timed_seconds += std::chrono::duration<double>(Clock::now() - segment_start).count();
    timed_iters += it - segment_first;
    segment_first = -1;
  };
  const auto run_start = Clock::now();
  Losses last{NAN, NAN};
  for (int64_t it = first_iter;; ++it) {
    const bool last_iter = it >= f.max_iters;
    if ((it % f.eval_interval == 0 || last_iter) && !(it == first_iter && first_iter > 0)) {
      close_segment(it);
      last = estimate_loss(*model, corpus, f, device, precision);
      const double rate = timed_seconds > 0 ? timed_iters * tokens_per_iter / timed_seconds : NAN;
      const double lr = lr_at(it, f);  // of the step about to run
      std::printf("step %lld: train loss %.4f, val loss %.4f, lr %.3g", static_cast<long long>(it), last.train,
                  last.val, lr);
      if (std::isfinite(rate)) std::printf(", %.0f tokens/s", rate);
      std::printf("\n");
      std::fflush(stdout);
      metrics.write("{\"iter\": " + std::to_string(it) + ", \"train_loss\": " + number(last.train) +
                    ", \"val_loss\": " + number(last.val) + ", \"lr\": " + number(lr) +
                    ", \"tokens_per_s\": " + number(rate) + ", \"elapsed_s\": " +
                    number(std::chrono::duration<double>(Clock::now() - run_start).count()) + "}");
      MINIDL_CHECK(std::isfinite(last.train), "training diverged: the loss is ", last.train, " at iteration ", it,
                   "; try a lower --lr than ", f.lr);
      save(it);
    }
    if (last_iter) break;
    if (mnist_app::interrupted()) {
      close_segment(it);
      save(it);
      std::fprintf(stderr, "interrupted after iteration %lld; %s\n", static_cast<long long>(it),
                   f.checkpoint.empty() ? "no checkpoint written (--checkpoint PATH keeps one)"
                                        : ("checkpoint written to " + f.checkpoint + " (continue with --resume " +
                                           f.checkpoint + ")").c_str());
      return mnist_app::interrupted_status();
    }
    if (it >= timing_start && segment_first < 0) {
      cuda::synchronize();
      segment_start = Clock::now();
      segment_first = it;
    }
    for (optim::ParamGroup& g : optimizer->param_groups()) g.lr = lr_at(it, f);
    Tensor loss = train_step();
    if ((it + 1) % f.log_interval == 0) {
      const float value = loss.item<float>();
      std::printf("iter %lld: loss %.4f\n", static_cast<long long>(it + 1), value);
      std::fflush(stdout);
      MINIDL_CHECK(std::isfinite(value), "training diverged: the loss is ", value, " at iteration ", it + 1,
                   "; try a lower --lr than ", f.lr);
    }
  }
  const double rate = timed_seconds > 0 ? timed_iters * tokens_per_iter / timed_seconds : NAN;
  std::printf("done: val loss %.4f after %lld iterations; %.0f tokens/s over %lld timed iterations (%.1f s); "
              "training step %s (%lld replays, %lld eager steps%s); peak device memory %.1f MB\n",
              last.val, static_cast<long long>(f.max_iters), rate, static_cast<long long>(timed_iters), timed_seconds,
              train_step.graphed() ? "graphed" : "eager", static_cast<long long>(train_step.replays()),
              static_cast<long long>(train_step.eager_steps()),
              train_step.eager_reason().empty() ? "" : (": " + train_step.eager_reason()).c_str(),
              memory_stats(device).peak_bytes / 1e6);
  metrics.write("{\"final\": true, \"iter\": " + std::to_string(f.max_iters) + ", \"val_loss\": " + number(last.val) +
                ", \"train_loss\": " + number(last.train) + ", \"tokens_per_s\": " + number(rate) +
                ", \"timed_iters\": " + std::to_string(timed_iters) + ", \"graphed\": " +
                (train_step.graphed() ? "true" : "false") + "}");
  return 0;
}

}  // namespace char_gpt

int main(int argc, char** argv) {
  const char_gpt::Flags f = char_gpt::parse_flags(argc, argv);
  return mnist_app::guarded_main([&] {
    using namespace minidl;
    if (f.threads > 0) set_num_threads(f.threads);
    const mnist_app::Precision precision = mnist_app::parse_precision(f.precision);
    mnist_app::PrecisionScope tf32(precision);
    const Device device = mnist_app::resolve_device(f.device);
    return f.sampling ? char_gpt::sample(f, device, precision) : char_gpt::train(f, device, precision);
  });
}
