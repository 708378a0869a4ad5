#pragma once
// Master weights under autocast. A float32 leaf weight that requires grad (a model's parameter)
// enters a lower-precision product as its 16-bit copy, and the product records the float32 leaf
// itself on the tape: its backward writes the weight's gradient in float32 directly (the GEMM
// accumulates in float32 and stores float32), so no cast runs on the way back. On the way in, an
// optimizer step writes the copies as it updates their weights (copies_to_write); any copy whose
// float32 weight moved on otherwise is made again, with the others, in one multi-tensor pass when a
// region opens (while a CUDA graph captures, every copy but those a cuda::GraphedStep's update
// writes, so that each replay makes them again), instead of one cast per weight per region. The values are those of
// PyTorch's autocast, which casts each weight to the low dtype for the product and the gradient
// back to float32 (one rounding less on the gradient here).
//
// The linear-layer ops (ops/matmul.cpp) and the convolutions (ops/conv2d.cpp, ops/conv2d_relu.cpp)
// take this path (autocast::call_with_masters); the convolutions widen their gradients inside their
// node (cuDNN's weight gradient in the copy out of its filter layout; the direct first-layer kernel
// writes float32). Other lower-precision ops cast their inputs as before (ops/autocast_policy.h).
#include <vector>

#include "core/tensor.h"
#include "ops/autocast_policy.h"

namespace minidl::autocast {

/// Whether `t` enters `target`'s op as a master weight: a float32 leaf on the target's device that
/// requires grad, with grad mode on and the autocast cache enabled, cast to a 16-bit dtype.
bool is_master(const Target& target, const Tensor& t);

/// The current `dtype` copy of the master weight `master` (detached: it records nothing). Made once
/// per weight; remade, with every other copy in one pass, when a new region finds them stale.
Tensor master_copy(const Tensor& master, DType dtype);

/// Copies held for masters still alive (for tests).
size_t master_copy_count();

/// For an optimizer step on `params` that writes their copies along with them, so that no pass
/// has to make them again: one copy per parameter in one 16-bit dtype, undefined where there is
/// none or where something besides autocast holds it (a tape keeps its old values); empty when
/// there is none at all. Once the step has bumped the parameters' versions, copies_written(params,
/// copies) marks those copies current.
///   std::vector<Tensor> copies = autocast::copies_to_write(params);
///   config.copies = copies.empty() ? nullptr : &copies;  sgd_update_(params, ..., config);
///   autocast::copies_written(params, copies);
std::vector<Tensor> copies_to_write(const std::vector<Tensor>& params);
void copies_written(const std::vector<Tensor>& params, const std::vector<Tensor>& written);

/// Makes again, in place, the copies whose masters changed since (a weight written between two
/// replays of a graph). The owner of a captured step calls it before each replay.
void refresh_stale_copies();

/// While alive, a graph captured on this thread leaves out of its pass that makes the copies those
/// the step's optimizer wrote last and that are current: the replays write them in that update, and
/// the owner calls refresh_stale_copies() before each replay for any weight written in between.
/// cuda::GraphedStep holds one around its capture.
class ReplaysRefreshStaleCopies {
 public:
  ReplaysRefreshStaleCopies();
  ~ReplaysRefreshStaleCopies();
  ReplaysRefreshStaleCopies(const ReplaysRefreshStaleCopies&) = delete;
  ReplaysRefreshStaleCopies& operator=(const ReplaysRefreshStaleCopies&) = delete;

 private:
  bool previous_;
};

/// An op's tensor arguments as the tape should see them, in argument order: the float32 master
/// where the argument entered as a master's copy, else undefined (the argument stands for itself).
using Masters = std::vector<Tensor>;

/// The tensor the tape records for argument `i`: its master, or itself.
inline const Tensor& recorded(const Masters& masters, size_t i, const Tensor& arg) {
  return i < masters.size() && masters[i].defined() ? masters[i] : arg;
}

namespace detail {
template <class T>
const T& master_arg(const Target&, const T& value, Masters&) {
  return value;
}
// The op's input (the first tensor) is cast as any input is; a later tensor may be a master.
inline Tensor master_arg(const Target& target, const Tensor& t, Masters& masters) {
  const bool input = masters.empty();
  if (!input && is_master(target, t)) {
    masters.push_back(t);
    return master_copy(t, target.dtype);
  }
  masters.emplace_back();
  return convert(target, t);
}
}  // namespace detail

/// As autocast::call for an op whose first argument is its input and whose later tensors are
/// weights and biases: master weights enter as their copies, and fn gets the Masters last.
///   return autocast::call_with_masters(target, [](auto&&... a) { return linear_op(a...); }, x, w, b);
template <class Fn, class... Args>
auto call_with_masters(const Target& target, Fn&& fn, const Args&... args) {
  note_dispatch(target);
  Masters masters;
  // Braced: the arguments are converted left to right, so masters is in argument order.
  auto converted = std::tuple{detail::master_arg(target, args, masters)...};
  ExcludeGuard exclude;
  return std::apply([&](const auto&... a) { return fn(a..., masters); }, converted);
}

}  // namespace minidl::autocast

/// MINIDL_AUTOCAST for ops that take master weights: FN(args..., masters) runs on the converted
/// arguments, the masters recorded in place of their copies.
#define MINIDL_AUTOCAST_MASTERS(OP, FN, ...) \
  MINIDL_AUTOCAST_THROUGH(::minidl::autocast::call_with_masters, OP, FN, __VA_ARGS__)
