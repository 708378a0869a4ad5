#pragma once
// A whole training step (forward, loss, backward, optimizer update) captured once as a CUDA graph
// and replayed with one launch per step, as PyTorch's whole-network capture does by hand.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda_graph.h"
#include "core/tensor.h"
#include "optim/optimizer.h"

namespace minidl::optim {
class GradScaler;
}

namespace minidl::cuda {

struct GraphedStepOptions {
  /// Steps run eagerly before the capture: they create the optimizer's state (momentum buffers) and
  /// warm the caches, so that the captured step is a steady-state one.
  GraphedStepOptions& warmup(int steps) {
    warmup_ = steps;
    return *this;
  }
  /// false: every step runs eagerly (the same code path, for comparisons and debugging).
  GraphedStepOptions& enabled(bool on) {
    enabled_ = on;
    return *this;
  }
  /// Gradient accumulation: each call runs forward and backward on one micro-batch; the gradients
  /// are zeroed on the first call of every `steps` and the optimizer steps on the last. The loss
  /// function scales the loss if it wants a mean over micro-batches.
  GraphedStepOptions& accumulation_steps(int steps) {
    MINIDL_CHECK(steps >= 1, "GraphedStepOptions: accumulation_steps must be at least 1, got ", steps);
    accumulation_steps_ = steps;
    return *this;
  }
  /// Mixed precision with loss scaling: each step runs `scaler->scale(loss).backward()` and, on the
  /// last call of a cycle, `scaler->step(optimizer); scaler->update();` (all captured in the graph:
  /// the scaler never syncs with SGD or Adam(W)). The step returns the unscaled loss. The scaler must outlive the step.
  ///   cuda::GraphedStep step(loss_fn, optimizer, cuda::GraphedStepOptions().grad_scaler(&scaler));
  GraphedStepOptions& grad_scaler(optim::GradScaler* scaler) {
    grad_scaler_ = scaler;
    return *this;
  }
  /// Clips the gradients to a joint 2-norm of at most max_norm before each optimizer step
  /// (nn::utils::clip_grad_norm_ over the optimizer's parameters; after unscaling, with a scaler), in
  /// the graph with no host sync; GraphedStep::grad_norm() gives the norm before clipping.
  ///   cuda::GraphedStepOptions().clip_grad_norm(1.0)
  GraphedStepOptions& clip_grad_norm(double max_norm) {
    MINIDL_CHECK(max_norm >= 0, "GraphedStepOptions: clip_grad_norm expected max_norm >= 0, got ", max_norm);
    clip_grad_norm_ = max_norm;
    return *this;
  }
  int warmup() const { return warmup_; }
  bool enabled() const { return enabled_; }
  int accumulation_steps() const { return accumulation_steps_; }
  optim::GradScaler* grad_scaler() const { return grad_scaler_; }
  std::optional<double> clip_grad_norm() const { return clip_grad_norm_; }

 private:
  int warmup_ = 3;
  bool enabled_ = true;
  int accumulation_steps_ = 1;
  optim::GradScaler* grad_scaler_ = nullptr;
  std::optional<double> clip_grad_norm_;
};

/// Runs training steps, each `zero_grad(); loss = loss_fn(inputs); loss.backward(); step()` (with
/// accumulation_steps(k): zero_grad on the first of every k calls, step on the last). On a
/// CUDA device, after `warmup` eager steps, the step is captured once into a CUDA graph (its memory
/// in the graph's private pool, its gradients written there, dropout drawing fresh numbers on every
/// replay) and then replayed: the inputs are copied into the graph's static buffers on the device,
/// changed learning rates reach the device (written by the graph itself where they changed at every
/// warm-up step, as a schedule changes them), and one launch runs the rest. It falls back to
/// the eager step by itself where a graph cannot serve: inputs of another shape (the last partial
/// batch), the CPU, an optimizer with per-step host state (capturable() false), or a step that
/// cannot be captured (it synchronizes, say), which is reported once on stderr. SGD and Adam(W)
/// are captured, GradScaler's skip and the gradient clipping included, and follow lr schedules.
///   cuda::GraphedStep step(model, optimizer, [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
///   for (auto& batch : loader) loss = step(batch.data, batch.target);
/// The returned loss lives on the device (no sync until read). From a replay it is the graph's
/// static output, overwritten by the next step: read or clone it before then.
class GraphedStep {
 public:
  using LossFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

  GraphedStep(LossFn loss_fn, optim::Optimizer& optimizer, GraphedStepOptions options = {});
  /// A model (anything with `->forward(x)`) and a criterion(output, target).
  template <class Model, class Criterion>
    requires std::is_invocable_r_v<Tensor, Criterion, Tensor, Tensor>
  GraphedStep(Model model, optim::Optimizer& optimizer, Criterion criterion, GraphedStepOptions options = {})
      : GraphedStep(
            [model, criterion](const std::vector<Tensor>& in) { return criterion(model->forward(in.at(0)), in.at(1)); },
            optimizer, options) {}
  ~GraphedStep();

  Tensor operator()(const Tensor& data, const Tensor& target) { return (*this)(std::vector<Tensor>{data, target}); }
  /// A step whose loss function makes its own batch (draws it on the device, say): it runs on the
  /// parameters' device, and a graph replays its random draws afresh, as eager steps would draw.
  Tensor operator()() { return (*this)(std::vector<Tensor>{}); }
  Tensor operator()(const std::vector<Tensor>& inputs);

  /// True once a graph is captured (steps of its input shapes replay it).
  bool graphed() const { return !graph_grads_.empty(); }
  /// Steps that replayed the graph, and steps that ran eagerly.
  int64_t replays() const { return replays_; }
  int64_t eager_steps() const { return eager_steps_; }
  /// Why no graph is used, when one is not (empty otherwise, and before the capture).
  const std::string& eager_reason() const { return eager_reason_; }
  /// Nodes (kernels and copies) in the captured graphs; 0 before the capture.
  size_t graph_nodes() const;
  /// With clip_grad_norm: the gradients' 2-norm before clipping at the last optimizer step, a 0-d
  /// tensor on the device (from a replay, the graph's buffer, overwritten by the next step); else undefined.
  const Tensor& grad_norm() const { return grad_norm_; }

 private:
  // What a call does, from its place in the accumulation cycle: zero the gradients first (the
  // first call), step the optimizer last (the last call). One graph for each kind that occurs.
  struct Phase {
    bool zero, step;
    int index() const { return 2 * zero + step; }
  };
  Tensor eager(const std::vector<Tensor>& inputs, Phase phase);
  // Where the step runs: its first input's device, else its parameters'.
  Device device(const std::vector<Tensor>& inputs) const;
  bool matches(const std::vector<Tensor>& inputs) const;
  void capture(const std::vector<Tensor>& inputs, Phase phase);
  void use_graph_grads();
  // clip_grad_norm_ over the optimizer's parameters, where the options ask for it.
  void clip();
  // backward (of the scaled loss, with a scaler) and, on the last call of a cycle, the update; while
  // `capturing`, the graph's writes of the learning rates before it.
  void backward_and_step(const Tensor& loss, Phase phase, Graph* capturing = nullptr);
  // Learning rates. Where they changed between the eager steps (a schedule that moves at every
  // step), the graph writes them itself before its update, from values changed in the graph before
  // each replay: a write queued between two replays would leave the GPU idle for several
  // microseconds. Otherwise a changed rate is written before the replay, and a graph whose rates
  // never change has no write at all.
  void note_rates();
  void capture_rate_writes(Graph& graph, Phase phase);
  void write_rates(Graph& graph, Phase phase);

  LossFn loss_fn_;
  optim::Optimizer& optimizer_;
  GraphedStepOptions options_;
  std::unique_ptr<Graph> graphs_[4];   // by Phase::index()
  Tensor static_losses_[4];            // each graph's loss output
  Tensor static_norms_[4];             // each graph's gradient norm (with clip_grad_norm)
  Tensor grad_norm_;
  std::vector<Tensor> static_inputs_;  // what the graphs read; each graph refills them first
  std::vector<Tensor> graph_grads_;    // the gradients the graphs write, one per parameter
  int rate_writes_[4] = {-1, -1, -1, -1};  // each graph's capture_scalar_writes of the rates, or -1
  std::vector<double> seen_rates_;     // the groups' rates at the last eager step
  bool rates_change_ = false;          // they changed from one eager step to the next
  int64_t calls_ = 0, replays_ = 0, eager_steps_ = 0;
  std::string eager_reason_;
};

}  // namespace minidl::cuda
