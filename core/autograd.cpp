#include "core/autograd.h"

#include <algorithm>
#include <atomic>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/anomaly_mode.h"
#include "core/cuda.h"

// The engine adds gradients that meet at one tensor and seeds a scalar's gradient with ones; these
// two ops are the only ones core/ calls.
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl {

namespace {

thread_local bool grad_mode = true;
thread_local bool inference_mode = false;

// The implied seed d root / d root = 1 of the backward running on this thread (null when its seed
// was passed in), and the CUDA seeds made so far, one per device, dtype and shape: a training step
// spends no kernel on filling its seed. On the CPU a fill is one store, and nothing is kept.
thread_local const TensorImpl* unit_seed = nullptr;
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

struct TapeInput {
  uint64_t node = 0;                  // tape id of a non-leaf input
  std::shared_ptr<TensorImpl> leaf;   // a leaf that requires grad, to accumulate into
  std::weak_ptr<TensorImpl> tensor;   // a non-leaf input, while it lives: the shape its gradient must have
  bool requires_grad = false;
};

// The memory a backward reads and its version when it was saved. No allocation per saved tensor:
// the storage is shared, and the tensor (for the error's dtype and shape) only watched, since a
// strong handle to an op's own output would keep its entry alive for ever.
struct SavedVersion {
  std::shared_ptr<Storage> storage;
  uint64_t version;
  std::weak_ptr<TensorImpl> tensor;
};

// One recorded op. Its output tensor is held weakly: once every handle to the output is gone, the
// entry is dead, and it is dropped as soon as no live entry needs it as an input. A released entry
// (its backward ran without retain_graph) keeps only its id and name, so that a later backward
// reaching it can say which op was freed.
struct TapeEntry {
  uint64_t id;
  const char* name;
  std::weak_ptr<TensorImpl> output;
  std::vector<TapeInput> inputs;
  std::vector<SavedVersion> saved;
  autograd::BackwardFn backward;  // empty once released
  std::unique_ptr<const std::string> forward;  // recorded in anomaly mode: the op's shapes, for a backward error

  bool released() const { return !backward; }
  bool output_alive() const { return !output.expired(); }
  void release() {
    backward = nullptr;  // frees the tensors the closure saved
    saved.clear();
    saved.shrink_to_fit();
    inputs.clear();      // and the leaves it would accumulate into
    inputs.shrink_to_fit();
  }
};

constexpr size_t kMinSweep = 256;

thread_local bool tape_gone = false;  // trivially destructible: still readable while `tape` is destroyed

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

thread_local Tape tape;
std::atomic<uint64_t> next_node_id{1};

struct BusyGuard {
  bool previous = tape.busy;
  BusyGuard() { tape.busy = true; }
  ~BusyGuard() { tape.busy = previous; }
};

// The newest entries are inputs of nothing, so a dead one there can go at once: a forward whose
// output is dropped frees its whole graph here, newest first, as each freed closure lets go of
// the tensors it saved.
void pop_dead_tail() {
  if (tape.busy) return;
  BusyGuard guard;
  while (!tape.entries.empty() && !tape.entries.back().output_alive()) tape.entries.pop_back();
}

// Drops every entry that no live tensor can reach: dead (its output is gone) and not an input of a
// kept entry. One pass from the newest entry down, since inputs are always older than their users;
// dropping an entry frees its closure at once, so whatever that closure kept alive is seen dead
// further down in the same pass.
void sweep() {
  {
    BusyGuard guard;
    std::unordered_set<uint64_t> needed;
    for (size_t i = tape.entries.size(); i-- > 0;) {
      TapeEntry& e = tape.entries[i];
      if (!e.output_alive() && !needed.count(e.id)) {
        e.release();
        e.id = 0;  // marks it for removal below
        continue;
      }
      for (const TapeInput& in : e.inputs)
        if (in.node) needed.insert(in.node);
    }
    std::erase_if(tape.entries, [](const TapeEntry& e) { return e.id == 0; });
  }
  // Sweeping again only after the tape doubles keeps the cost amortized O(1) per recorded op.
  tape.sweep_at = std::max(kMinSweep, 2 * tape.entries.size());
}

TapeEntry* find_entry(uint64_t id) {
  auto it = std::lower_bound(tape.entries.begin(), tape.entries.end(), id,
                             [](const TapeEntry& e, uint64_t id) { return e.id < id; });
  return it != tape.entries.end() && it->id == id ? &*it : nullptr;
}

void check_not_released(const TapeEntry& e, bool is_root) {
  MINIDL_CHECK(!e.released(), "backward: ", is_root ? "this tensor's op '" : "the graph goes through '", e.name,
               "', which was already freed by an earlier backward(); use retain_graph=true on the first backward() "
               "to walk this graph again");
}

// The entries reachable from `root`, newest first: the walk's order, since every input is older than
// its user. Throws before any gradient is computed if one of them was freed or is not on this tape.
std::vector<size_t> reachable_from(size_t root) {
  std::vector<size_t> walk;
  std::unordered_set<uint64_t> wanted{tape.entries[root].id};
  for (size_t i = root + 1; i-- > 0 && !wanted.empty();) {
    const TapeEntry& e = tape.entries[i];
    if (!wanted.erase(e.id)) continue;
    check_not_released(e, i == root);
    walk.push_back(i);
    for (const TapeInput& in : e.inputs)
      if (in.node) wanted.insert(in.node);
  }
  MINIDL_CHECK(wanted.empty(), "backward: the graph reaches ", wanted.size(),
               " op(s) that are not on this thread's tape (dropped by clear_tape(), or recorded on another thread: "
               "the tape is per thread)");
  return walk;
}

// PyTorch's error, word for word where it can be: a backward must not read a tensor that an
// in-place write changed after the forward saved it, or its gradient is silently wrong.
void check_saved_versions(const TapeEntry& e) {
  for (const SavedVersion& s : e.saved) {
    const uint64_t now = s.storage->version();
    if (now == s.version) continue;
    std::ostringstream what;
    if (auto t = s.tensor.lock()) what << "[" << t->dtype << " " << t->shape << "]";
    else what << "a tensor";
    MINIDL_FAIL("backward: one of the variables needed for gradient computation has been modified by an inplace "
                "operation: ", what.str(), ", which '", e.name, "' saved for its backward, is at version ", now,
                "; expected version ", s.version, " instead. Hint: find the in-place change made after the forward "
                "(add_, +=, copy_, zero_, an optimizer's step(), a write through detach() or a view) and make it out "
                "of place, or clone() the tensor before changing it");
  }
}

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
  // every replay, and nothing is allocated.
  Tensor existing(leaf.grad);
  if (existing.is_contiguous()) add_(existing, grad);
  else leaf.grad = add(existing, grad).impl_ptr();
}

void run_post_accumulate_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  if (leaf->grad) wait_for_side_work(Tensor(leaf->grad));
  Tensor handle(leaf);
  for (auto& hook : *leaf->post_accumulate_grad_hooks) hook(handle);
}

// The leaves with hooks that a walk reaches, and how many of its entries may still add to each:
// a hook runs when the last of them has had its turn (given a gradient or not).
struct HookCounts {
  std::unordered_map<TensorImpl*, std::pair<int, bool>> remaining;  // leaf -> (entries left, got a gradient)

  explicit HookCounts(const std::vector<TapeEntry>& entries, const std::vector<size_t>& walk) {
    for (size_t index : walk)
      for (const TapeInput& in : entries[index].inputs)
        if (in.leaf && in.leaf->post_accumulate_grad_hooks) ++remaining[in.leaf.get()].first;
  }
  // After entry `e` has had its turn (`accumulated[i]`: input i received a gradient).
  void done(const TapeEntry& e, const std::vector<bool>& accumulated) {
    if (remaining.empty()) return;
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const TapeInput& in = e.inputs[i];
      if (!in.leaf || !in.leaf->post_accumulate_grad_hooks) continue;
      auto& [left, got] = remaining[in.leaf.get()];
      got = got || (i < accumulated.size() && accumulated[i]);
      if (--left == 0 && got) run_post_accumulate_hooks(in.leaf);
    }
  }
};

}  // namespace

bool grad_mode_enabled() { return grad_mode; }

NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

bool inference_mode_enabled() { return inference_mode; }

InferenceMode::InferenceMode() : previous_(inference_mode) { inference_mode = true; }
InferenceMode::~InferenceMode() { inference_mode = previous_; }

namespace autograd {

bool needs_recording(std::initializer_list<Tensor> inputs) {
  if (!grad_mode) return false;
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  record(name, output, inputs, {}, std::move(backward));
}

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, const std::vector<Tensor>& saved,
            BackwardFn backward) {
  // Giving history to a tensor that has some, or to a leaf that requires grad, would silently cut
  // the first graph or turn the leaf into a non-leaf whose .grad never fills.
  MINIDL_CHECK(output.is_leaf() && !output.requires_grad(), name, ": the output passed to record() is ",
               output.is_leaf() ? "a leaf that requires grad" : "already the output of another op",
               "; record a new tensor (the op's result), not one of its inputs");
  if (tape.entries.size() >= tape.sweep_at) sweep();
  TapeEntry entry{next_node_id++, name, output.impl_ptr(), {}, {}, std::move(backward), nullptr};
  entry.saved.reserve(saved.size());
  for (const Tensor& t : saved)
    if (t.defined()) entry.saved.push_back({t.impl().storage, t._version(), t.impl_ptr()});
  entry.inputs.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    MINIDL_CHECK(!input.defined() || !input.impl().inference, name,
                 ": an input is an inference tensor (made under InferenceMode), which an op recorded for backward "
                 "cannot use; clone() it outside InferenceMode to get a normal tensor");
    TapeInput in;
    if (input.defined() && input.requires_grad()) {
      in.requires_grad = true;
      if (input.is_leaf()) {
        in.leaf = input.impl_ptr();
      } else {
        in.node = input.impl().node;
        in.tensor = input.impl_ptr();
      }
    }
    entry.inputs.push_back(std::move(in));
  }
  if (is_anomaly_enabled()) {
    detail::check_forward(name, output, inputs);
    entry.forward = detail::describe_forward(name, output, inputs);
  }
  output.impl().requires_grad = true;
  output.impl().node = entry.id;
  tape.entries.push_back(std::move(entry));
}

void backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  MINIDL_CHECK(root.requires_grad(), "backward: the tensor does not require grad and has no history; "
                                     "call requires_grad_() on the leaves you want gradients for");
  Tensor grad = grad_in;
  const bool implied = !grad.defined();
  if (implied) {
    MINIDL_CHECK(root.numel() == 1, "backward: a gradient can be implied only for a one-element output, but the "
                                    "output has shape ", root.shape(), "; pass backward(gradient)");
    grad = implied_seed(root);
  } else {
    MINIDL_CHECK(grad.shape() == root.shape() && grad.dtype() == root.dtype() && grad.device() == root.device(),
                 "backward: gradient ", grad.shape(), " ", grad.dtype(), " on ", grad.device(),
                 " does not match the output ", root.shape(), " ", root.dtype(), " on ", root.device());
  }
  NoGradGuard no_grad;
  const bool anomaly = is_anomaly_enabled();
  if (anomaly) detail::check_seed(grad);
  if (root.is_leaf()) {
    accumulate_into_leaf(root.impl(), grad);
    if (root.impl().post_accumulate_grad_hooks) run_post_accumulate_hooks(root.impl_ptr());
    return;
  }
  const TapeEntry* root_entry = find_entry(root.impl().node);
  MINIDL_CHECK(root_entry, "backward: this tensor's graph is not on this thread's tape (dropped by clear_tape(), or "
                           "recorded on another thread: the tape is per thread)");

  // Side-stream work joins at the end at the latest, also when a backward function throws: no caller
  // sees a gradient still being written.
  struct JoinSideWork {
    bool done = false;
    ~JoinSideWork() {
      if (done) return;
      try {
        cuda::join_side_streams();
      } catch (...) {  // unwinding already: the first error is the one to report
      }
    }
  } join_side_work;
  // Nothing may pop entries while the walk holds their positions; tensors freed meanwhile are
  // collected by pop_dead_tail() at the end.
  {
    BusyGuard guard;
    const std::vector<size_t> walk = reachable_from(static_cast<size_t>(root_entry - tape.entries.data()));
    Tensor seed = grad.detach();  // its own handle: is_unit_seed recognizes it and nothing else
    struct UnitSeed {             // restored also when a backward function throws
      const TensorImpl* previous = unit_seed;
      ~UnitSeed() { unit_seed = previous; }
    } unit_seed_scope;
    unit_seed = implied ? &seed.impl() : nullptr;
    std::unordered_map<uint64_t, Tensor> pending{{root.impl().node, seed}};
    HookCounts hooks(tape.entries, walk);
    for (size_t index : walk) {
      TapeEntry& e = tape.entries[index];
      auto g = pending.find(e.id);
      if (g == pending.end()) {  // every path to it carried a zero gradient
        hooks.done(e, {});
        continue;
      }
      Tensor grad_output = std::move(g->second);
      pending.erase(g);
      wait_for_side_work(grad_output);
      std::vector<bool> needs;
      for (const TapeInput& in : e.inputs) needs.push_back(in.requires_grad);
      check_saved_versions(e);
      std::vector<Tensor> grads = e.backward(grad_output, needs);
      MINIDL_CHECK(grads.size() == e.inputs.size(), e.name, " backward returned ", grads.size(),
                   " gradients for ", e.inputs.size(), " inputs");
      for (size_t i = 0; i < grads.size(); ++i)
        if (e.inputs[i].requires_grad && grads[i].defined()) grads[i] = checked_gradient(e, i, std::move(grads[i]));
      if (anomaly) detail::check_backward(e.name, e.forward.get(), grad_output, grads, needs);
      std::vector<bool> accumulated(grads.size(), false);
      for (size_t i = 0; i < grads.size(); ++i) {
        const TapeInput& in = e.inputs[i];
        if (!in.requires_grad || !grads[i].defined()) continue;
        if (in.leaf) {
          accumulate_into_leaf(*in.leaf, grads[i]);
          accumulated[i] = true;
        } else if (auto p = pending.find(in.node); p == pending.end()) {
          pending.emplace(in.node, std::move(grads[i]));
        } else {
          wait_for_side_work(p->second);
          wait_for_side_work(grads[i]);
          p->second = add(p->second, grads[i]);
        }
      }
      hooks.done(e, accumulated);
    }
    // Exactly the entries this backward walked are released; other graphs on the tape stay intact.
    if (!retain_graph)
      for (size_t index : walk) tape.entries[index].release();
  }
  cuda::join_side_streams();
  join_side_work.done = true;
  pop_dead_tail();
}

bool is_unit_seed(const Tensor& grad_output) {
  return unit_seed && grad_output.defined() && &grad_output.impl() == unit_seed;
}

size_t tape_size() {
  sweep();
  return static_cast<size_t>(std::count_if(tape.entries.begin(), tape.entries.end(),
                                           [](const TapeEntry& e) { return !e.released(); }));
}

void clear_tape() {
  BusyGuard guard;
  tape.entries.clear();
}

void output_released(uint64_t node) {
  if (tape_gone) return;
  if (!tape.entries.empty() && tape.entries.back().id == node) pop_dead_tail();
}

}  // namespace autograd

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward(*this, gradient, retain_graph);
}

}  // namespace minidl
