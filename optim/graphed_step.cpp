#include "optim/graphed_step.h"

#include <cstdio>

#include "core/autograd.h"
#include "ops/copy.h"

namespace minidl::cuda {

GraphedStep::GraphedStep(LossFn loss_fn, optim::Optimizer& optimizer, GraphedStepOptions options)
    : loss_fn_(std::move(loss_fn)), optimizer_(optimizer), options_(options) {
  if (!options_.enabled()) eager_reason_ = "CUDA graphs are turned off";
  else if (!optimizer_.capturable()) eager_reason_ = "the optimizer keeps per-step host state (Adam's step count)";
}

GraphedStep::~GraphedStep() = default;

Tensor GraphedStep::eager(const std::vector<Tensor>& inputs) {
  ++eager_steps_;
  optimizer_.zero_grad();
  Tensor loss = loss_fn_(inputs);
  loss.backward();
  optimizer_.step();
  return loss;
}

bool GraphedStep::matches(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != static_inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &a = inputs[i], &b = static_inputs_[i];
    if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.device() != b.device()) return false;
  }
  return true;
}

Tensor GraphedStep::operator()(const std::vector<Tensor>& inputs) {
  const bool on_cuda = !inputs.empty() && inputs[0].device().is_cuda();
  if (!eager_reason_.empty() || !on_cuda) return eager(inputs);
  if (!graph_) {
    if (eager_steps_ < options_.warmup()) return eager(inputs);
    capture(inputs);
    if (!graph_) return eager(inputs);
  }
  if (!matches(inputs)) return eager(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) copy_(static_inputs_[i], inputs[i]);
  optimizer_.sync_device_state();
  // An eager step in between (a partial batch) replaced the gradients; the graph writes its own.
  size_t k = 0;
  for (auto& group : optimizer_.param_groups())
    for (Tensor& p : group.params) p.set_grad(graph_grads_[k++]);
  graph_->replay();
  ++replays_;
  return static_loss_;
}

void GraphedStep::capture(const std::vector<Tensor>& inputs) {
  static_inputs_.clear();
  for (const Tensor& in : inputs) static_inputs_.push_back(in.detach().clone());
  optimizer_.sync_device_state();
  // Gradients set to none, so that the backward allocates them in the graph's pool and writes
  // them rather than zeroing and accumulating.
  optimizer_.zero_grad();
  auto graph = std::make_unique<Graph>(inputs[0].device());
  try {
    graph->capture_begin();
    Tensor loss = loss_fn_(static_inputs_);
    loss.backward();
    optimizer_.step();
    graph->capture_end();
    static_loss_ = loss.detach();
  } catch (const std::exception& e) {
    graph->capture_abort();
    eager_reason_ = std::string("the step could not be captured as a CUDA graph: ") + e.what();
    std::fprintf(stderr, "minidl: GraphedStep runs every step eagerly: %s\n", eager_reason_.c_str());
    static_inputs_.clear();
    optimizer_.zero_grad();  // the captured gradients were never computed
    return;
  }
  graph_grads_.clear();
  for (auto& group : optimizer_.param_groups())
    for (Tensor& p : group.params) graph_grads_.push_back(p.grad());
  graph_ = std::move(graph);
}

}  // namespace minidl::cuda
