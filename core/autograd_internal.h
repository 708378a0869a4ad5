// What the files of the autograd engine share, and only they include: the tape (core/autograd_tape.cpp),
// the backward walk (core/autograd_engine.cpp), seeds and the delivery of gradients
// (core/autograd_gradients.cpp), and the API on top (core/autograd.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/autograd.h"

namespace minidl::autograd::internal {

extern constinit thread_local bool grad_mode;

struct TapeInput {
  uint64_t node = 0;                  // node id (output) of a non-leaf input
  std::shared_ptr<TensorImpl> leaf;   // a leaf that requires grad, to accumulate into
  std::weak_ptr<TensorImpl> tensor;   // a non-leaf input, while it lives: the shape its gradient must have
  bool requires_grad = false;
  bool defined = false;               // for grad_fn()'s name: linear with or without a bias
  bool wrapped_number = false;        // a C++ scalar in the expression: x * 2 is MulBackward1
};

// The memory a backward reads and its version when it was saved. No allocation per saved tensor:
// the storage is shared, and the tensor (for the error's dtype and shape) only watched, since a
// strong handle to an op's own output would keep its entry alive for ever.
struct SavedVersion {
  std::shared_ptr<Storage> storage;
  uint64_t version;
  std::weak_ptr<TensorImpl> tensor;
};

// What few entries have: hooks and retained gradients of its outputs, and the outputs past the first
// with the backward of a multi-output op. Kept behind one pointer, so an ordinary op allocates none.
struct EntryExtras {
  std::vector<std::weak_ptr<TensorImpl>> more_outputs;  // outputs 1..n-1
  autograd::MultiBackwardFn multi_backward;
  std::vector<std::pair<uint32_t, std::function<Tensor(const Tensor&)>>> hooks;  // (output, hook); empty once removed
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;          // outputs whose .grad is kept
};

// One recorded op. Its outputs are held weakly: once every handle to them is gone, the entry is
// dead, and it is dropped as soon as no live entry needs it as an input. A released entry (its
// backward ran without retain_graph) keeps only its id and name, so that a later backward reaching
// it can say which op was freed. Output k of the entry has the node id `id + k`.
struct TapeEntry {
  uint64_t id;
  const char* name;
  std::weak_ptr<TensorImpl> output;
  std::vector<TapeInput> inputs;
  std::vector<SavedVersion> saved;
  autograd::BackwardFn backward;  // empty once released
  std::unique_ptr<const std::string> forward;  // recorded in anomaly mode: the op's shapes, for a backward error
  std::unique_ptr<EntryExtras> extras;
  uint32_t n_outputs = 1;
  bool twice_differentiable = false;

  bool released() const { return !backward; }
  bool has(uint64_t node) const { return node >= id && node < id + n_outputs; }
  bool output_alive() const {
    if (!output.expired()) return true;
    if (extras)
      for (const auto& o : extras->more_outputs)
        if (!o.expired()) return true;
    return false;
  }
  std::shared_ptr<TensorImpl> output_impl(size_t k) const {
    if (k == 0) return output.lock();
    return extras && k - 1 < extras->more_outputs.size() ? extras->more_outputs[k - 1].lock() : nullptr;
  }
  void release() {
    backward = nullptr;  // frees the tensors the closure saved
    saved.clear();
    saved.shrink_to_fit();
    inputs.clear();      // and the leaves it would accumulate into
    inputs.shrink_to_fit();
    if (extras) {
      extras->multi_backward = nullptr;
      extras->hooks.clear();
      extras->retained.clear();
    }
  }
};

constexpr size_t kMinSweep = 256;

extern constinit thread_local bool tape_gone;  // trivially destructible: still readable while `tape` is destroyed

// Entries are in id order (ids only grow), so a tensor finds its entry by binary search and a
// backward walks its graph by going down the tape.
struct Tape {
  std::vector<TapeEntry> entries;
  size_t sweep_at = kMinSweep;  // entries.size() that triggers the next sweep
  // Set while the tape itself frees entries or walks a graph: tensors destroyed meanwhile must not
  // pop entries under its feet.
  bool busy = false;
  ~Tape() { tape_gone = true; }
};

extern thread_local Tape tape;
// The entry whose backward runs now on this thread (0: none), for saved_output().
extern constinit thread_local uint64_t running_entry;
// How many autograd::grad() walks (which collect gradients instead of accumulating them) are running
// on this thread: checkpoint's backward, which accumulates through a backward of its own, refuses them.
extern constinit thread_local int grad_walks;

struct BusyGuard {
  bool previous = tape.busy;
  BusyGuard() { tape.busy = true; }
  ~BusyGuard() { tape.busy = previous; }
};

// In core/autograd_tape.cpp.
void pop_dead_tail();
TapeEntry* find_entry(uint64_t node);

// In core/autograd_gradients.cpp.
extern constinit thread_local const TensorImpl* unit_seed;
std::vector<Tensor> make_seeds(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& given,
                               bool& implied);
Tensor checked_gradient(const TapeEntry& e, size_t i, Tensor grad);
void wait_for_side_work(const Tensor& t);
void accumulate_into_leaf(TensorImpl& leaf, const Tensor& grad);
void run_post_accumulate_hooks(const std::shared_ptr<TensorImpl>& leaf);
bool has_grad_hooks(const TensorImpl& leaf);
Tensor sum_gradients(const Tensor& a, const Tensor& b);
Tensor run_tensor_hooks(const std::vector<std::function<Tensor(const Tensor&)>>& hooks, Tensor grad);
void retain_into(TensorImpl& t, const Tensor& grad);

// In core/autograd_engine.cpp.

// What grad() collects instead of accumulating into .grad: the gradient of each input.
struct Capture {
  std::unordered_map<const TensorImpl*, size_t> leaves;  // leaf -> slot
  std::unordered_map<uint64_t, size_t> nodes;            // node id of a non-leaf -> slot
  std::vector<Tensor> grads;                             // by slot
};

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, bool implied_unit,
                  bool keep_graph, bool create_graph, Capture* capture);

}  // namespace minidl::autograd::internal
