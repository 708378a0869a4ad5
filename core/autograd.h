#pragma once
// Tape-based reverse-mode autograd. Each differentiable op run while grad mode is on appends one
// entry to a thread-local tape: its inputs, and a closure that maps the output's gradient to the
// inputs' gradients. Tensor::backward walks, newest first, only the entries reachable from its
// root and releases exactly those; entries that no live tensor can reach any more are dropped.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
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

/// Sets grad mode on or off for its lifetime, as libtorch's AutoGradMode (on inside a NoGradGuard,
/// say, to differentiate there).   `{ AutoGradMode enable_grad(true); auto g = autograd::grad({y}, {x}); }`
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled);
  ~AutoGradMode();
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

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

/// libtorch's names for a list of tensors (gradients, saved tensors, a Function's outputs).
using tensor_list = std::vector<Tensor>;
using variable_list = std::vector<Tensor>;

/// Maps the gradient of an op's output to the gradients of its inputs, in input order. An entry may
/// be left undefined when `needs_grad[i]` is false (the input wants no gradient) or the gradient is zero.
/// While a backward runs with create_graph=true, grad mode is on inside it: the ops it calls are
/// recorded, so what it returns is differentiable again (see record()'s `twice_differentiable`).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs_grad)>;
/// The same for an op with several outputs: one gradient per output, undefined where none reached it.
using MultiBackwardFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, const std::vector<bool>& needs_grad)>;

/// True when grad mode is on and any input requires grad: the op must then call record().
bool needs_recording(std::initializer_list<Tensor> inputs);

/// Appends `output`'s entry to the tape and marks it as requiring grad. `name` appears in errors.
/// `output` must be new: a tensor without history that does not require grad yet.
/// `twice_differentiable`: the backward computes with recorded ops on tensors that keep their history
/// (saved inputs as they were given, saved outputs through saved_output()), so a create_graph backward
/// may go through it; without it such a backward stops with an error naming the op.
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn backward,
            bool twice_differentiable = false);
/// The same for a backward that reads tensors it saved (inputs, the output, or anything else;
/// undefined ones are skipped): each one's version (Tensor::_version) is remembered now, and the
/// backward refuses to run, naming the op, when an in-place write has changed one since.
///   autograd::record("exp", out, {x}, {out}, [y = out.detach()](const Tensor& g, auto&) { ... }, true);
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, const std::vector<Tensor>& saved,
            BackwardFn backward, bool twice_differentiable = false);
/// One entry for an op with several outputs (each new, as for record()); its backward gets one
/// gradient per output.   `autograd::record_multi("f", {&a, &b}, {x}, {}, fn, true);`
void record_multi(const char* name, const std::vector<Tensor*>& outputs, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& saved, MultiBackwardFn backward, bool twice_differentiable = false);

/// Inside a backward function: the op's own output `index`, given as the detached alias the function
/// saved. Outside a create_graph backward that alias is returned as it is; inside one, the output with
/// its history (the entry holds its output weakly, so a closure must never hold it undetached).
///   [y = out.detach()](const Tensor& g, auto&) { return std::vector<Tensor>{mul(g, saved_output(y))}; }
Tensor saved_output(const Tensor& detached, size_t index = 0);

/// Runs backward from `root` with the seed gradient `grad` (ones for a scalar when undefined).
void backward(const Tensor& root, const Tensor& grad, bool retain_graph);

/// Accumulates into .grad of the leaves the gradients of `tensors` (seeded by `grad_tensors`; an
/// undefined or missing one is ones for a one-element tensor), as libtorch's torch::autograd::backward.
/// retain_graph defaults to create_graph; with create_graph the gradients keep their history.
///   autograd::backward({loss1, loss2});
void backward(const variable_list& tensors, const variable_list& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

/// The gradients of `outputs` (weighted by `grad_outputs`, as backward's seed) with respect to
/// `inputs` (leaves or not), returned rather than accumulated: no .grad changes. An input the graph
/// does not reach is an error unless `allow_unused` (its gradient is then undefined). With
/// create_graph the gradients keep their history, so they can be differentiated again (a gradient
/// penalty); retain_graph defaults to create_graph.
///   auto g = autograd::grad({y}, {x}, {ones_like(y)}, /*retain_graph=*/true, /*create_graph=*/true)[0];
variable_list grad(const variable_list& outputs, const variable_list& inputs, const variable_list& grad_outputs = {},
                   std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                   bool allow_unused = false);

/// The backward node of a tensor made by a recorded op (Tensor::grad_fn()).
///   std::cout << (x * 2).grad_fn()->name();   // MulBackward1
class Node {
 public:
  Node(std::string name, uint64_t id) : name_(std::move(name)), id_(id) {}
  /// libtorch's name of the node: "AddBackward0" (tensor + tensor), "AddBackward1" (tensor + scalar),
  /// "MeanBackward0", "MmBackward0", ...; "<Function>Backward" for a custom Function.
  std::string name() const { return name_; }
  /// The tape id of the op.
  uint64_t id() const { return id_; }

 private:
  std::string name_;
  uint64_t id_;
};

/// libtorch's node name for an op recorded as `op` ("mul" -> "MulBackward0"): CamelCase + "Backward0",
/// with libtorch's numbering where one op has several forms; names ending in "Backward" stay as they are.
std::string node_name(const std::string& op, bool scalar_operand, bool scalar_output, bool has_bias);

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
