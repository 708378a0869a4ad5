#include "core/autograd.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

// The engine adds gradients that meet at one tensor and seeds a scalar's gradient with ones; these
// two ops are the only ones core/ calls.
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl {

namespace {

thread_local bool grad_mode = true;

struct TapeInput {
  uint64_t node = 0;                  // tape id of a non-leaf input
  std::shared_ptr<TensorImpl> leaf;   // a leaf that requires grad, to accumulate into
  bool requires_grad = false;
};

struct TapeEntry {
  uint64_t id;
  const char* name;
  std::vector<TapeInput> inputs;
  autograd::BackwardFn backward;
};

thread_local std::vector<TapeEntry> tape;
std::atomic<uint64_t> next_node_id{1};

void accumulate_into_leaf(TensorImpl& leaf, const Tensor& grad) {
  if (!leaf.grad) {
    // A gradient the engine still shares (e.g. add passes one tensor to both inputs) is copied, so
    // that changing one .grad in place never changes another.
    bool shared = grad.impl_ptr().use_count() > 1 || grad.impl().storage.use_count() > 1;
    leaf.grad = shared ? grad.clone().impl_ptr() : grad.impl_ptr();
  } else {
    leaf.grad = add(Tensor(leaf.grad), grad).impl_ptr();
  }
}

}  // namespace

bool grad_mode_enabled() { return grad_mode; }

NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

namespace autograd {

bool needs_recording(std::initializer_list<Tensor> inputs) {
  if (!grad_mode) return false;
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  TapeEntry entry{next_node_id++, name, {}, std::move(backward)};
  entry.inputs.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    TapeInput in;
    if (input.defined() && input.requires_grad()) {
      in.requires_grad = true;
      if (input.is_leaf()) in.leaf = input.impl_ptr();
      else in.node = input.impl().node;
    }
    entry.inputs.push_back(std::move(in));
  }
  output.impl().requires_grad = true;
  output.impl().node = entry.id;
  tape.push_back(std::move(entry));
}

void backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  MINIDL_CHECK(root.requires_grad(), "backward: the tensor does not require grad and has no history; "
                                     "call requires_grad_() on the leaves you want gradients for");
  Tensor grad = grad_in;
  if (!grad.defined()) {
    MINIDL_CHECK(root.numel() == 1, "backward: a gradient can be implied only for a one-element output, but the "
                                    "output has shape ", root.shape(), "; pass backward(gradient)");
    grad = ones(root.shape(), root.dtype(), root.device());
  } else {
    MINIDL_CHECK(grad.shape() == root.shape() && grad.dtype() == root.dtype() && grad.device() == root.device(),
                 "backward: gradient ", grad.shape(), " ", grad.dtype(), " on ", grad.device(),
                 " does not match the output ", root.shape(), " ", root.dtype(), " on ", root.device());
  }
  NoGradGuard no_grad;
  if (root.is_leaf()) {
    accumulate_into_leaf(root.impl(), grad);
    return;
  }
  uint64_t root_id = root.impl().node;
  auto found = std::lower_bound(tape.begin(), tape.end(), root_id,
                                [](const TapeEntry& e, uint64_t id) { return e.id < id; });
  MINIDL_CHECK(found != tape.end() && found->id == root_id,
               "backward: the graph of this tensor was already released by an earlier backward() (or recorded on "
               "another thread); pass retain_graph=true to the first backward() to walk it again");

  std::unordered_map<uint64_t, Tensor> pending{{root_id, grad.detach()}};
  for (auto it = std::make_reverse_iterator(found + 1); it != tape.rend() && !pending.empty(); ++it) {
    auto g = pending.find(it->id);
    if (g == pending.end()) continue;
    Tensor grad_output = std::move(g->second);
    pending.erase(g);
    std::vector<bool> needs;
    for (const TapeInput& in : it->inputs) needs.push_back(in.requires_grad);
    std::vector<Tensor> grads = it->backward(grad_output, needs);
    MINIDL_CHECK(grads.size() == it->inputs.size(), it->name, " backward returned ", grads.size(),
                 " gradients for ", it->inputs.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const TapeInput& in = it->inputs[i];
      if (!in.requires_grad || !grads[i].defined()) continue;
      if (in.leaf) {
        accumulate_into_leaf(*in.leaf, grads[i]);
      } else if (auto p = pending.find(in.node); p == pending.end()) {
        pending.emplace(in.node, std::move(grads[i]));
      } else {
        p->second = add(p->second, grads[i]);
      }
    }
  }
  // Everything recorded up to the root is released: a training loop's tape is empty after each step.
  if (!retain_graph) tape.erase(tape.begin(), found + 1);
}

size_t tape_size() { return tape.size(); }
void clear_tape() { tape.clear(); }

}  // namespace autograd

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward(*this, gradient, retain_graph);
}

}  // namespace minidl
