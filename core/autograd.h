#pragma once
// Tape-based reverse-mode autograd. Each differentiable op run while grad mode is on appends one
// entry to a thread-local tape: its inputs, and a closure that maps the output's gradient to the
// inputs' gradients. Tensor::backward walks the tape in reverse and releases what it walked.
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

namespace autograd {

/// Maps the gradient of an op's output to the gradients of its inputs, in input order. An entry may
/// be left undefined when `needs_grad[i]` is false (the input wants no gradient) or the gradient is zero.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs_grad)>;

/// True when grad mode is on and any input requires grad: the op must then call record().
bool needs_recording(std::initializer_list<Tensor> inputs);

/// Appends `output`'s entry to the tape and marks it as requiring grad. `name` appears in errors.
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward);

/// Runs backward from `root` with the seed gradient `grad` (ones for a scalar when undefined).
void backward(const Tensor& root, const Tensor& grad, bool retain_graph);

/// Number of entries on this thread's tape: 0 after a backward without retain_graph.
size_t tape_size();
/// Drops every entry on this thread's tape, e.g. after a forward pass that will never be backwarded.
void clear_tape();

}  // namespace autograd
}  // namespace minidl
