// Where a backward's gradients come from and go to: its seeds, and the sums, hooks and .grad fields
// that receive them.
#include <algorithm>

#include "core/autograd_internal.h"
#include "core/cuda.h"

// The engine adds gradients that meet at one tensor and seeds a scalar's gradient with ones; these
// two ops are the only ones core/ calls.
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl::autograd {

namespace internal {

// The implied seed d root / d root = 1 of the backward running on this thread (null when its seed
// was passed in), and the CUDA seeds made so far, one per device, dtype and shape: a training step
// spends no kernel on filling its seed. On the CPU a fill is one store, and nothing is kept.
constinit thread_local const TensorImpl* unit_seed = nullptr;

namespace {

thread_local std::vector<Tensor> cuda_unit_seeds;

Tensor implied_seed(const Tensor& root) {
  if (!root.device().is_cuda()) return ones(root.shape(), root.dtype(), root.device());
  for (const Tensor& s : cuda_unit_seeds)
    if (s.shape() == root.shape() && s.dtype() == root.dtype() && s.device() == root.device()) return s;
  Tensor seed = ones(root.shape(), root.dtype(), root.device());
  // One made while capturing a CUDA graph is filled only when the graph replays, in the graph's
  // memory: the capture keeps it to itself.
  if (!cuda::this_thread_captures()) cuda_unit_seeds.push_back(seed);
  return seed;
}

}  // namespace

// A gradient must fit its input (a custom backward can get this wrong): a wrong shape is refused
// before it reaches .grad; a wrong dtype is converted, as PyTorch does.
Tensor checked_gradient(const TapeEntry& e, size_t i, Tensor grad) {
  const TapeInput& in = e.inputs[i];
  std::shared_ptr<TensorImpl> input = in.leaf ? in.leaf : in.tensor.lock();
  if (!input) return grad;  // a non-leaf input no one holds: its own op's backward sees the gradient next
  MINIDL_CHECK(grad.shape() == input->shape, "backward: '", e.name, "' returned a gradient of shape ", grad.shape(),
               " for input ", i, ", which has shape ", input->shape);
  return grad.dtype() == input->dtype ? grad : grad.to(input->dtype);
}

// A gradient may still be being written on a CUDA side stream (core/cuda/side_stream.cpp): the
// engine waits for that work before it reads or changes such a tensor, and at the end of backward.
void wait_for_side_work(const Tensor& t) {
  if (cuda::uses_unjoined_side_work(t)) cuda::join_side_streams();
}

void accumulate_into_leaf(TensorImpl& leaf, const Tensor& grad) {
  if (!leaf.grad) {
    // A gradient the engine still shares (e.g. add passes one tensor to both inputs) is copied, so
    // that changing one .grad in place never changes another.
    bool shared = grad.impl_ptr().use_count() > 1 || grad.impl().storage.use_count() > 1;
    if (shared) wait_for_side_work(grad);
    leaf.grad = shared ? grad.clone().impl_ptr() : grad.impl_ptr();
    return;
  }
  wait_for_side_work(grad);
  wait_for_side_work(Tensor(leaf.grad));
  // In place, as PyTorch accumulates: .grad keeps its memory, so a captured CUDA graph that
  // accumulates (cuda::GraphedStep with accumulation steps) reads and writes the same buffer on
  // every replay, and nothing is allocated. A backward with create_graph adds out of place, so
  // that the sum keeps the history of both terms.
  Tensor existing(leaf.grad);
  if (existing.is_contiguous() && !grad_mode) add_(existing, grad);
  else leaf.grad = add(existing, grad).impl_ptr();
}

void run_post_accumulate_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  if (leaf->grad) wait_for_side_work(Tensor(leaf->grad));
  Tensor handle(leaf);
  for (auto& hook : *leaf->post_accumulate_grad_hooks) hook(handle);
}

bool has_grad_hooks(const TensorImpl& leaf) {
  if (!leaf.grad_hooks) return false;
  for (const auto& h : *leaf.grad_hooks)
    if (h) return true;
  return false;
}
Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  wait_for_side_work(a);
  wait_for_side_work(b);
  return add(a, b);
}

// Runs `hooks` of output `k` on its gradient, each free to replace it.
Tensor run_tensor_hooks(const std::vector<std::function<Tensor(const Tensor&)>>& hooks, Tensor grad) {
  for (const auto& hook : hooks) {
    if (!hook) continue;
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  return grad;
}

// A non-leaf that retains its gradient: .grad is the sum over backwards, as a leaf's.
void retain_into(TensorImpl& t, const Tensor& grad) {
  if (!t.grad) t.grad = grad_mode ? grad.impl_ptr() : grad.detach().clone().impl_ptr();
  else t.grad = add(Tensor(t.grad), grad).impl_ptr();
}

// The seeds of a backward from `roots`: the given gradient, or ones for a one-element root.
std::vector<Tensor> make_seeds(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& given,
                               bool& implied) {
  MINIDL_CHECK(given.empty() || given.size() == roots.size(), op, ": got ", given.size(), " gradients for ",
               roots.size(), " outputs");
  std::vector<Tensor> seeds;
  implied = false;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    MINIDL_CHECK(root.defined(), op, ": output ", i, " is undefined");
    MINIDL_CHECK(root.requires_grad(), op, ": element ", i, " of the tensors does not require grad and does not "
                 "have a grad_fn; call requires_grad_() on the leaves you want gradients for");
    Tensor g = i < given.size() ? given[i] : Tensor();
    if (!g.defined()) {
      MINIDL_CHECK(root.numel() == 1, op, ": a gradient can be implied only for a one-element output, but the "
                   "output has shape ", root.shape(), "; pass backward(gradient)");
      g = implied_seed(root);
      implied = true;
    } else {
      MINIDL_CHECK(g.shape() == root.shape() && g.dtype() == root.dtype() && g.device() == root.device(), op,
                   ": gradient ", g.shape(), " ", g.dtype(), " on ", g.device(), " does not match the output ",
                   root.shape(), " ", root.dtype(), " on ", root.device());
    }
    seeds.push_back(std::move(g));
  }
  return seeds;
}

}  // namespace internal

using namespace internal;

bool is_unit_seed(const Tensor& grad_output) {
  return unit_seed && grad_output.defined() && &grad_output.impl() == unit_seed;
}

}  // namespace minidl::autograd
