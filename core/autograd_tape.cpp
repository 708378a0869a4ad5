// The tape: record() appends an entry per op, and entries whose outputs no live tensor can reach
// are dropped (popped at the tail at once, or swept when the tape has doubled).
#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "core/anomaly_mode.h"
#include "core/autograd_internal.h"

namespace minidl::autograd {

namespace internal {

constinit thread_local bool tape_gone = false;
thread_local Tape tape;

namespace {
std::atomic<uint64_t> next_node_id{1};
}  // namespace

constinit thread_local uint64_t running_entry = 0;
constinit thread_local int grad_walks = 0;

// The newest entries are inputs of nothing, so a dead one there can go at once: a forward whose
// output is dropped frees its whole graph here, newest first, as each freed closure lets go of
// the tensors it saved.
void pop_dead_tail() {
  if (tape.busy) return;
  BusyGuard guard;
  while (!tape.entries.empty() && !tape.entries.back().output_alive()) tape.entries.pop_back();
}

namespace {

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

}  // namespace

// The entry that made node `node` (any of its outputs).
TapeEntry* find_entry(uint64_t node) {
  auto it = std::upper_bound(tape.entries.begin(), tape.entries.end(), node,
                             [](uint64_t n, const TapeEntry& e) { return n < e.id; });
  if (it == tape.entries.begin()) return nullptr;
  --it;
  return it->has(node) ? &*it : nullptr;
}

}  // namespace internal

using namespace internal;

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

}  // namespace minidl::autograd
