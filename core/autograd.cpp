#include "core/autograd.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <string_view>
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
// The entry whose backward runs now on this thread (0: none), for saved_output().
thread_local uint64_t running_entry = 0;

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

bool needed_by(const TapeEntry& e, const std::unordered_set<uint64_t>& needed) {
  for (uint32_t k = 0; k < e.n_outputs; ++k)
    if (needed.count(e.id + k)) return true;
  return false;
}

// Drops every entry that no live tensor can reach: dead (its outputs are gone) and not an input of a
// kept entry. One pass from the newest entry down, since inputs are always older than their users;
// dropping an entry frees its closure at once, so whatever that closure kept alive is seen dead
// further down in the same pass.
void sweep() {
  {
    BusyGuard guard;
    std::unordered_set<uint64_t> needed;
    for (size_t i = tape.entries.size(); i-- > 0;) {
      TapeEntry& e = tape.entries[i];
      if (!e.output_alive() && !needed_by(e, needed)) {
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

// The entry that made node `node` (any of its outputs).
TapeEntry* find_entry(uint64_t node) {
  auto it = std::upper_bound(tape.entries.begin(), tape.entries.end(), node,
                             [](uint64_t n, const TapeEntry& e) { return n < e.id; });
  if (it == tape.entries.begin()) return nullptr;
  --it;
  return it->has(node) ? &*it : nullptr;
}

void check_not_released(const TapeEntry& e, bool is_root) {
  MINIDL_CHECK(!e.released(), "backward: ", is_root ? "this tensor's op '" : "the graph goes through '", e.name,
               "', which was already freed by an earlier backward(); use retain_graph=true on the first backward() "
               "to walk this graph again");
}

// The entries reachable from the root nodes, newest first: the walk's order, since every input is
// older than its user. Throws before any gradient is computed if one of them was freed or is not on
// this tape.
std::vector<size_t> reachable_from(size_t start, std::unordered_set<uint64_t> wanted) {
  const std::unordered_set<uint64_t> roots = wanted;
  std::vector<size_t> walk;
  for (size_t i = start + 1; i-- > 0 && !wanted.empty();) {
    const TapeEntry& e = tape.entries[i];
    bool hit = false, root = false;
    for (uint32_t k = 0; k < e.n_outputs; ++k) {
      if (wanted.erase(e.id + k)) hit = true;
      if (roots.count(e.id + k)) root = true;
    }
    if (!hit) continue;
    check_not_released(e, root);
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

// The leaves with post-accumulate hooks that a walk reaches, and how many of its entries may still
// add to each: a hook runs when the last of them has had its turn (given a gradient or not). Leaves
// with gradient hooks are left out: their gradient is summed first and accumulated after the walk.
struct HookCounts {
  std::unordered_map<TensorImpl*, std::pair<int, bool>> remaining;  // leaf -> (entries left, got a gradient)

  static bool counted(const TapeInput& in) {
    return in.leaf && in.leaf->post_accumulate_grad_hooks && !has_grad_hooks(*in.leaf);
  }
  HookCounts(const std::vector<TapeEntry>& entries, const std::vector<size_t>& walk, bool enabled) {
    if (!enabled) return;
    for (size_t index : walk)
      for (const TapeInput& in : entries[index].inputs)
        if (counted(in)) ++remaining[in.leaf.get()].first;
  }
  // After entry `e` has had its turn (`accumulated[i]`: input i received a gradient).
  void done(const TapeEntry& e, const std::vector<bool>& accumulated) {
    if (remaining.empty()) return;
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const TapeInput& in = e.inputs[i];
      if (!counted(in)) continue;
      auto& [left, got] = remaining[in.leaf.get()];
      got = got || (i < accumulated.size() && accumulated[i]);
      if (--left == 0 && got) run_post_accumulate_hooks(in.leaf);
    }
  }
};

Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  wait_for_side_work(a);
  wait_for_side_work(b);
  return add(a, b);
}

// What grad() collects instead of accumulating into .grad: the gradient of each input.
struct Capture {
  std::unordered_map<const TensorImpl*, size_t> leaves;  // leaf -> slot
  std::unordered_map<uint64_t, size_t> nodes;            // node id of a non-leaf -> slot
  std::vector<Tensor> grads;                             // by slot
};

struct GradModeScope {
  bool previous = grad_mode;
  explicit GradModeScope(bool on) { grad_mode = on; }
  ~GradModeScope() { grad_mode = previous; }
};

struct RunningEntry {
  uint64_t previous = running_entry;
  explicit RunningEntry(uint64_t id) { running_entry = id; }
  ~RunningEntry() { running_entry = previous; }
};

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

// One backward: seeds the roots, walks their graph, accumulates into leaves (or, for grad(),
// collects the gradients of `capture`'s inputs). With create_graph, grad mode stays on, so each
// backward function records what it computes.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, bool implied_unit,
                  bool keep_graph, bool create_graph, Capture* capture) {
  GradModeScope grad_scope(create_graph);
  const bool anomaly = is_anomaly_enabled();
  if (anomaly)
    for (const Tensor& s : seeds) detail::check_seed(s);

  // Leaves whose gradient is summed over the walk and delivered at its end: every leaf grad()
  // captures, and every leaf with gradient hooks (a hook sees the whole gradient once).
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> leaf_sums;
  std::unordered_map<const TensorImpl*, size_t> leaf_sum_index;
  auto to_leaf = [&](const std::shared_ptr<TensorImpl>& leaf, const Tensor& g) -> bool {
    const bool captured = capture && capture->leaves.count(leaf.get());
    if (capture && !captured) return false;  // grad() leaves every .grad alone
    if (!captured && !has_grad_hooks(*leaf)) {
      accumulate_into_leaf(*leaf, g);
      return true;
    }
    auto [it, fresh] = leaf_sum_index.emplace(leaf.get(), leaf_sums.size());
    if (fresh) leaf_sums.emplace_back(leaf, g);
    else leaf_sums[it->second].second = sum_gradients(leaf_sums[it->second].second, g);
    return true;
  };
  auto flush_leaves = [&] {
    for (auto& [leaf, g] : leaf_sums) {
      Tensor grad = leaf->grad_hooks ? run_tensor_hooks(*leaf->grad_hooks, g) : g;
      if (capture) {
        Tensor& slot = capture->grads[capture->leaves.at(leaf.get())];
        slot = sum_gradients(slot, grad);
        continue;
      }
      accumulate_into_leaf(*leaf, grad);
      if (leaf->post_accumulate_grad_hooks) run_post_accumulate_hooks(leaf);
    }
  };

  std::unordered_map<uint64_t, Tensor> pending;
  std::unordered_set<uint64_t> root_nodes;
  Tensor unit;  // the implied seed's own handle: is_unit_seed recognizes it and nothing else
  size_t start = 0;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    if (root.is_leaf()) {
      to_leaf(root.impl_ptr(), seeds[r]);
      if (!capture && !has_grad_hooks(root.impl()) && root.impl().post_accumulate_grad_hooks)
        run_post_accumulate_hooks(root.impl_ptr());
      continue;
    }
    const TapeEntry* entry = find_entry(root.impl().node);
    MINIDL_CHECK(entry, "backward: this tensor's graph is not on this thread's tape (dropped by clear_tape(), or "
                        "recorded on another thread: the tape is per thread)");
    start = std::max(start, static_cast<size_t>(entry - tape.entries.data()));
    root_nodes.insert(root.impl().node);
    Tensor seed = create_graph ? seeds[r] : seeds[r].detach();
    if (implied_unit && roots.size() == 1) unit = seed;
    Tensor& p = pending[root.impl().node];
    p = sum_gradients(p, seed);
  }
  if (root_nodes.empty()) {
    flush_leaves();
    return;
  }

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
  // Nothing may pop or sweep entries while the walk holds their positions (a create_graph backward
  // appends entries, which is safe: positions stay); tensors freed meanwhile are collected by
  // pop_dead_tail() at the end.
  {
    BusyGuard guard;
    const std::vector<size_t> walk = reachable_from(start, root_nodes);
    struct UnitSeed {  // restored also when a backward function throws
      const TensorImpl* previous = unit_seed;
      ~UnitSeed() { unit_seed = previous; }
    } unit_seed_scope;
    unit_seed = unit.defined() ? &unit.impl() : nullptr;

    // grad() runs only the entries through which some input can be reached.
    std::unordered_set<uint64_t> leads;  // node ids of outputs from which an input is reachable
    auto input_leads = [&](const TapeInput& in) {
      if (!in.requires_grad) return false;
      if (in.leaf) return capture->leaves.count(in.leaf.get()) > 0;
      return leads.count(in.node) > 0 || capture->nodes.count(in.node) > 0;
    };
    if (capture) {
      for (size_t w = walk.size(); w-- > 0;) {
        const TapeEntry& e = tape.entries[walk[w]];
        if (std::any_of(e.inputs.begin(), e.inputs.end(), input_leads))
          for (uint32_t k = 0; k < e.n_outputs; ++k) leads.insert(e.id + k);
      }
    }

    HookCounts hooks(tape.entries, walk, capture == nullptr);
    std::vector<Tensor> grad_outputs;
    for (size_t index : walk) {
      TapeEntry* e = &tape.entries[index];
      grad_outputs.assign(e->n_outputs, Tensor());
      bool any = false;
      for (uint32_t k = 0; k < e->n_outputs; ++k) {
        auto g = pending.find(e->id + k);
        if (g == pending.end()) continue;
        grad_outputs[k] = std::move(g->second);
        pending.erase(g);
        wait_for_side_work(grad_outputs[k]);
        any = true;
      }
      if (!any) {  // every path to it carried a zero gradient
        hooks.done(*e, {});
        continue;
      }
      // The gradient of each output is complete now: its hooks, a retained .grad, grad()'s capture.
      // Anything below may record ops (create_graph), which may move the tape: `e` is fetched again
      // after each, and the extras (on the heap) stay where they are.
      const uint64_t id = e->id;
      EntryExtras* extras = e->extras.get();
      for (uint32_t k = 0; k < grad_outputs.size(); ++k) {
        Tensor& g = grad_outputs[k];
        if (!g.defined()) continue;
        if (extras) {
          for (size_t h = 0; h < extras->hooks.size(); ++h) {
            if (extras->hooks[h].first != k || !extras->hooks[h].second) continue;
            auto hook = extras->hooks[h].second;  // a hook may register hooks
            Tensor replaced = hook(g);
            if (replaced.defined()) g = std::move(replaced);
          }
          for (const auto& [output, weak] : extras->retained)
            if (auto t = weak.lock(); output == k && t) retain_into(*t, g);
        }
        if (capture)
          if (auto c = capture->nodes.find(id + k); c != capture->nodes.end())
            capture->grads[c->second] = sum_gradients(capture->grads[c->second], g);
      }
      e = &tape.entries[index];
      std::vector<bool> needs;
      needs.reserve(e->inputs.size());
      for (const TapeInput& in : e->inputs) needs.push_back(capture ? input_leads(in) : in.requires_grad);
      if (capture && std::none_of(needs.begin(), needs.end(), [](bool b) { return b; })) continue;
      MINIDL_CHECK(!create_graph || e->twice_differentiable, "the backward of '", e->name,
                   "' is not differentiable twice; a backward with create_graph=true (or autograd::grad with "
                   "create_graph) cannot go through it. Compose the op from twice-differentiable ops, or keep it "
                   "out of the part of the graph that is differentiated twice");
      check_saved_versions(*e);
      std::vector<Tensor> grads;
      {
        // The closure runs from a local: with create_graph it records entries, and the tape's
        // vector may move while it runs.
        RunningEntry running(e->id);
        if (e->extras && e->extras->multi_backward) {
          auto fn = std::move(e->extras->multi_backward);
          struct Restore {
            autograd::MultiBackwardFn& fn;
            size_t index;
            ~Restore() { tape.entries[index].extras->multi_backward = std::move(fn); }
          } restore{fn, index};
          grads = fn(grad_outputs, needs);
        } else {
          auto fn = std::move(e->backward);
          struct Restore {
            autograd::BackwardFn& fn;
            size_t index;
            ~Restore() { tape.entries[index].backward = std::move(fn); }
          } restore{fn, index};
          grads = fn(grad_outputs[0], needs);
        }
      }
      e = &tape.entries[index];
      MINIDL_CHECK(grads.size() == e->inputs.size(), e->name, " backward returned ", grads.size(),
                   " gradients for ", e->inputs.size(), " inputs");
      for (size_t i = 0; i < grads.size(); ++i)
        if (needs[i] && grads[i].defined()) grads[i] = checked_gradient(tape.entries[index], i, std::move(grads[i]));
      e = &tape.entries[index];
      if (anomaly) {
        const Tensor* received = &grad_outputs[0];
        for (const Tensor& g : grad_outputs)
          if (g.defined()) received = &g;
        detail::check_backward(e->name, e->forward.get(), *received, grads, needs);
      }
      std::vector<bool> accumulated(grads.size(), false);
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!needs[i] || !grads[i].defined()) continue;
        const TapeInput& in = tape.entries[index].inputs[i];
        if (in.leaf) {
          const std::shared_ptr<TensorImpl> leaf = in.leaf;  // its own handle: the tape may move
          accumulated[i] = to_leaf(leaf, grads[i]);
        } else if (auto p = pending.find(in.node); p == pending.end()) {
          pending.emplace(in.node, std::move(grads[i]));
        } else {
          p->second = sum_gradients(p->second, grads[i]);
        }
      }
      hooks.done(tape.entries[index], accumulated);
    }
    flush_leaves();
    // Exactly the entries this backward walked are released; other graphs on the tape stay intact.
    if (!keep_graph)
      for (size_t index : walk) tape.entries[index].release();
  }
  cuda::join_side_streams();
  join_side_work.done = true;
  pop_dead_tail();
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

bool needs_recording(std::initializer_list<Tensor> inputs) {
  if (!grad_mode) return false;
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

namespace {

// Giving history to a tensor that has some, or to a leaf that requires grad, would silently cut
// the first graph or turn the leaf into a non-leaf whose .grad never fills.
void check_new_output(const char* name, const Tensor& output) {
  MINIDL_CHECK(output.is_leaf() && !output.requires_grad(), name, ": the output passed to record() is ",
               output.is_leaf() ? "a leaf that requires grad" : "already the output of another op",
               "; record a new tensor (the op's result), not one of its inputs");
}

TapeEntry& append_entry(const char* name, Tensor& output, uint32_t n_outputs, const std::vector<Tensor>& inputs,
                        const std::vector<Tensor>& saved, BackwardFn backward, bool twice_differentiable) {
  if (tape.entries.size() >= tape.sweep_at && !tape.busy) sweep();
  TapeEntry entry{next_node_id.fetch_add(n_outputs), name, output.impl_ptr(), {}, {}, std::move(backward),
                  nullptr, nullptr, n_outputs, twice_differentiable};
  entry.saved.reserve(saved.size());
  for (const Tensor& t : saved)
    if (t.defined()) entry.saved.push_back({t.impl().storage, t._version(), t.impl_ptr()});
  entry.inputs.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    MINIDL_CHECK(!input.defined() || !input.impl().inference, name,
                 ": an input is an inference tensor (made under InferenceMode), which an op recorded for backward "
                 "cannot use; clone() it outside InferenceMode to get a normal tensor");
    TapeInput in;
    in.defined = input.defined();
    if (input.defined() && input.requires_grad()) {
      in.requires_grad = true;
      if (input.is_leaf()) {
        in.leaf = input.impl_ptr();
      } else {
        in.node = input.impl().node;
        in.tensor = input.impl_ptr();
      }
    } else if (input.defined()) {
      in.wrapped_number = input.is_wrapped_number();
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
  return tape.entries.back();
}

}  // namespace

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward,
            bool twice_differentiable) {
  record(name, output, inputs, {}, std::move(backward), twice_differentiable);
}

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, const std::vector<Tensor>& saved,
            BackwardFn backward, bool twice_differentiable) {
  check_new_output(name, output);
  append_entry(name, output, 1, inputs, saved, std::move(backward), twice_differentiable);
}

void record_multi(const char* name, const std::vector<Tensor*>& outputs, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& saved, MultiBackwardFn backward, bool twice_differentiable) {
  MINIDL_CHECK(!outputs.empty(), name, ": record_multi needs at least one output");
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_new_output(name, *outputs[i]);
    for (size_t j = 0; j < i; ++j)
      MINIDL_CHECK(!outputs[i]->is_same(*outputs[j]), name, ": output ", i, " is output ", j, " again");
  }
  // The single-output slot holds a stub, so that released() reads the same for every entry.
  TapeEntry& e = append_entry(name, *outputs[0], static_cast<uint32_t>(outputs.size()), inputs, saved,
                              [](const Tensor&, const std::vector<bool>&) { return std::vector<Tensor>{}; },
                              twice_differentiable);
  e.extras = std::make_unique<EntryExtras>();
  e.extras->multi_backward = std::move(backward);
  const uint64_t id = e.id;
  for (size_t k = 1; k < outputs.size(); ++k) {
    e.extras->more_outputs.push_back(outputs[k]->impl_ptr());
    outputs[k]->impl().requires_grad = true;
    outputs[k]->impl().node = id + k;
  }
}

Tensor saved_output(const Tensor& detached, size_t index) {
  if (!grad_mode || !running_entry || !detached.defined()) return detached;
  const TapeEntry* e = find_entry(running_entry);
  if (!e) return detached;
  if (auto live = e->output_impl(index))
    if (live->storage == detached.impl().storage && live->offset == detached.offset() &&
        live->shape == detached.shape())
      return Tensor(live);
  // The output itself is gone (its entry lives on as an input of others): a new handle to the same
  // memory, with the same node, stands for it.
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = detached.impl().storage;
  impl->offset = detached.offset();
  impl->shape = detached.shape();
  impl->strides = detached.strides();
  impl->dtype = detached.dtype();
  impl->requires_grad = true;
  impl->node = e->id + index;
  return Tensor(impl);
}

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
  if (!tape.entries.empty() && tape.entries.back().has(node)) pop_dead_tail();
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
