// checkpoint: one tape entry for fn's outputs, whose backward runs fn again with grad mode on (the
// generator and autocast as they were) and a nested backward over the recomputed graph. The engine
// allows that nesting: a walk keeps its own pending gradients, and the tape stays busy (nothing is
// popped) until the outermost walk ends.
#include "core/autograd_checkpoint.h"

#include <memory>
#include <optional>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/autograd_internal.h"
#include "core/error.h"
#include "core/random.h"

namespace minidl::autograd {

namespace {

// autocast's state on one device type, to be set again for the recomputation.
struct AutocastState {
  DeviceType type;
  bool enabled;
  DType dtype;
};

// Runs its scope as a forward: not inside the backward function that calls it, so that autocast
// applies and saved_output() sees no running entry.
struct AsForward {
  uint64_t previous = internal::running_entry;
  AsForward() { internal::running_entry = 0; }
  ~AsForward() { internal::running_entry = previous; }
};

}  // namespace

std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs, bool preserve_rng_state) {
  MINIDL_CHECK(fn, "checkpoint: fn is empty");
  if (!grad_mode_enabled()) return fn(inputs);  // nothing will be differentiated: nothing to save
  bool any_requires_grad = false;
  for (const Tensor& x : inputs) any_requires_grad = any_requires_grad || (x.defined() && x.requires_grad());
  MINIDL_CHECK(any_requires_grad, "checkpoint: none of the ", inputs.size(),
               " inputs requires grad, so the backward would never reach fn's parameters; pass a tensor that "
               "requires grad (a block's input, not the data), as PyTorch's reentrant checkpoint needs");
  std::optional<Generator::State> rng;
  if (preserve_rng_state) {
    MINIDL_CHECK(!default_generator().capturing(), "checkpoint: preserve_rng_state while a CUDA graph captures is "
                 "not supported; pass preserve_rng_state=false where fn draws no random numbers");
    rng = default_generator().state();
  }
  std::vector<AutocastState> autocast_state;
  for (DeviceType type : {DeviceType::CPU, DeviceType::CUDA})
    autocast_state.push_back({type, autocast::is_enabled(type), autocast::dtype(type)});

  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  std::vector<Tensor*> recorded;
  for (Tensor& out : outputs) {
    MINIDL_CHECK(out.defined(), "checkpoint: fn returned an undefined tensor");
    out = out.detach();  // a new handle: an output that is one of the inputs still gets its own entry
    if (is_floating(out.dtype())) recorded.push_back(&out);
  }
  if (recorded.empty()) return outputs;
  std::vector<Tensor> saved_inputs = inputs;
  // The inputs are saved: an in-place change to one before the backward stops it, as for any op,
  // since the recomputation would read the changed values.
  record_multi(
      "CheckpointFunction", recorded, inputs, inputs,
      [fn, saved_inputs, rng, autocast_state](const std::vector<Tensor>& grads, const std::vector<bool>& needs) {
        MINIDL_CHECK(internal::grad_walks == 0, "checkpoint: autograd::grad() cannot go through a checkpoint, "
                     "whose backward accumulates into .grad (as PyTorch's reentrant checkpoint); use backward()");
        std::vector<Tensor> fresh;
        for (size_t i = 0; i < saved_inputs.size(); ++i) {
          Tensor x = saved_inputs[i].defined() ? saved_inputs[i].detach() : Tensor();
          if (x.defined() && needs[i]) x.requires_grad_();
          fresh.push_back(x);
        }
        std::vector<Tensor> again;
        {
          AsForward as_forward;
          AutoGradMode grad_on(true);
          std::optional<Generator::State> after;
          if (rng) {
            after = default_generator().state();
            default_generator().set_state(*rng);
          }
          struct Restore {
            std::optional<Generator::State>& state;
            ~Restore() {
              if (state) default_generator().set_state(*state);
            }
          } restore{after};
          std::vector<std::unique_ptr<AutocastGuard>> guards;
          for (const AutocastState& a : autocast_state)
            guards.push_back(std::make_unique<AutocastGuard>(Device(a.type), a.dtype, a.enabled));
          again = fn(fresh);
        }
        std::vector<Tensor> roots, seeds;
        size_t k = 0;
        for (const Tensor& out : again) {
          if (!is_floating(out.dtype())) continue;
          const Tensor& g = grads.at(k++);
          if (g.defined() && out.requires_grad()) {
            roots.push_back(out);
            seeds.push_back(g);
          }
        }
        if (!roots.empty()) backward(roots, seeds);
        std::vector<Tensor> input_grads;
        for (size_t i = 0; i < fresh.size(); ++i)
          input_grads.push_back(needs[i] && fresh[i].defined() ? fresh[i].grad() : Tensor());
        return input_grads;
      });
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool preserve_rng_state) {
  MINIDL_CHECK(fn, "checkpoint: fn is empty");
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input},
                    preserve_rng_state)[0];
}

}  // namespace minidl::autograd
