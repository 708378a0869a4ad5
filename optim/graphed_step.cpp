#include "optim/graphed_step.h"

#include <cstdio>

#include "core/autograd.h"
#include "nn/clip_grad.h"
#include "ops/autocast_masters.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "optim/grad_scaler.h"

namespace minidl::cuda {

GraphedStep::GraphedStep(LossFn loss_fn, optim::Optimizer& optimizer, GraphedStepOptions options)
    : loss_fn_(std::move(loss_fn)), optimizer_(optimizer), options_(options) {
  if (!options_.enabled()) eager_reason_ = "CUDA graphs are turned off";
  else if (!optimizer_.capturable()) eager_reason_ = "the optimizer keeps per-step host state";
}

GraphedStep::~GraphedStep() = default;

Tensor GraphedStep::eager(const std::vector<Tensor>& inputs, Phase phase) {
  ++eager_steps_;
  // Once graphs exist they read and write their gradient buffers: an eager call zeroes those in
  // place and accumulates into them too.
  if (!graph_grads_.empty()) use_graph_grads();
  if (phase.step) note_rates();
  if (phase.zero) {
    if (graph_grads_.empty()) optimizer_.zero_grad();
    else
      for (Tensor& g : graph_grads_) fill_(g, 0);
  }
  Tensor loss = loss_fn_(inputs);
  backward_and_step(loss, phase);
  return loss;
}

void GraphedStep::backward_and_step(const Tensor& loss, Phase phase, Graph* capturing) {
  optim::GradScaler* scaler = options_.grad_scaler();
  if (!scaler) {
    loss.backward();
    if (phase.step) {
      clip();
      if (capturing) capture_rate_writes(*capturing, phase);
      optimizer_.step();
    }
    return;
  }
  scaler->scale(loss).backward();
  if (phase.step) {
    if (options_.clip_grad_norm() && scaler->is_enabled()) scaler->unscale_(optimizer_);  // clip the true gradients
    clip();
    if (capturing) capture_rate_writes(*capturing, phase);
    scaler->step(optimizer_);
    scaler->update();
  }
}

void GraphedStep::clip() {
  if (!options_.clip_grad_norm()) return;
  std::vector<Tensor> params;
  for (const auto& group : optimizer_.param_groups())
    params.insert(params.end(), group.params.begin(), group.params.end());
  grad_norm_ = nn::utils::clip_grad_norm_(params, *options_.clip_grad_norm());
}

void GraphedStep::note_rates() {
  std::vector<double> rates;
  for (const auto& group : optimizer_.param_groups()) rates.push_back(*group.lr);
  if (!seen_rates_.empty() && rates != seen_rates_) rates_change_ = true;
  seen_rates_ = std::move(rates);
}

void GraphedStep::capture_rate_writes(Graph& graph, Phase phase) {
  if (!rates_change_) return;
  std::vector<Tensor*> scalars;
  std::vector<double> values;
  for (const optim::Optimizer::DeviceRate& r : optimizer_.device_rates()) {
    scalars.push_back(r.scalar);
    values.push_back(r.value);
  }
  if (!scalars.empty()) rate_writes_[phase.index()] = graph.capture_scalar_writes(scalars, values);
}

void GraphedStep::write_rates(Graph& graph, Phase phase) {
  const int writes = rate_writes_[phase.index()];
  if (writes < 0) {
    optimizer_.sync_device_state();  // a launch of its own, only where a rate changed
    return;
  }
  std::vector<double> values;
  for (const optim::Optimizer::DeviceRate& r : optimizer_.device_rates()) values.push_back(r.value);
  graph.set_scalar_values(writes, values);
  optimizer_.device_rates_written();
}

void GraphedStep::use_graph_grads() {
  size_t k = 0;
  for (auto& group : optimizer_.param_groups())
    for (Tensor& p : group.params) p.set_grad(graph_grads_[k++]);
}

Device GraphedStep::device(const std::vector<Tensor>& inputs) const {
  if (!inputs.empty()) return inputs[0].device();
  for (const auto& group : optimizer_.param_groups())
    if (!group.params.empty()) return group.params[0].device();
  return Device::cpu();  // an optimizer always has a parameter: not reached
}

bool GraphedStep::matches(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != static_inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &a = inputs[i], &b = static_inputs_[i];
    if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.device() != b.device()) return false;
  }
  return true;
}

size_t GraphedStep::graph_nodes() const {
  size_t n = 0;
  for (const auto& g : graphs_)
    if (g) n += g->num_nodes();
  return n;
}

Tensor GraphedStep::operator()(const std::vector<Tensor>& inputs) {
  const int k = options_.accumulation_steps();
  const int64_t position = calls_++ % k;
  const Phase phase{position == 0, position == k - 1};
  if (!eager_reason_.empty() || !device(inputs).is_cuda()) return eager(inputs, phase);
  std::unique_ptr<Graph>& graph = graphs_[phase.index()];
  if (!graph) {
    // Capture from the start of a cycle after the warm-up, so that the first graph allocates the
    // gradients in its pool; the other phases' graphs follow as their calls come.
    const bool started = !graph_grads_.empty();
    if (eager_steps_ < options_.warmup() || (!started && !phase.zero) || (started && !matches(inputs)))
      return eager(inputs, phase);
    capture(inputs, phase);
    if (!graph) return eager(inputs, phase);
  }
  if (!matches(inputs)) return eager(inputs, phase);
  // The graph copies the inputs into its static buffers itself, as its first work (its copy i is
  // input i). A strided input is gathered into its buffer first, which the graph then copies onto
  // itself.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_contiguous()) {
      graph->set_copy_source(static_cast<int>(i), inputs[i]);
    } else {
      copy_(static_inputs_[i], inputs[i]);
      graph->set_copy_source(static_cast<int>(i), static_inputs_[i]);
    }
  }
  if (phase.step) write_rates(*graph, phase);  // only the optimizer reads them
  use_graph_grads();  // the caller may have set .grad to none (zero_grad) since the last call
  autocast::refresh_stale_copies();  // weights written since: the capture left their copies to the step
  graph->replay();
  ++replays_;
  if (phase.step && options_.clip_grad_norm()) grad_norm_ = static_norms_[phase.index()];
  return static_losses_[phase.index()];
}

void GraphedStep::capture(const std::vector<Tensor>& inputs, Phase phase) {
  // A scaler makes its scale on its first scale(): done eagerly, or every replay would reset it.
  optim::GradScaler* scaler = options_.grad_scaler();
  if (scaler && scaler->is_enabled() && !scaler->scale_tensor().defined()) return;
  const bool first = graph_grads_.empty();
  if (first) {
    static_inputs_.clear();
    for (const Tensor& in : inputs) static_inputs_.push_back(in.detach().clone());
  }
  optimizer_.sync_device_state();
  // The first graph starts from gradients set to none, so that its backward allocates them in the
  // graph's pool and writes them rather than zeroing and accumulating; later graphs accumulate
  // into those same buffers in place.
  if (first) optimizer_.zero_grad();
  else use_graph_grads();
  auto graph = std::make_unique<Graph>(device(inputs));
  autocast::ReplaysRefreshStaleCopies replays_refresh;  // see operator()
  try {
    graph->capture_begin();
    for (Tensor& in : static_inputs_) graph->capture_copy(in, in);  // sources set before each replay
    Tensor loss = loss_fn_(static_inputs_);
    backward_and_step(loss, phase, graph.get());  // the engine keeps the seed it made in the warm-up: no fill in the graph
    graph->capture_end();
    static_losses_[phase.index()] = loss.detach();
    if (phase.step) static_norms_[phase.index()] = grad_norm_;
  } catch (const std::exception& e) {
    graph->capture_abort();
    // Forget the scaler's half-done step (its stages are host state); the scale itself is unchanged.
    if (scaler && scaler->is_enabled()) scaler->update(scaler->get_scale());
    eager_reason_ = std::string("the step could not be captured as a CUDA graph: ") + e.what();
    std::fprintf(stderr, "minidl: GraphedStep runs every step eagerly: %s\n", eager_reason_.c_str());
    if (first) {
      static_inputs_.clear();
      optimizer_.zero_grad();  // the captured gradients were never computed
    }
    return;
  }
  if (first) {
    for (auto& group : optimizer_.param_groups())
      for (Tensor& p : group.params) graph_grads_.push_back(p.grad());
  }
  graphs_[phase.index()] = std::move(graph);
}

}  // namespace minidl::cuda
