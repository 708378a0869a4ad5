// The backward walk: the entries reachable from the roots, newest first, each backward run once
// its outputs' gradients are complete, and those gradients passed down to older entries or leaves.
#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/anomaly_mode.h"
#include "core/autograd_internal.h"
#include "core/cuda.h"

namespace minidl::autograd::internal {

namespace {

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

}  // namespace

// One backward: seeds the roots, walks their graph, accumulates into leaves (or, for grad(),
// collects the gradients of `capture`'s inputs). With create_graph, grad mode stays on, so each
// backward function records what it computes.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, bool implied_unit,
                  bool keep_graph, bool create_graph, Capture* capture) {
  GradModeScope grad_scope(create_graph);
  struct GradWalk {  // counted while a grad() walk runs, also when a backward function throws
    bool counted;
    explicit GradWalk(bool c) : counted(c) { grad_walks += counted; }
    ~GradWalk() { grad_walks -= counted; }
  } grad_walk(capture != nullptr);
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
      // A weight's gradient may still be being written on a CUDA side stream; a hook reads it.
      if (leaf->grad_hooks) wait_for_side_work(g);
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
      // As PyTorch does, a backward without retain_graph frees each op's saved tensors as soon as its
      // gradient is taken, not when the walk ends: the backward's memory then falls as it goes, and
      // the gradients and temporaries of the ops below reuse what the ops above kept.
      if (!keep_graph) tape.entries[index].release();
    }
    flush_leaves();
    // The walked entries that did not run (no gradient reached them, or grad() needed none) are
    // released too; other graphs on the tape stay intact.
    if (!keep_graph)
      for (size_t index : walk) tape.entries[index].release();
  }
  cuda::join_side_streams();
  join_side_work.done = true;
  pop_dead_tail();
}

}  // namespace minidl::autograd::internal
