#pragma once
// Tape-based reverse-mode autograd. Each differentiable op run while grad mode is on appends one
// entry to a thread-local tape: its inputs, and a closure that maps the output's gradient to the
// inputs' gradients. Tensor::backward walks, newest first, only the entries reachable from its
// root and releases exactly those; entries that no live tensor can reach any more are dropped.
#include <cstddef>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// True unless a NoGradGuard is alive on this thread.
bool grad_mode_enabled();

/// Turns tape recording off for its lifetime (evaluation, optimizer steps).
///   { NoGradGuard no_grad; auto out = model->forward(x); }
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// True while an InferenceMode guard is alive on this thread.
bool inference_mode_enabled();

/// Evaluation at its strictest, as torch.inference_mode: nothing is recorded (as NoGradGuard), and
/// every tensor made meanwhile is an inference tensor, which no recorded op accepts later as an
/// input and which cannot be made to require grad: its values were never meant for a backward.
///   { InferenceMode guard; predictions = model->forward(x); }   // clone() one to train on it
class InferenceMode {
 public:
  InferenceMode();
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool previous_;
  NoGradGuard no_grad_;
};

namespace autograd {

/// Maps the gradient of an op's output to the gradients of its inputs, in input order. An entry may
/// be left undefined when `needs_grad[i]` is false (the input wants no gradient) or the gradient is zero.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs_grad)>;

/// True when grad mode is on and any input requires grad: the op must then call record().
bool needs_recording(std::initializer_list<Tensor> inputs);

/// Appends `output`'s entry to the tape and marks it as requiring grad. `name` appears in errors.
/// `output` must be new: a tensor without history that does not require grad yet.
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward);
/// The same for a backward that reads tensors it saved (inputs, the output, or anything else;
/// undefined ones are skipped): each one's version (Tensor::_version) is remembered now, and the
/// backward refuses to run, naming the op, when an in-place write has changed one since.
///   autograd::record("exp", out, {x}, {out}, [y = out.detach()](const Tensor& g, auto&) { ... });
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, const std::vector<Tensor>& saved,
            BackwardFn backward);

/// Runs backward from `root` with the seed gradient `grad` (ones for a scalar when undefined).
void backward(const Tensor& root, const Tensor& grad, bool retain_graph);

/// True when `grad_output` is the seed of the backward now running and that seed is known to be all
/// ones: it was implied (backward() without a gradient), and no op has made a new tensor of it on
/// the way (an op that passes its gradient through unchanged, as add does, keeps it the seed). An
/// op whose forward already wrote its gradient for an output gradient of one (cross_entropy) then
/// returns that instead of multiplying it by one.
bool is_unit_seed(const Tensor& grad_output);

/// Number of entries on this thread's tape that a live tensor can still backward through (dead
/// entries are dropped first): 0 once every graph was backwarded without retain_graph or dropped.
size_t tape_size();
/// Drops every entry on this thread's tape; a later backward through any of them is an error.
/// Rarely needed: a graph is freed by itself when its last tensor is gone.
void clear_tape();

/// Called by ~TensorImpl for a tensor that a recorded op made: frees the entry at once when it is the
/// newest on this thread's tape (nothing can need it then); others wait for the next sweep.
void output_released(uint64_t node);

}  // namespace autograd
}  // namespace minidl
