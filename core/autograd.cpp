// The autograd API on top of the tape and the engine: grad mode, backward() and grad(), grad_fn's
// names, and Tensor's hooks and retain_grad().
#include "core/autograd.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/autograd_internal.h"

namespace minidl {

using namespace autograd::internal;

namespace autograd::internal {
constinit thread_local bool grad_mode = true;
}  // namespace autograd::internal

namespace {

thread_local bool inference_mode = false;

std::string camel_case(const std::string& op) {
  std::string out;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

}  // namespace

bool grad_mode_enabled() { return grad_mode; }

NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

AutoGradMode::AutoGradMode(bool enabled) : previous_(grad_mode) { grad_mode = enabled; }
AutoGradMode::~AutoGradMode() { grad_mode = previous_; }

bool inference_mode_enabled() { return inference_mode; }

InferenceMode::InferenceMode() : previous_(inference_mode) { inference_mode = true; }
InferenceMode::~InferenceMode() { inference_mode = previous_; }

namespace autograd {

void backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  backward(variable_list{root}, variable_list{grad}, retain_graph, false);
}

void backward(const variable_list& tensors, const variable_list& grad_tensors, std::optional<bool> retain_graph,
              bool create_graph) {
  bool implied = false;
  std::vector<Tensor> seeds = make_seeds("backward", tensors, grad_tensors, implied);
  run_backward(tensors, seeds, implied, retain_graph.value_or(create_graph), create_graph, nullptr);
}

variable_list grad(const variable_list& outputs, const variable_list& inputs, const variable_list& grad_outputs,
                   std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  MINIDL_CHECK(!outputs.empty(), "grad: expected at least one output");
  bool implied = false;
  std::vector<Tensor> seeds = make_seeds("grad", outputs, grad_outputs, implied);
  Capture capture;
  std::vector<size_t> slot_of(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    MINIDL_CHECK(x.defined(), "grad: input ", i, " is undefined");
    MINIDL_CHECK(x.requires_grad(), "grad: input ", i, " (shape ", x.shape(), ") does not require grad");
    const size_t next = capture.grads.size();
    slot_of[i] = x.is_leaf() ? capture.leaves.emplace(&x.impl(), next).first->second
                             : capture.nodes.emplace(x.impl().node, next).first->second;
    if (slot_of[i] == next) capture.grads.emplace_back();
  }
  run_backward(outputs, seeds, implied, retain_graph.value_or(create_graph), create_graph, &capture);
  variable_list result(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    result[i] = capture.grads[slot_of[i]];
    MINIDL_CHECK(result[i].defined() || allow_unused, "grad: input ", i, " (shape ", inputs[i].shape(),
                 ") appears to not have been used in the graph; pass allow_unused=true if this is intended");
  }
  return result;
}

std::string node_name(const std::string& op, bool scalar_operand, bool scalar_output, bool has_bias) {
  if (op.size() >= 8 && op.find("Backward") != std::string::npos) return op;
  // libtorch numbers the forms of one op: tensor-tensor and tensor-scalar arithmetic, sum/mean of all
  // elements or over dims, pow's exponent a scalar or a tensor.
  if (op == "add" || op == "sub" || op == "mul" || op == "div")
    return camel_case(op) + (scalar_operand ? "Backward1" : "Backward0");
  if (op == "pow") return scalar_operand ? "PowBackward0" : "PowBackward1";
  if (op == "sum" || op == "mean") return camel_case(op) + (scalar_output ? "Backward0" : "Backward1");
  if (op == "matmul") return scalar_output ? "MmBackward0" : "BmmBackward0";
  if (op == "linear") return has_bias ? "AddmmBackward0" : "MmBackward0";
  if (op == "to") return "ToCopyBackward0";
  if (op == "reshape") return "ViewBackward0";
  if (op == "conv2d") return "ConvolutionBackward0";
  if (op == "max_pool2d") return "MaxPool2DWithIndicesBackward0";
  return camel_case(op) + "Backward0";
}

}  // namespace autograd

// ---- Tensor's autograd methods ----

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::backward(autograd::variable_list{*this}, autograd::variable_list{gradient}, retain_graph, create_graph);
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (is_leaf()) return nullptr;
  const TapeEntry* e = find_entry(impl().node);
  if (!e) return std::make_shared<autograd::Node>("UnknownBackward0", impl().node);
  bool scalar_operand = false, has_bias = e->inputs.size() > 2 && e->inputs[2].defined;
  for (const TapeInput& in : e->inputs) scalar_operand = scalar_operand || in.wrapped_number;
  const bool matrix_or_scalar = dim() == (std::string_view(e->name) == "matmul" ? 2 : 0);
  return std::make_shared<autograd::Node>(autograd::node_name(e->name, scalar_operand, matrix_or_scalar, has_bias),
                                          e->id);
}

namespace {

TapeEntry& live_entry(const Tensor& t, const char* op) {
  TapeEntry* e = find_entry(t.impl().node);
  MINIDL_CHECK(e && !e->released(), op, ": this tensor's graph was freed by a backward() (or is not on this "
               "thread's tape); call ", op, " before backward(), or backward with retain_graph=true");
  if (!e->extras) e->extras = std::make_unique<EntryExtras>();
  return *e;
}

}  // namespace

void Tensor::retain_grad() const {
  MINIDL_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that doesn't require grad");
  if (is_leaf() || retains_grad()) return;  // a leaf keeps its gradient anyway
  TapeEntry& e = live_entry(*this, "retain_grad");
  e.extras->retained.emplace_back(static_cast<uint32_t>(impl().node - e.id), impl_ptr());
}

bool Tensor::retains_grad() const {
  if (is_leaf()) return false;
  const TapeEntry* e = find_entry(impl().node);
  if (!e || !e->extras) return false;
  for (const auto& [output, weak] : e->extras->retained)
    if (weak.lock() == impl_ptr()) return true;
  return false;
}

unsigned Tensor::_register_hook(std::function<Tensor(const Tensor&)> hook) const {
  MINIDL_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  MINIDL_CHECK(hook, "register_hook: the hook is empty");
  if (is_leaf()) {
    auto& hooks = impl().grad_hooks;
    if (!hooks) hooks = std::make_shared<std::vector<std::function<Tensor(const Tensor&)>>>();
    hooks->push_back(std::move(hook));
    return static_cast<unsigned>(hooks->size() - 1);
  }
  TapeEntry& e = live_entry(*this, "register_hook");
  e.extras->hooks.emplace_back(static_cast<uint32_t>(impl().node - e.id), std::move(hook));
  return static_cast<unsigned>(e.extras->hooks.size() - 1);
}

void Tensor::remove_hook(unsigned handle) const {
  if (is_leaf()) {
    auto& hooks = impl().grad_hooks;
    MINIDL_CHECK(hooks && handle < hooks->size(), "remove_hook: invalid hook handle ", handle);
    (*hooks)[handle] = nullptr;
    return;
  }
  TapeEntry* e = find_entry(impl().node);
  if (!e || !e->extras) return;  // the graph is gone, and its hooks with it
  MINIDL_CHECK(handle < e->extras->hooks.size(), "remove_hook: invalid hook handle ", handle);
  e->extras->hooks[handle].second = nullptr;
}

}  // namespace minidl
